"""What every adapter promises, checked for each named provider and for generic configured as it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from receiver.errors import PayloadError, ProviderError
from receiver.models import State
from receiver.providers import PROVIDERS, get_provider
from tests.providers.configs import generic_for
from tests.providers.conftest import sample

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.providers import Provider


@dataclass(frozen=True)
class Shape:
    """How one provider's webhook and job answer carry a status word."""

    webhook: Callable[[str], dict[str, Any]]
    job: Callable[[str], dict[str, Any]]


SHAPES = {
    "reducto": Shape(
        webhook=lambda w: {"status": w, "job_id": "j1", "metadata": {}},
        job=lambda w: {"status": w, "progress": None, "reason": None, "result": None},
    ),
    "docurift": Shape(
        webhook=lambda w: {"id": "evt_1", "type": w, "data": {"documentId": "j1"}},
        job=lambda w: {"success": True, "data": {"documentId": "j1", "status": w}},
    ),
    "knowhere": Shape(
        webhook=lambda w: {"event": "job.updated", "job_id": "j1", "status": w},
        job=lambda w: {"job_id": "j1", "status": w, "result_url": "https://r.example/j1.zip"},
    ),
    "docextract": Shape(
        webhook=lambda w: {"event": "job.updated", "data": {"id": "j1", "status": w}},
        job=lambda w: {"id": "j1", "status": w},
    ),
}

CASES = [(name, False) for name in SHAPES] + [(name, True) for name in SHAPES]


def _ids(case: tuple[str, bool]) -> str:
    return f"generic-as-{case[0]}" if case[1] else case[0]


@pytest.fixture(params=CASES, ids=_ids)
def case(request: pytest.FixtureRequest) -> tuple[str, Provider]:
    name, generic = request.param
    return name, generic_for(name) if generic else get_provider(name)


def test_every_provider_of_the_design_is_registered() -> None:
    assert set(PROVIDERS) == {
        "reducto",
        "docurift",
        "knowhere",
        "docextract",
        "generic",
        "textract",
        "azure-docintel",
        "google-docai",
        "docling",
        "unstructured",
        "landingai",
        "mistral",
        "llamaparse",
    }


def test_status_words_map_as_the_fixture_says(case: tuple[str, Provider]) -> None:
    name, provider = case
    for word, state in sample(name)["status_words"].items():
        assert provider.canonical(word, source="s", job_id="j1") is State(state), word
        status = provider.parse_job(SHAPES[name].job(word), source="s", job_id="j1")
        assert (status.state, status.provider_status) == (State(state), word)


def test_unknown_job_word_is_kept_queued_and_logged(
    case: tuple[str, Provider], provider_logs: list[dict[str, Any]]
) -> None:
    name, provider = case
    status = provider.parse_job(SHAPES[name].job("Teleporting"), source="s", job_id="j1")
    assert (status.state, status.provider_status) == (State.QUEUED, "Teleporting")
    assert status.result is None
    warning = [e for e in provider_logs if e["event"] == "unknown_status_word"]
    assert warning == [
        {"event": "unknown_status_word", "log_level": "warning", "source": "s",
         "job_id": "j1", "status": "Teleporting"}
    ]  # fmt: skip


def test_unknown_webhook_word_is_kept_queued_and_logged(
    case: tuple[str, Provider], provider_logs: list[dict[str, Any]]
) -> None:
    name, provider = case
    event = provider.parse_webhook(SHAPES[name].webhook("Teleporting"), source="s", message_id="m")
    assert (event.job_id, event.state, event.provider_status) == ("j1", State.QUEUED, "Teleporting")
    assert (event.message_id, event.via) == ("m", "webhook")
    assert any(e["event"] == "unknown_status_word" for e in provider_logs)


def test_known_word_logs_no_warning(
    case: tuple[str, Provider], provider_logs: list[dict[str, Any]]
) -> None:
    name, provider = case
    word = next(iter(sample(name)["status_words"]))
    provider.parse_job(SHAPES[name].job(word), source="s", job_id="j1")
    assert provider_logs == []


@pytest.mark.parametrize("body", [[], "x", None, {}, {"data": "x"}], ids=repr)
def test_webhook_without_a_job_is_a_payload_error(case: tuple[str, Provider], body: Any) -> None:
    with pytest.raises(PayloadError) as info:
        case[1].parse_webhook(body, source="s", message_id="m")
    assert (info.value.reason, info.value.status_code) == ("invalid_payload", 400)


@pytest.mark.parametrize("body", [[], "x", None, {}, {"data": {}}], ids=repr)
def test_job_answer_without_status_is_a_provider_error(
    case: tuple[str, Provider], body: Any
) -> None:
    with pytest.raises(ProviderError):
        case[1].parse_job(body, source="s", job_id="j1")


def test_job_path_keeps_an_odd_job_id_inside_one_segment(case: tuple[str, Provider]) -> None:
    path = case[1].job_path("a/../b?x=1")
    assert path.startswith("/")
    assert "a%2F..%2Fb%3Fx%3D1" in path
    assert "?" not in path


def test_job_path_holds_a_plain_job_id(case: tuple[str, Provider]) -> None:
    assert case[1].job_path("job_5d1e").endswith("/job_5d1e")


def test_auth_headers_carry_the_api_key(case: tuple[str, Provider]) -> None:
    name, provider = case
    expected = {
        "reducto": {"Authorization": "Bearer k-1"},
        "docurift": {"X-API-Key": "k-1"},
        "knowhere": {"Authorization": "Bearer k-1"},
        "docextract": {"Authorization": "Bearer k-1"},
    }[name]
    assert provider.auth_headers("k-1") == expected


def test_no_provider_has_a_result_in_its_webhook(case: tuple[str, Provider]) -> None:
    assert case[1].webhook_has_result is False
