"""Reducto against its sample bodies: webhook, job answers (inline and URL results), job list."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from receiver.errors import ProviderError
from receiver.models import Progress, State
from receiver.providers import get_provider
from receiver.providers.base import ResultRef
from tests.providers.conftest import sample

S = sample("reducto")
reducto = get_provider("reducto")


def test_completed_webhook_is_succeeded_with_metadata() -> None:
    event = reducto.parse_webhook(S["webhook_completed"], source="r", message_id="msg_1")
    assert event.job_id == "a1b9090e-c9ae-420b-9726-f658afbbe338"
    assert (event.state, event.provider_status) == (State.SUCCEEDED, "Completed")
    assert event.metadata == {"user_id": "123"}
    assert (event.source, event.message_id, event.via) == ("r", "msg_1", "webhook")


def test_failed_webhook_is_failed() -> None:
    event = reducto.parse_webhook(S["webhook_failed"], source="r", message_id="m")
    assert (event.job_id, event.state) == ("0c4f7b52-6a1e-4d7e-9a55-0f7b1b0e8d21", State.FAILED)


def test_pending_job_reports_fractional_progress_per_mille() -> None:
    status = reducto.parse_job(S["job_pending"], source="r", job_id="j")
    assert (status.state, status.result, status.error) == (State.QUEUED, None, None)
    assert status.progress == Progress(done=350, total=1000)


def test_full_result_is_the_inline_envelope() -> None:
    status = reducto.parse_job(S["job_completed_full"], source="r", job_id="j")
    assert status.state is State.SUCCEEDED
    assert status.result == ResultRef(inline=S["job_completed_full"]["result"])


def test_url_result_is_a_url_to_fetch() -> None:
    status = reducto.parse_job(S["job_completed_url"], source="r", job_id="j")
    url = S["job_completed_url"]["result"]["result"]["url"]
    assert status.result == ResultRef(url=url)


def test_url_result_without_url_is_a_provider_error() -> None:
    body = {"status": "Completed", "result": {"result": {"type": "url", "url": ""}}}
    with pytest.raises(ProviderError):
        reducto.parse_job(body, source="r", job_id="j")


def test_failed_job_carries_its_reason_and_no_result() -> None:
    status = reducto.parse_job(S["job_failed"], source="r", job_id="j")
    assert (status.state, status.result) == (State.FAILED, None)
    assert status.error == "Document could not be opened: file is encrypted"
    assert status.error_code is None  # the guide's answer has text only
    assert status.progress is None


def test_failed_job_keeps_the_sdk_error_objects_code() -> None:
    # reductoai 0.25.0's ErrorDetail: code is a number, the enum is in name.
    status = reducto.parse_job(S["job_failed_sdk"], source="r", job_id="j")
    assert status.error_code == "DOCUMENT_PASSWORD_PROTECTED"
    assert status.error == "Document could not be opened: file is encrypted"


def test_an_error_object_without_a_reason_gives_the_text_too() -> None:
    body = {"status": "Failed", "error": {"code": 504, "message": "Processing timed out",
                                          "name": "TIMEOUT"}}  # fmt: skip
    status = reducto.parse_job(body, source="r", job_id="j")
    assert (status.error_code, status.error) == ("TIMEOUT", "TIMEOUT: Processing timed out")


def test_job_list_page_gives_ids_statuses_and_no_cursor_at_the_end() -> None:
    jobs, cursor = reducto.parse_list(S["list_jobs"])
    assert jobs == [("a1b9090e-c9ae-420b-9726-f658afbbe338", "Completed")]
    assert cursor is None


def test_job_list_cursor_is_passed_on() -> None:
    jobs, cursor = reducto.parse_list({"jobs": [], "next_cursor": "c2"})
    assert (jobs, cursor) == ([], "c2")
    path = reducto.list_path(cursor="c2")
    assert path is not None
    parts = urlsplit(path)
    assert parts.path == "/jobs"
    assert parse_qs(parts.query)["cursor"] == ["c2"]


def test_first_list_page_has_no_cursor() -> None:
    path = reducto.list_path()
    assert path is not None
    assert "cursor" not in parse_qs(urlsplit(path).query)


def test_job_list_without_jobs_is_a_provider_error() -> None:
    with pytest.raises(ProviderError):
        reducto.parse_list({"detail": "nope"})


def test_job_path_is_the_sdk_path() -> None:
    assert reducto.job_path("a1b9") == "/job/a1b9"
