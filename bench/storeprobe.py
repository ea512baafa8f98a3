"""Where a webhook's write goes: the writer's statements on a prefilled store, measured alone.

``python -m bench.storeprobe [--jobs 1000000] [--webhooks 40000] [--batch 16]`` copies the
prefilled store (``bench.prefill``), then runs the realistic workload's webhooks through the
very operation and batch runner the SQLite writer process runs (``operations.ingest`` in
``writer.run_batch``, one transaction and one fsync a batch, synchronous=FULL), with no HTTP
and no event loop. Per webhook it reports the writer's CPU time, the time in COMMIT (the WAL
write and its fsync, and the checkpoints that run in it), the pages written to the WAL (every
B-tree page a batch dirties, counted by SQLite: ``SQLITE_DBSTATUS_CACHE_WRITE``), the page-cache
hit rate (``CACHE_HIT`` / ``CACHE_MISS``) and the WAL's size over time. CPU time is far less
disturbed by other load on the machine than throughput is, so compare variants by it.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench import workload
from bench.prefill import CACHE, copy_store, ensure_prefilled
from bench.report import RESULTS
from receiver.models import Event, State
from receiver.store.sqlite import operations, writer
from receiver.store.sqlite.checkpoint import Checkpointer

STATES = {"Completed": State.SUCCEEDED, "Failed": State.FAILED, "InProgress": State.RUNNING}
CACHE_HIT, CACHE_MISS, CACHE_WRITE = 7, 8, 9


class DbStatus:
    """sqlite3_db_status on a ``sqlite3.Connection`` (its handle read from the object: the
    pointer that follows PyObject_HEAD in CPython's pysqlite_Connection)."""

    def __init__(self, conn: Any) -> None:
        self._lib = ctypes.CDLL(self._library())
        self._db = ctypes.c_void_p.from_address(id(conn) + 2 * ctypes.sizeof(ctypes.c_void_p))

    @staticmethod
    def _library() -> str:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libsqlite3" in line:
                    return line.split()[-1]
        return ctypes.util.find_library("sqlite3") or "libsqlite3.so.0"

    def take(self, op: int) -> int:
        cur, high = ctypes.c_int(), ctypes.c_int()
        self._lib.sqlite3_db_status(self._db, op, ctypes.byref(cur), ctypes.byref(high), 1)
        return cur.value


def events(count: int, seed: int) -> list[Event]:
    out = []
    for hook, _ in zip(workload.realistic(seed), range(count), strict=False):
        import json

        data = json.loads(hook.body)
        out.append(Event("reducto", hook.job_id, STATES[data["status"]], data["status"],
                         "webhook", hook.message_id, data["metadata"]))  # fmt: skip
    return out


def probe(
    db: Path, count: int, batch: int, pragmas: tuple[str, ...] = (), *, checkpointer: bool = False
) -> dict[str, Any]:
    """Run ``count`` webhooks into ``db`` in batches; the figures (CPU is the writer thread's;
    ``process_cpu`` adds the checkpointer thread's when there is one)."""
    conn = writer.connect(db)
    thread = Checkpointer(db) if checkpointer else None
    if thread is not None:
        thread.start()
    process0 = time.process_time()
    for pragma in pragmas:
        conn.execute(f"PRAGMA {pragma}")
    status = DbStatus(conn)
    hooks = events(count, seed=7)
    wal = Path(f"{db}-wal")
    for counter in (CACHE_HIT, CACHE_MISS, CACHE_WRITE):
        status.take(counter)
    cpu_total = wall_total = cpu_commit = 0.0
    commits: list[float] = []
    pages: list[int] = []
    wal_sizes: list[tuple[int, int]] = []
    hits = misses = 0
    for start in range(0, len(hooks), batch):
        ops = [
            (operations.ingest, (e, (), False, time.time())) for e in hooks[start : start + batch]
        ]
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        for fn, fn_args in ops:
            fn(conn, *fn_args)
        cpu1, wall1 = time.thread_time(), time.perf_counter()
        conn.execute("COMMIT")
        cpu2, wall2 = time.thread_time(), time.perf_counter()
        cpu_total += cpu2 - cpu0
        cpu_commit += cpu2 - cpu1
        wall_total += wall2 - wall0
        commits.append(wall2 - wall1)
        pages.append(status.take(CACHE_WRITE))
        hits += status.take(CACHE_HIT)
        misses += status.take(CACHE_MISS)
        if (start // batch) % 200 == 0:
            wal_sizes.append((start + batch, wal.stat().st_size if wal.exists() else 0))
    process_cpu = time.process_time() - process0
    if thread is not None:
        thread.stop()
    conn.close()
    n = len(hooks)
    commits_ms = sorted(c * 1000 for c in commits)
    return {
        "webhooks": n,
        "batch": batch,
        "pragmas": list(pragmas),
        "cpu_us_per_webhook": cpu_total / n * 1e6,
        "cpu_us_in_commit": cpu_commit / n * 1e6,
        "process_cpu_us_per_webhook": process_cpu / n * 1e6,
        "checkpointer": checkpointer,
        "wall_us_per_webhook": wall_total / n * 1e6,
        "commit_ms_median": statistics.median(commits_ms),
        "commit_ms_p99": commits_ms[int(len(commits_ms) * 0.99)],
        "commit_ms_max": commits_ms[-1],
        "commit_share_of_wall": sum(commits) / wall_total,
        "pages_per_webhook": sum(pages) / n,
        "pages_per_batch": statistics.median(pages),
        "cache_hit_rate": hits / max(hits + misses, 1),
        "cache_misses_per_webhook": misses / n,
        "wal_bytes": wal_sizes,
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.storeprobe", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--webhooks", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--checkpointer", action="store_true", help="checkpoint on a thread")
    parser.add_argument("--pragma", action="append", default=[], help="e.g. cache_size=-65536")
    args = parser.parse_args()
    source = ensure_prefilled(CACHE / f"jobhook-{args.jobs}.db", args.jobs)
    work = RESULTS / "work" / "storeprobe"
    work.mkdir(parents=True, exist_ok=True)
    db = copy_store(source, work / "probe.db")
    import asyncio

    from receiver.store.sqlite.store import SQLiteStore  # upgrades a copy made by an older schema

    async def migrate() -> None:
        store = SQLiteStore(db)
        await store.open()
        await store.close()

    asyncio.run(migrate())
    result = probe(
        db, args.webhooks, args.batch, tuple(args.pragma), checkpointer=args.checkpointer
    )
    for key, value in result.items():
        if key != "wal_bytes":
            print(f"{key:24} {value:.3f}" if isinstance(value, float) else f"{key:24} {value}")
    print(
        "wal bytes after N webhooks:",
        ", ".join(f"{n}:{b / 1e6:.1f}MB" for n, b in result["wal_bytes"][::4]),
    )


if __name__ == "__main__":
    main()
