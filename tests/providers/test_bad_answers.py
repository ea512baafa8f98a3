"""Any JSON a provider could send (a verified webhook body, a job or list API answer, an error
body) becomes an event or a status, or the one error the caller handles: PayloadError (the
webhook answers 400) or ProviderError (the poll is retried later); never another exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from receiver.errors import PayloadError, ProviderError
from receiver.models import Event
from receiver.providers import PROVIDERS, Provider, get_provider
from receiver.providers.base import JobStatus
from tests.providers.configs import GENERIC_TOML, generic_for

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
KEYS = st.sampled_from(
    ["job_id", "status", "metadata", "result", "url", "error", "reason", "progress", "pages",
     "jobs", "next_cursor", "data", "id", "state", "documentId", "eventType", "retry_after"]
) | st.text(max_size=8)  # fmt: skip
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=25,
)


def _providers() -> list[tuple[str, Provider]]:
    built = [(name, get_provider(name)) for name in sorted(PROVIDERS) if name != "generic"]
    return built + [(f"generic-as-{name}", generic_for(name)) for name in sorted(GENERIC_TOML)]


PROVIDER_CASES = _providers()
IDS = [name for name, _ in PROVIDER_CASES]


@pytest.mark.parametrize(("name", "provider"), PROVIDER_CASES, ids=IDS)
@settings(max_examples=150, deadline=None)
@given(body=JSON)
def test_any_webhook_body_is_an_event_or_a_payload_error(
    name: str, provider: Provider, body: Any
) -> None:
    try:
        event = provider.parse_webhook(body, source="s", message_id="m")
    except PayloadError as exc:
        refused = exc
    else:
        assert isinstance(event, Event)
        assert event.job_id
        return
    assert refused.status_code == 400


@pytest.mark.parametrize(("name", "provider"), PROVIDER_CASES, ids=IDS)
@settings(max_examples=150, deadline=None)
@given(body=JSON)
def test_any_job_answer_is_a_status_or_a_provider_error(
    name: str, provider: Provider, body: Any
) -> None:
    try:
        status = provider.parse_job(body, source="s", job_id="j")
    except ProviderError:
        pass
    else:
        assert isinstance(status, JobStatus)


@pytest.mark.parametrize(("name", "provider"), PROVIDER_CASES, ids=IDS)
@settings(max_examples=100, deadline=None)
@given(body=JSON)
def test_any_list_or_error_answer_is_read_or_refused_as_a_provider_error(
    name: str, provider: Provider, body: Any
) -> None:
    hint = provider.retry_hint(body)
    assert hint is None or hint >= 0
    if provider.list_path() is None:
        return
    try:
        jobs, cursor = provider.parse_list(body)
    except ProviderError:
        return
    assert all(isinstance(job_id, str) and isinstance(word, str) for job_id, word in jobs)
    assert cursor is None or isinstance(cursor, str)
