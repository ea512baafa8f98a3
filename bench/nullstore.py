"""jobhook with a store that stores nothing: the ceiling of the intake's every other part.

``python -m bench.nullstore CONFIG`` runs ``jobhook serve`` (the same process setup, app and
webhook path: header and body reads, svix verification, parsing, the ingestor, metrics, the
log line, the answer) on a SQLite store whose ``ingest`` executes no statement and answers at
once, as a first delivery of a new job is answered. Everything else about the store is real,
so the service starts, reports ready and stops as usual. What this process serves, against the
bare endpoint, is what the target leaves for the durable, de-duplicated write: nothing that
stores can be faster than this.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from receiver.config.load import load_settings
from receiver.models import IngestResult
from receiver.service.serve import run
from receiver.store import open_store
from receiver.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event


class NullIngestStore(SQLiteStore):
    """SQLite for everything but ``ingest``, which stores nothing."""

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True
    ) -> IngestResult:
        return IngestResult("accepted", event.job_id, event.state, completed=event.state.terminal)


def main() -> None:
    config = Path(sys.argv[1])
    configured = open_store(load_settings(config).store.url)
    if not isinstance(configured, SQLiteStore):
        raise SystemExit("bench.nullstore: the config's store must be SQLite")
    run(config, store=NullIngestStore(configured.path))


if __name__ == "__main__":
    main()
