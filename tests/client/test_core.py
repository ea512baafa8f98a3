"""The client's sans-IO core on its own: event-stream parsing, the retry plans of ``wait`` and
``events``, error mapping of odd answers, and where the URL and token come from."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from receiver.client import (
    ApiError,
    BadRequest,
    JobDetail,
    NotFound,
    ProtocolError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
    WaitTimeout,
    core,
)

COMPLETION = {"id": 7, "source": "reducto", "job_id": "j", "state": "succeeded",
              "provider_status": "Completed", "metadata": {}, "error": None,
              "created_at": "2026-01-02T03:04:05+00:00", "trace_id": None}  # fmt: skip
JOB = {"source": "reducto", "job_id": "j", "state": "queued", "terminal": False,
       "created_at": "2026-01-02T03:04:05+00:00"}  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(plan: core.EventsPlan, text: str) -> list[int]:
    found = [plan.line(line) for line in text.split("\n")]
    return [c.id for c in found if c is not None]


def event(ident: int, data: dict[str, object] | None = None) -> str:
    body = json.dumps({**COMPLETION, "id": ident, **(data or {})})
    return f"id: {ident}\nevent: completion\ndata: {body}\n\n"


def test_the_event_stream_yields_completions_and_skips_comments_and_other_events() -> None:
    plan = core.EventsPlan(None)
    text = "retry: 2000\n: stream of completions after 0\n\n" + event(1) + ": heartbeat\n\n"
    text += "event: other\ndata: {}\n\n" + event(2)
    assert feed(plan, text) == [1, 2]
    assert plan.last_event_id == 2
    assert plan.backoff.maximum == 2.0
    assert plan.call().headers["Last-Event-ID"] == "2"


def test_data_split_over_lines_is_joined_and_a_half_event_is_dropped_on_reconnect() -> None:
    plan = core.EventsPlan(None)
    body = json.dumps({**COMPLETION, "id": 3}, indent=1)
    lines = "id: 3\nevent: completion\n" + "".join(f"data: {ln}\n" for ln in body.splitlines())
    assert feed(plan, lines + "\n") == [3]
    feed(plan, 'id: 4\nevent: completion\ndata: {"id"')  # the connection broke here
    plan.call()
    assert feed(plan, event(4)) == [4]


def test_an_event_at_or_before_the_last_id_is_not_yielded_again() -> None:
    plan = core.EventsPlan(5)
    assert feed(plan, event(5) + event(6) + event(6)) == [6]


def test_malformed_event_data_is_a_protocol_error() -> None:
    plan = core.EventsPlan(None)
    with pytest.raises(ProtocolError):
        feed(plan, 'id: 1\nevent: completion\ndata: {"id": "x"}\n\n')


def test_events_give_up_after_failing_that_long_in_a_row_and_not_on_refusals() -> None:
    clock = Clock()
    plan = core.EventsPlan(None, give_up_after=10, clock=clock)
    down = TransportError("http://x", "ConnectError")
    assert 0 < plan.failed(down) <= 0.1
    clock.now += 10
    assert plan.failed(None) <= 0.2  # a clean end counts as a failure too
    clock.now += 1
    with pytest.raises(TransportError):
        plan.failed(down)
    with pytest.raises(Unauthorized):
        plan.failed(Unauthorized(401, "unauthorized", "no"))


def test_wait_retries_what_can_mend_and_times_out_with_the_last_job_seen() -> None:
    clock = Clock()
    plan = core.WaitPlan("reducto", "j", timeout=5, poll=30, clock=clock)
    first = plan.next_call()
    assert (first.path, first.params) == ("/jobs/reducto/j/wait", [("timeout", "5.000")])
    assert plan.answered(202, {"job": JOB}) is None
    assert plan.failed(ServiceUnavailable(503, "unavailable", "x", retry_after=60)) == 2.0
    assert plan.failed(TransportError("http://x", "ReadError")) <= 0.2
    with pytest.raises(NotFound):
        plan.failed(NotFound(404, "unknown_job", "no job"))
    clock.now += 5
    with pytest.raises(WaitTimeout) as caught:
        plan.next_call()
    assert isinstance(caught.value.last, JobDetail)
    assert caught.value.last.job.state == "queued"
    done = plan.answered(200, {"job": {**JOB, "state": "failed", "terminal": True}})
    assert done is not None


def test_wait_always_asks_once_even_with_no_time_and_refuses_bad_limits() -> None:
    plan = core.WaitPlan("reducto", "j", timeout=0)
    assert plan.next_call().params == [("timeout", "0.000")]
    with pytest.raises(ValueError, match="timeout"):
        core.WaitPlan("reducto", "j", timeout=-1)
    with pytest.raises(ValueError, match="poll"):
        core.WaitPlan("reducto", "j", timeout=None, poll=301)


@pytest.mark.parametrize(
    ("status", "body", "kind", "code", "message"),
    [(400, b'{"error": "invalid_query", "detail": "bad"}', BadRequest, "invalid_query", "bad"),
     (413, b'{"error": "body_too_large", "detail": "big"}', BadRequest, "body_too_large", "big"),
     (404, b"Not Found", NotFound, "", "no admin API there: a wrong URL, or the service has no "
      "token ([[server.tokens]] or server.admin_token)"),
     (503, b"<html>down</html>", ServiceUnavailable, "", "Service Unavailable"),
     (409, b"{}", ApiError, "", "Conflict")],
    ids=["400", "413", "404-bare", "503-html", "409"],
)  # fmt: skip
def test_error_bodies_map_to_their_error(
    status: int, body: bytes, kind: type[ApiError], code: str, message: str
) -> None:
    import http

    reason = http.HTTPStatus(status).phrase
    exc = core.error_for(status, reason, body, {"retry-after": "7"}, token_given=True)
    assert type(exc) is kind
    assert (exc.status, exc.code, exc.message) == (status, code, message)
    assert exc.retry_after == (None if kind is NotFound else 7.0)


def test_a_2xx_that_is_not_json_or_not_the_shape_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        core.document(b"<html>")
    with pytest.raises(ProtocolError, match="job"):
        core.parse(JobDetail, {"jobs": []})


def test_filters_become_query_parameters_and_an_unknown_one_is_refused() -> None:
    params = core.filter_params({
        "state": "failed", "metadata": {"batch": 42, "flag": True, "none": None},
        "created_after": datetime(2026, 1, 2, tzinfo=UTC), "created_before": 1700000000.5,
        "min_confidence": 0.9,
    })  # fmt: skip
    assert params == [("state", "failed"), ("metadata", "batch:42"), ("metadata", "flag:true"),
                      ("metadata", "none:null"), ("created_after", "2026-01-02T00:00:00+00:00"),
                      ("created_before", "1700000000.5"), ("min_confidence", "0.9")]  # fmt: skip
    with pytest.raises(TypeError, match="'colour'"):
        core.filter_params({"colour": "red"})  # type: ignore[typeddict-unknown-key]


def test_the_token_is_read_from_the_environment_and_never_shown() -> None:
    target = core.Target.resolve(None, None, {"JOBHOOK_ADMIN_TOKEN": "s3cret-token"})
    assert target.headers() == {"Authorization": "Bearer s3cret-token"}
    assert "s3cret-token" not in repr(target)
    assert "s3cret-token" not in str(target.token)
    assert core.Target.resolve(None, "", {}).headers() == {}


def test_the_client_imports_nothing_of_the_service() -> None:
    """Pipeline code that imports the client loads no server module and no server library."""
    import subprocess
    import sys

    server = "('receiver', 'starlette', 'svix', 'structlog', 'uvicorn')"
    code = ("import sys, receiver.client; print(' '.join(sorted(m for m in sys.modules "
            f"if m.split('.')[0] in {server})))")  # fmt: skip
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()  # fmt: skip
    assert loaded
    assert all(name == "receiver" or name.startswith("receiver.client") for name in loaded), loaded
