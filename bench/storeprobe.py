"""Where a webhook's write goes: the writer's statements on a prefilled store, measured alone.

``python -m bench.storeprobe [--jobs 1000000] [--webhooks 40000] [--batch 16]`` copies the
prefilled store (``bench.prefill``) of each message-id variant (``--message-ids``: Svix's
millisecond KSUIDs and fully random ids, both by default, printed side by side; each into a
store prefilled with ids of its kind), then runs the realistic workload's webhooks through the
very operation and batch runner the SQLite writer process runs (``operations.ingest`` in
``writer.run_batch``, one transaction and one fsync a batch, synchronous=FULL), with no HTTP
and no event loop. Per webhook it reports the writer's CPU time, the time in COMMIT (the WAL
write and its fsync, and the checkpoints that run in it), the pages written to the WAL (every
B-tree page a batch dirties, counted by SQLite: ``SQLITE_DBSTATUS_CACHE_WRITE``), the page-cache
hit rate (``CACHE_HIT`` / ``CACHE_MISS``), the WAL's size over time, the WAL bytes a webhook
writes (its frames, headers included, read back from the ``-wal`` file) and how many of the
pages it dirties are *random leaves*: leaf pages of a B-tree that were in the store before the
run and were not its rightmost leaf (an insert at the right edge of a tree, or into a page the
run allocated, is an append; the map of pages comes from SQLite's ``dbstat`` before the run).
CPU time is far less disturbed by other load on the machine than throughput is, so compare
variants by it.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import statistics
import struct
import time
from pathlib import Path
from typing import Any, BinaryIO

from bench import workload
from bench.prefill import CACHE, copy_store, ensure_prefilled, file_name
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


def events(count: int, seed: int, ids: str = "ksuid") -> list[Event]:
    out = []
    for hook, _ in zip(workload.realistic(seed, ids), range(count), strict=False):
        data = json.loads(hook.body)
        out.append(Event("reducto", hook.job_id, STATES[data["status"]], data["status"],
                         "webhook", hook.message_id, data["metadata"]))  # fmt: skip
    return out


class PageMap:
    """Which B-tree each page of a store belongs to, whether it is a leaf, and each tree's
    rightmost leaf, read from SQLite's ``dbstat`` table (paths such as ``/000/01f/`` sort in
    the tree's order, every leaf at the same depth)."""

    def __init__(self, conn: Any) -> None:
        self.trees: dict[int, str] = {}
        self.leaves: set[int] = set()
        rightmost: dict[str, tuple[str, int]] = {}
        query = "SELECT name, pageno, pagetype, path FROM dbstat"
        for name, pageno, pagetype, path in conn.execute(query):
            self.trees[pageno] = name
            if pagetype == "leaf":
                self.leaves.add(pageno)
                if name not in rightmost or path > rightmost[name][0]:
                    rightmost[name] = (path, pageno)
        self.rightmost = {page for _, page in rightmost.values()}

    def random_leaf(self, page: int) -> str | None:
        """The tree of ``page`` when it is a random leaf (see the module's docstring)."""
        if page in self.leaves and page not in self.rightmost:
            return self.trees[page]
        return None


