"""The log handler: one `completion` event with the job's facts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from structlog.testing import capture_logs

from handlers.log import LogHandler

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from receiver.completion import Completion


async def test_logs_one_completion_event_with_ids_state_and_result(
    result_file: Path, make_completion: Callable[..., Completion]
) -> None:
    completion = make_completion("job-9", result=result_file)
    with capture_logs() as events:
        await LogHandler(name="audit").handle(completion)
    assert completion.result is not None
    assert events == [
        {
            "event": "completion",
            "log_level": "info",
            "handler": "audit",
            "completion_id": completion.message_id,
            "source": "reducto",
            "job_id": "job-9",
            "state": "succeeded",
            "provider_status": "Completed",
            "result_bytes": completion.result.bytes,
            "result_sha256": completion.result.sha256,
            "error": None,
            "metadata": {"customer": "acme", "pages": 3},
        }
    ]


async def test_logs_at_the_configured_level(make_completion: Callable[..., Completion]) -> None:
    with capture_logs() as events:
        await LogHandler(name="audit", level="WARNING").handle(make_completion())
    assert [e["log_level"] for e in events] == ["warning"]
    assert events[0]["result_bytes"] is None


async def test_the_event_is_a_json_line_under_the_service_logging(
    make_completion: Callable[..., Completion],
    capfd: pytest.CaptureFixture[str],
    json_logs: None,
) -> None:
    await LogHandler(name="audit").handle(make_completion("job-j"))
    lines = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    assert [(e["event"], e["job_id"]) for e in lines] == [("completion", "job-j")]


@pytest.mark.parametrize("level", ["loud", "", 5])
def test_an_unknown_level_is_refused_at_construction(level: object) -> None:
    with pytest.raises(ValueError, match="level: must be one of"):
        LogHandler(name="audit", level=level)
