"""LlamaParse's adapter and simulator in small: the webhook bodies it reads (an object or a
JSON-encoded string, the job at ``data.id``), the sources it accepts, and the simulator refusing
what LlamaCloud refuses, through the official SDK."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import llama_cloud
import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError, PayloadError
from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.base import hinted_job
from receiver.providers.llamaparse import JOB_FIELDS
from receiver.sim.llamaparse import LlamaParseSim, ParseJob
from tests.providers.simdriver import served_in_thread

if TYPE_CHECKING:
    from pathlib import Path

KEY = "llamaparse-unit-key"
PAYLOAD = {"event_id": "e1", "event_type": "parse.partial_success", "data": {"id": "job-1"}}


@pytest.mark.parametrize(
    "body",
    [PAYLOAD, json.dumps(PAYLOAD),
     {"event_type": "parse.partial_success", "data": {"job_id": "job-1"}},
     {"event_type": "parse.partial_success", "job_id": "job-1"}],
    ids=["object", "string", "data.job_id", "job_id"],
)  # fmt: skip
def test_a_webhook_names_its_job_as_an_object_or_a_string(body: Any) -> None:
    event = get_provider("llamaparse").parse_webhook(body, source="lp", message_id="m")
    assert (event.job_id, event.state, event.provider_status) == (
        "job-1", State.PARTIAL, "parse.partial_success",
    )  # fmt: skip
    assert hinted_job(body, JOB_FIELDS) == "job-1"


@pytest.mark.parametrize(
    "body",
    ['"not json', json.dumps([PAYLOAD]), {"event_type": "parse.success", "data": {"id": ""}},
     {"data": {"id": "job-1"}}, json.dumps(json.dumps(PAYLOAD))],
    ids=["bad-string", "a-list", "empty-id", "no-event", "string-twice"],
)  # fmt: skip
def test_a_webhook_that_names_no_job_or_event_is_a_payload_error(body: Any) -> None:
    with pytest.raises(PayloadError) as caught:
        get_provider("llamaparse").parse_webhook(body, source="lp", message_id="m")
    assert caught.value.status_code == 400


def _config(tmp_path: Path, auth: str) -> Path:
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path}"\n[sources.lp]\nprovider = "llamaparse"\n{auth}'
        'api_base_url = "http://127.0.0.1:9"\napi_key = "env:KEY"\n'
    )
    return path


def test_a_source_is_signed_with_llamacloud_or_takes_header_hints(tmp_path: Path) -> None:
    signed = 'signature = "llamacloud"\nsecrets = ["0123456789abcdef0123"]\n'
    settings = load_settings(_config(tmp_path, signed), environ={"KEY": "k"})
    assert settings.sources["lp"].signature == "llamacloud"
    header = ('webhook_mode = "direct"\ndirect_header = "X-Jobhook-Token"\n'
              f'direct_header_values = ["{"t" * 43}"]\n')  # fmt: skip
    assert load_settings(_config(tmp_path, header), environ={"KEY": "k"}).sources["lp"]
    with pytest.raises(ConfigError, match="needs at least one secret"):
        load_settings(_config(tmp_path, ""), environ={"KEY": "k"})


def test_the_simulator_refuses_what_llamacloud_refuses() -> None:
    sim = LlamaParseSim(api_key=KEY)
    with served_in_thread(sim.app()) as url:
        client = llama_cloud.LlamaCloud(api_key=KEY, base_url=url, max_retries=0)
        with pytest.raises(llama_cloud.UnprocessableEntityError):
            client.parsing.create(tier="fastest", version="latest", source_url="https://x/a.pdf")
        with pytest.raises(llama_cloud.UnprocessableEntityError):
            client.parsing.create(tier="fast", version="latest")
        with pytest.raises(llama_cloud.NotFoundError):
            client.parsing.get("no-such-job")
        with pytest.raises(llama_cloud.AuthenticationError):
            llama_cloud.LlamaCloud(api_key="wrong", base_url=url).parsing.get("no-such-job")
        sim.requests_per_minute = 0.5
        sim.jobs["j"] = ParseJob("j", 0.0, "a.pdf", "fast")
        with pytest.raises(llama_cloud.RateLimitError) as caught:
            client.parsing.get("j")
    assert int(caught.value.response.headers["Retry-After"]) > 0


def test_only_the_configured_events_are_sent_signed_and_with_the_headers() -> None:
    sim = LlamaParseSim(api_key=KEY, duration=10.0, clock=lambda: 100.0)
    hooks = [
        {"webhook_url": "http://a/", "webhook_events": ["parse.success"]},
        {"webhook_url": "http://b/", "webhook_headers": {"X-T": "v"},
         "webhook_signing_secret": "s" * 20, "webhook_output_format": "json"},
    ]  # fmt: skip
    job = ParseJob("j", 100.0, "a.pdf", "fast", webhooks=hooks)
    (pending,) = sim.deliveries(job)
    assert (pending.url, pending.event) == ("http://b/", "parse.pending")
    assert pending.headers["X-T"] == "v"
    assert pending.headers["LC-Signature"].startswith("sha256=")
    assert json.loads(pending.body)["data"]["id"] == "j"
    assert sim.deliveries(job) == []  # each event once
    job.started = 0.0
    done = sim.deliveries(job)
    assert [(d.url, d.event) for d in done] == [("http://a/", "parse.success"),
                                                ("http://b/", "parse.success")]  # fmt: skip
    assert isinstance(json.loads(done[0].body), str)  # "string", the default
    assert "LC-Signature" not in done[0].headers
