"""``jobhook simulate`` refuses an option that the chosen provider's simulator does not use, and
the declared uses (``receiver.sim.options.USED``) agree with what the simulators do."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from receiver.sim import ManualClock, Simulator
from receiver.sim.command import simulate
from receiver.sim.options import USED
from receiver.sim.shapes import SHAPES, ResultLink, Shape
from tests.support import SECRET


def _providers() -> list[str]:
    (option,) = [p for p in simulate.params if p.name == "provider"]
    assert isinstance(option.type, click.Choice)
    return [str(choice) for choice in option.type.choices]


def test_every_provider_declares_its_options_and_every_option_is_used_somewhere() -> None:
    names = {p.name for p in simulate.params}
    assert sorted(USED) == sorted(_providers())
    for provider, used in USED.items():
        assert used <= names, f"{provider} declares options simulate does not have"
    assert set().union(*USED.values()) == names, "an option no simulator uses"


@pytest.mark.parametrize(
    ("provider", "given", "option"),
    [
        ("mistral", ["--pages", "5"], "--pages"),
        ("google-docai", ["--webhook-url", "http://127.0.0.1:9/h"], "--webhook-url"),
        ("unstructured", ["--secret", SECRET], "--secret"),
        ("landingai", ["--jobs", "3"], "--jobs"),
        ("azure-docintel", ["--result", "url"], "--result"),
        ("google-docai", ["--api-key", "sim-key-0123"], "--api-key"),
        ("textract", ["--secret", SECRET], "--secret"),
        ("textract", ["--drop", "0.5"], "--drop"),
        ("docling", ["--pages", "2"], "--pages"),
        ("reducto", ["--native-secret", "native-0123456789"], "--native-secret"),
        ("docurift", ["--url-ttl", "60"], "--url-ttl"),
        ("knowhere", ["--blocks", "10"], "--blocks"),
        ("llamaparse", ["--key-out", "key.json"], "--key-out"),
    ],
)
def test_an_option_the_simulator_does_not_use_is_refused_with_the_providers_that_do(
    provider: str, given: list[str], option: str
) -> None:
    result = CliRunner().invoke(simulate, ["--provider", provider, *given])
    assert result.exit_code == 2, result.output
    assert f"{option} does not apply to --provider {provider}" in result.output
    assert "(it applies to " in result.output
    assert SECRET not in result.output


def test_values_from_the_environment_are_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """JOBHOOK_SIM_SECRET may be set for every run: textract does not refuse it, and goes on to
    its own check (no AWS key pair here)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(
        simulate, ["--provider", "textract"], env={"JOBHOOK_SIM_SECRET": SECRET}
    )
    assert result.exit_code == 2
    assert "does not apply" not in result.output
    assert "AWS_ACCESS_KEY_ID" in result.output


def _bodies(provider: str, pages: int) -> list[Any]:
    """Everything the provider's API and webhooks say of one job, running and finished."""
    clock = ManualClock(1_800_000_000.0)
    sim = Simulator(provider, api_key="sim-key", clock=clock, duration=10.0, pages=pages)
    (job_id,) = sim.create_jobs()
    job = sim.jobs.get(job_id)
    assert job is not None
    link = ResultLink("https://blobs.example/r", 1_800_003_600, job.blob_id)
    said: list[Any] = [
        sim.shape.job_body(job, job.snapshot(now), link)
        for now in (job.created + 5.0, job.finishes_at + 1.0)
    ]
    said += [sim.shape.webhook_body(job, phase, job.entered_at(i), "evt_1")
             for i, phase in enumerate(job.phases)]  # fmt: skip
    return said


@pytest.mark.parametrize("provider", sorted(SHAPES))
def test_a_webhook_provider_declares_exactly_what_its_shape_uses(provider: str) -> None:
    shape = SHAPES[provider]
    used = USED[provider]
    assert ("pages" in used) == (_bodies(provider, 1) != _bodies(provider, 9))
    assert ("url_ttl" in used) == ("url" in shape.results)  # presigned URLs expire
    sized = "url" in shape.results or shape.result_route is not None
    assert ("result_bytes" in used) == sized  # blobs and served results have that size
    signs = shape.native_headers is not Shape.native_headers
    assert ("native_secret" in used) == signs
