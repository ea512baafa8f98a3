"""Knowhere against its sample bodies: 'completed' webhooks, 'done' jobs, zips with checksums."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from receiver.errors import ProviderError
from receiver.models import Progress, State
from receiver.providers import get_provider
from receiver.providers.base import ResultRef
from tests.providers.conftest import sample

S = sample("knowhere")
knowhere = get_provider("knowhere")
DIGEST = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"


def test_completed_webhook_is_succeeded() -> None:
    event = knowhere.parse_webhook(S["webhook_completed"], source="k", message_id="m")
    assert (event.job_id, event.state, event.provider_status) == (
        "job_5d1e", State.SUCCEEDED, "completed")  # fmt: skip


def test_failed_webhook_is_failed() -> None:
    event = knowhere.parse_webhook(S["webhook_failed"], source="k", message_id="m")
    assert (event.job_id, event.state, event.provider_status) == (
        "job_5d1f", State.FAILED, "failed")  # fmt: skip


def test_webhook_without_status_falls_back_to_its_event_name() -> None:
    body = {"event": "job.completed", "job_id": "job_5d1e"}
    event = knowhere.parse_webhook(body, source="k", message_id="m")
    assert (event.state, event.provider_status) == (State.SUCCEEDED, "completed")


def test_running_job_reports_pages() -> None:
    status = knowhere.parse_job(S["job_running"], source="k", job_id="job_5d1e")
    assert (status.state, status.result) == (State.RUNNING, None)
    assert status.progress == Progress(done=48, total=120)


def test_done_job_points_at_its_zip() -> None:
    status = knowhere.parse_job(S["job_done"], source="k", job_id="job_5d1e")
    assert (status.state, status.provider_status) == (State.SUCCEEDED, "done")
    assert status.progress == Progress(done=120, total=120)
    # The sample's checksum is a placeholder, not 64 hex digits: nothing to check against.
    assert status.result == ResultRef(url=S["job_done"]["result_url"], sha256=None)


def test_done_job_with_a_real_checksum_keeps_it_lower_case() -> None:
    body = {**S["job_done"], "result_checksum": {"algorithm": "sha256", "value": DIGEST}}
    status = knowhere.parse_job(body, source="k", job_id="job_5d1e")
    assert status.result == ResultRef(url=S["job_done"]["result_url"], sha256=DIGEST.lower())


def test_checksum_of_another_algorithm_is_not_taken_for_sha256() -> None:
    body = {**S["job_done"], "result_checksum": {"algorithm": "md5", "value": DIGEST}}
    status = knowhere.parse_job(body, source="k", job_id="job_5d1e")
    assert status.result is not None
    assert status.result.sha256 is None


def test_done_job_without_result_url_is_retried_later() -> None:
    body = {"job_id": "job_5d1e", "status": "done"}
    with pytest.raises(ProviderError):
        knowhere.parse_job(body, source="k", job_id="job_5d1e")


def test_failed_job_has_code_and_message() -> None:
    status = knowhere.parse_job(S["job_failed"], source="k", job_id="job_5d1f")
    assert (status.state, status.result) == (State.FAILED, None)
    assert status.error == "PARSE_ERROR: Unsupported file type (request req_77)"
    assert status.error_code == "PARSE_ERROR"


def test_rate_limited_body_gives_a_retry_hint() -> None:
    assert knowhere.retry_hint(S["rate_limited_429"]) == 12.0


@pytest.mark.parametrize(
    "body",
    [{}, None, {"error": {"details": {}}}, {"error": {"details": {"retry_after": "soon"}}},
     {"error": {"details": {"retry_after": -1}}}, {"error": {"details": {"retry_after": True}}}],
    ids=repr,
)  # fmt: skip
def test_no_usable_retry_after_gives_no_hint(body: object) -> None:
    assert knowhere.retry_hint(body) is None


def test_job_list_reads_ids_statuses_and_cursor() -> None:
    body = {"jobs": [{"job_id": "job_5d1e", "status": "done"}, {"bogus": 1}],
            "next_cursor": "n2"}  # fmt: skip
    assert knowhere.parse_list(body) == ([("job_5d1e", "done")], "n2")


@pytest.mark.parametrize(("version", "expected"), [(None, "v2"), ("v2", "v2"), ("v1", "v1")])
def test_job_and_list_paths_follow_the_api_version(version: str | None, expected: str) -> None:
    adapter = get_provider("knowhere", api_version=version)
    assert adapter.job_path("job 1") == f"/{expected}/jobs/job%201"
    path = adapter.list_path(cursor="n2")
    assert path is not None
    parts = urlsplit(path)
    assert (parts.path, parse_qs(parts.query)) == (f"/{expected}/jobs", {"cursor": ["n2"]})


def test_v2_progress_may_be_a_fraction() -> None:
    status = knowhere.parse_job({"job_id": "j", "status": "running", "progress": 0.25},
                                source="k", job_id="j")  # fmt: skip
    assert status.progress == Progress(250, 1000)