class WalReader:
    """The frames each commit appends to a ``-wal`` file: their page numbers and bytes."""

    HEADER, FRAME_HEADER = 32, 24

    def __init__(self, wal: Path) -> None:
        self._wal = wal
        self._file: BinaryIO | None = None
        self._salts = b""
        self._offset = self.HEADER

    def last_commit(self) -> tuple[list[int], int]:
        """The page numbers of the frames the last commit wrote, and their bytes (headers
        included); the WAL started over after a checkpoint is followed by its new salts."""
        if self._file is None:
            self._file = open(self._wal, "rb")  # noqa: SIM115  # closed by close()
        self._file.seek(0)
        header = self._file.read(self.HEADER)
        page_size = struct.unpack(">I", header[8:12])[0]
        if header[16:24] != self._salts:
            self._salts, self._offset = header[16:24], self.HEADER
        pages: list[int] = []
        start = self._offset
        self._file.seek(self._offset)
        while frame := self._file.read(self.FRAME_HEADER):
            if len(frame) < self.FRAME_HEADER or frame[8:16] != self._salts:
                break
            page, size_after = struct.unpack(">II", frame[:8])
            pages.append(page)
            self._offset += self.FRAME_HEADER + page_size
            self._file.seek(self._offset)
            if size_after:  # the commit frame: the end of the transaction
                break
        return pages, self._offset - start

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def probe(
    db: Path, count: int, batch: int, pragmas: tuple[str, ...] = (), *, checkpointer: bool = False,
    ids: str = "ksuid",
) -> dict[str, Any]:  # fmt: skip
    """Run ``count`` webhooks with message ids of the kind ``ids`` into ``db`` in batches; the
    figures (CPU is the writer thread's; ``process_cpu`` adds the checkpointer thread's when
    there is one)."""
    conn = writer.connect(db)
    pages_of = PageMap(conn)
    thread = Checkpointer(db) if checkpointer else None
    if thread is not None:
        thread.start()
    process0 = time.process_time()
    for pragma in pragmas:
        conn.execute(f"PRAGMA {pragma}")
    status = DbStatus(conn)
    hooks = events(count, seed=7, ids=ids)
    wal = Path(f"{db}-wal")
    reader = WalReader(wal)
    wal_written = 0
    random_leaves: dict[str, int] = {}
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
        written, size = reader.last_commit()
        wal_written += size
        for page in set(written):
            tree = pages_of.random_leaf(page)
            if tree is not None:
                random_leaves[tree] = random_leaves.get(tree, 0) + 1
        hits += status.take(CACHE_HIT)
        misses += status.take(CACHE_MISS)
        if (start // batch) % 200 == 0:
            wal_sizes.append((start + batch, wal.stat().st_size if wal.exists() else 0))
    process_cpu = time.process_time() - process0
    if thread is not None:
        thread.stop()
    reader.close()
    conn.close()
    n = len(hooks)
    commits_ms = sorted(c * 1000 for c in commits)
    return {
        "message_ids": ids,
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
        "random_leaves_per_webhook": sum(random_leaves.values()) / n,
        "random_leaves_by_tree": {
            tree: round(count / n, 3)
            for tree, count in sorted(random_leaves.items(), key=lambda kv: -kv[1])
        },
        "wal_bytes_per_webhook": wal_written / n,
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
    parser.add_argument(
        "--message-ids", choices=("ksuid", "random"), action="append",
        help="the message ids' kind (repeatable; default: both, side by side)",
    )  # fmt: skip
    parser.add_argument("--checkpointer", action="store_true", help="checkpoint on a thread")
    parser.add_argument("--pragma", action="append", default=[], help="e.g. cache_size=-65536")
    args = parser.parse_args()
    results = {}
    for ids in args.message_ids or ["ksuid", "random"]:
        results[ids] = probe(
            _copy(args.jobs, ids), args.webhooks, args.batch, tuple(args.pragma),
            checkpointer=args.checkpointer, ids=ids,
        )  # fmt: skip
    print(f"{'':28}" + "".join(f"{ids:>16}" for ids in results))
    for key, first in next(iter(results.values())).items():
        if key in ("wal_bytes", "random_leaves_by_tree", "message_ids"):
            continue
        cells = [r[key] for r in results.values()]
        form = "{:>16.3f}" if isinstance(first, float) else "{:>16}"
        print(f"{key:28}" + "".join(form.format(str(c) if isinstance(c, list) else c)
                                    for c in cells))  # fmt: skip
    for ids, result in results.items():
        print(f"random leaves per webhook by tree ({ids}):", result["random_leaves_by_tree"])
        print(
            f"wal bytes after N webhooks ({ids}):",
            ", ".join(f"{n}:{b / 1e6:.1f}MB" for n, b in result["wal_bytes"][::4]),
        )
    out = RESULTS / "storeprobe.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def _copy(jobs: int, ids: str) -> Path:
    """A fresh copy of the prefilled store with message ids ``ids``, on the current schema."""
    source = ensure_prefilled(CACHE / file_name(jobs, ids), jobs, ids)
    work = RESULTS / "work" / "storeprobe"
    work.mkdir(parents=True, exist_ok=True)
    db = copy_store(source, work / f"probe-{ids}.db")
    import asyncio

    from receiver.store.sqlite.store import SQLiteStore  # upgrades a copy made by an older schema

    async def migrate() -> None:
        store = SQLiteStore(db)
        await store.open()
        await store.close()

    asyncio.run(migrate())
    return db


if __name__ == "__main__":
    main()
