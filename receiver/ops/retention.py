"""The retention loop: purge old delivered jobs, and drop delivered results early if asked.

``[retention] max_age_days`` deletes jobs that became terminal longer ago than that, with their
deliveries, completion, dispatches and result file, but only once every handler has succeeded
(work still resolving, pending, running or dead is kept until it is delivered or replayed).
``delete_results_when_delivered`` deletes a result file as soon as every handler has succeeded,
for zero-data-retention users; the completion then says its result is no longer available.
Files are only ever deleted inside ``results.dir``. ``audit_max_age_days`` purges audit rows
older than that, never one that names a job still kept.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import anyio
import structlog

from receiver.loops import wait_either

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from receiver.config.settings import RetentionSettings
    from receiver.store import Engine

log = structlog.get_logger(__name__)
BATCH = 500
DAY = 86400.0


class Retention:
    """Deletes what retention allows; ``run_once`` is one sweep, ``wake`` asks for one now."""

    def __init__(
        self,
        store: Engine,
        settings: RetentionSettings,
        results_dir: Path,
        *,
        on_purged: Callable[[int, int], None] | None = None,
        clock: Callable[[], float] = time.time,
        batch: int = BATCH,
    ) -> None:
        self.store = store
        self.settings = settings
        self.results_dir = results_dir
        self._on_purged = on_purged
        self._clock = clock
        self._batch = batch
        self._wakeup = asyncio.Event()

    @property
    def enabled(self) -> bool:
        s = self.settings
        return (
            s.max_age_days is not None
            or s.delete_results_when_delivered
            or s.audit_max_age_days is not None
        )

    def wake(self) -> None:
        """A delivery succeeded: a result may be deletable now."""
        if self.settings.delete_results_when_delivered:
            self._wakeup.set()

    async def run_once(self) -> tuple[int, int]:
        """One sweep; returns (jobs purged, result files deleted)."""
        purged = files = 0
        if self.settings.delete_results_when_delivered:
            while True:
                rows = await self.store.delivered_results(self._batch)
                gone = await self._delete([path for _, path in rows])
                await self.store.forget_results([cid for cid, path in rows if path in gone])
                files += len(gone)
                if len(rows) < self._batch or not gone:
                    break
        if self.settings.max_age_days is not None:
            before = self._clock() - self.settings.max_age_days * DAY
            while True:
                count, paths = await self.store.purge(before, self._batch)
                purged += count
                files += len(await self._delete(paths))
                if count < self._batch:
                    break
        if self.settings.audit_max_age_days is not None:
            # Never a row that names a job still kept (the store checks).
            before = self._clock() - self.settings.audit_max_age_days * DAY
            audited = 0
            while (count := await self.store.purge_audit(before, self._batch)) > 0:
                audited += count
                if count < self._batch:
                    break
            if audited:
                log.info("audit_swept", rows_purged=audited)
        if purged or files:
            log.info("retention_swept", jobs_purged=purged, results_deleted=files)
            if self._on_purged is not None:
                self._on_purged(purged, files)
        return purged, files

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep every ``interval_seconds`` (and on ``wake``) until ``stop``."""
        if not self.enabled:
            return
        while not stop.is_set():
            self._wakeup.clear()
            try:
                await self.run_once()
            except Exception as exc:  # one failed sweep must not end retention
                log.error("retention_failed", error=str(exc))
            await wait_either(stop, self._wakeup, self.settings.interval_seconds)

    async def _delete(self, paths: Sequence[str]) -> set[str]:
        """Delete result files inside results.dir; return those now gone (or gone already)."""
        root = await anyio.Path(self.results_dir).resolve()
        gone: set[str] = set()
        for text in paths:
            path = await anyio.Path(text).resolve()
            if not path.is_relative_to(root):
                log.warning("retention_skipped_file", reason="outside results.dir")
                continue
            try:
                await path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("retention_delete_failed", error=exc.strerror)
                continue
            gone.add(text)
        return gone
