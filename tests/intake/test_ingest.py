"""The Ingestor wakes the dispatcher when, and only when, a commit left work for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.config.settings import HandlerSettings
from receiver.intake.ingest import Ingestor
from receiver.models import Event, State
from tests.adminsupport import open_store

if TYPE_CHECKING:
    from pathlib import Path


def _done(job_id: str, message_id: str) -> Event:
    return Event("reducto", job_id, State.SUCCEEDED, "Completed", "webhook", message_id)


async def test_wakes_for_completions_with_work_and_not_for_news_without(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        wakes: list[str] = []
        files = HandlerSettings(name="files", type="file", sources=("reducto",))
        with_handler = Ingestor(store, [files], wake=lambda: wakes.append("handler"))
        await with_handler.ingest(_done("job-1", "m1"))
        assert wakes == ["handler"]
        await with_handler.ingest(_done("job-1", "m1"))  # a duplicate: nothing new to do
        assert wakes == ["handler"]

        resolving = Ingestor(store, [], wake=lambda: wakes.append("resolve"), resolving={"reducto"})
        await resolving.ingest(_done("job-2", "m2"))
        assert wakes == ["handler", "resolve"]

        idle = Ingestor(store, [], wake=lambda: wakes.append("idle"))
        result = await idle.ingest(_done("job-3", "m3"))
        running = Event("reducto", "job-4", State.RUNNING, "Pending", "webhook", "m4")
        await idle.ingest(running)
        assert result.completed  # recorded as a completion, with no handler and nothing to fetch
        assert wakes == ["handler", "resolve"]  # so nobody was woken for it
