"""DocuRift against its sample bodies: the event type decides a webhook's state."""

from __future__ import annotations

import pytest

from receiver.errors import PayloadError
from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.base import ResultRef
from tests.providers.conftest import sample

S = sample("docurift")
docurift = get_provider("docurift")


def test_completed_event_is_succeeded_with_metadata() -> None:
    event = docurift.parse_webhook(S["webhook_completed"], source="d", message_id="evt_9b1f2c")
    assert event.job_id == "doc_71c0a2"
    assert (event.state, event.provider_status) == (
        State.SUCCEEDED,
        "document.processing.completed",
    )
    assert event.metadata == {"customer_id": "cust_123"}
    assert event.error is None


def test_failed_event_is_failed_with_its_error() -> None:
    event = docurift.parse_webhook(S["webhook_failed"], source="d", message_id="evt_9b1f2d")
    assert (event.job_id, event.state) == ("doc_71c0a3", State.FAILED)
    assert event.error == "UNREADABLE: Page 1 could not be read"
    assert event.error_code == "UNREADABLE"
    assert event.metadata == {}


def test_webhook_without_document_id_is_rejected() -> None:
    body = {"id": "evt_1", "type": "document.processing.completed", "data": {}}
    with pytest.raises(PayloadError):
        docurift.parse_webhook(body, source="d", message_id="m")


def test_processing_job_is_running_without_result() -> None:
    status = docurift.parse_job(S["job_processing"], source="d", job_id="doc_71c0a2")
    assert (status.state, status.provider_status, status.result) == (
        State.RUNNING, "processing", None)  # fmt: skip


def test_completed_job_has_its_result_inline() -> None:
    status = docurift.parse_job(S["job_completed"], source="d", job_id="doc_71c0a2")
    assert status.state is State.SUCCEEDED
    assert status.result == ResultRef(inline=S["job_completed"]["data"]["result"])


def test_failed_job_has_its_error_and_no_result() -> None:
    status = docurift.parse_job(S["job_failed"], source="d", job_id="doc_71c0a3")
    assert (status.state, status.result) == (State.FAILED, None)
    assert status.error == "UNREADABLE: Page 1 could not be read"


def test_job_path_and_api_key_header() -> None:
    assert docurift.job_path("doc_71c0a2") == "/v1/documents/doc_71c0a2"
    assert docurift.auth_headers("k") == {"X-API-Key": "k"}


def test_docurift_has_no_list_endpoint_and_no_retry_hint() -> None:
    assert docurift.list_path() is None
    assert docurift.retry_hint({"error": {"details": {"retry_after": 3}}}) is None
