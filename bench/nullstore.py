"""jobhook with a store that stores nothing: the ceiling of the intake's every other part.

``python -m bench.nullstore CONFIG`` runs ``jobhook serve`` (the same process setup, app and
webhook path: header and body reads, svix verification, parsing, the ingestor, metrics, the
log line, the answer) on a SQLite store whose ``ingest`` executes no statement and answers at
once from two in-memory sets, as jobhook's store would answer (a Svix retry is a duplicate).
Everything else about the store is real, so the service starts, reports ready and stops as
usual. What this process serves, against the bare endpoint, is what the target leaves for the
durable, de-duplicated write: nothing that stores can be faster than this.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from receiver.config.load import load_settings
from receiver.models import IngestResult
from receiver.service.serve import run
from receiver.store import open_store
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event
    from receiver.store.audit import AuditEntry


class NullIngestStore(SQLiteStore):
    """SQLite for everything but ``ingest``, which stores nothing and answers as jobhook does:
    a message id seen before is a duplicate, a job's first terminal news completes it (with
    how long it took), later news of a finished job completes nothing."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._seen: set[tuple[str, str]] = set()
        self._finished: set[tuple[str, str]] = set()

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True,
        audit: AuditEntry | None = None,
    ) -> IngestResult:  # fmt: skip
        if event.message_id is not None:
            message = (event.source, event.message_id)
            if message in self._seen:
                return IngestResult("duplicate", event.job_id, event.state)
            self._seen.add(message)
        job = (event.source, event.job_id)
        completed = event.state.terminal and job not in self._finished
        if completed:
            self._finished.add(job)
        return IngestResult("accepted", event.job_id, event.state, completed=completed,
                            took=0.0 if completed else None)  # fmt: skip


def main() -> None:
    config = Path(sys.argv[1])
    configured = open_store(load_settings(config).store.url)
    if not isinstance(configured, SQLiteStore):
        raise SystemExit("bench.nullstore: the config's store must be SQLite")
    run(config, store=NullIngestStore(configured.path))


if __name__ == "__main__":
    main()
