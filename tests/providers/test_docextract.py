"""DocExtract against its sample bodies: inline extraction results and offset-paged lists."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from receiver.errors import ProviderError
from receiver.models import State
from receiver.providers import get_provider
from tests.providers.conftest import sample

S = sample("docextract")
docextract = get_provider("docextract")


def test_completed_webhook_is_succeeded() -> None:
    event = docextract.parse_webhook(S["webhook_completed"], source="x", message_id="m")
    assert (event.job_id, event.state, event.provider_status) == (
        "job_abc123", State.SUCCEEDED, "completed")  # fmt: skip


def test_webhook_without_status_falls_back_to_its_event_name() -> None:
    body = {"event": "job.failed", "data": {"id": "job_abc124"}}
    event = docextract.parse_webhook(body, source="x", message_id="m")
    assert (event.state, event.provider_status) == (State.FAILED, "failed")


def test_queued_job_has_no_result() -> None:
    status = docextract.parse_job(S["job_queued"], source="x", job_id="job_abc123")
    assert (status.state, status.result, status.error) == (State.QUEUED, None, None)


def test_completed_job_keeps_fields_confidence_and_timing_inline() -> None:
    status = docextract.parse_job(S["job_completed"], source="x", job_id="job_abc123")
    assert status.state is State.SUCCEEDED
    assert status.result is not None
    inline = status.result.inline
    assert inline["extracted_data"] == {"invoice_number": "1042", "total": 1280.0}
    assert inline["confidence"] == {"invoice_number": 0.98, "total": 0.91}
    assert inline["processing_time_ms"] == 4231
    assert (inline["id"], inline["extractor_id"]) == ("job_abc123", "ext_abc123")
    # Where the source document lives and who owns it are not part of the result.
    assert "document_url" not in inline
    assert "org_id" not in inline
    assert status.error is None


def test_failed_job_has_its_error_details() -> None:
    status = docextract.parse_job(S["job_failed"], source="x", job_id="job_abc124")
    assert (status.state, status.result) == (State.FAILED, None)
    assert status.error == "extraction_failed: No text layer"
    assert status.error_code == "extraction_failed"


def test_last_list_page_has_no_next_offset() -> None:
    assert docextract.parse_list(S["list"]) == ([("job_abc123", "completed")], None)


def test_full_list_page_gives_the_next_offset() -> None:
    body = {"jobs": [{"id": f"j{n}", "status": "queued"} for n in range(50)],
            "total": 120, "limit": 50, "offset": 50}  # fmt: skip
    jobs, cursor = docextract.parse_list(body)
    assert len(jobs) == 50
    assert cursor == "100"


def test_list_path_filters_by_status_and_pages_by_offset() -> None:
    path = docextract.list_path(cursor="100", status="processing")
    assert path is not None
    parts = urlsplit(path)
    assert parts.path == "/v1/documents"
    query = parse_qs(parts.query)
    assert (query["status"], query["offset"]) == (["processing"], ["100"])


def test_list_without_jobs_is_a_provider_error() -> None:
    with pytest.raises(ProviderError):
        docextract.parse_list({"total": 0})
