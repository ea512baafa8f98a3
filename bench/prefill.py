"""A store as a month of traffic leaves it, loaded fast (not through HTTP) and kept between runs.

``ensure_prefilled(path, jobs)`` makes a SQLite store with the current schema (the real
migrations, run by ``SQLiteStore.open``) holding ``jobs`` jobs over the last 30 days, with
their deliveries, completions and dispatches: ~95 % of the jobs terminal (succeeded, some
failed or cancelled), each terminal job with its completion (resolved) and one dispatch to a
handler (~97 % succeeded, ~3 % dead after their retries), ~12 % of the jobs with an
``InProgress`` delivery before their terminal one, the rest still queued or running. Job ids
are random in the providers' shapes; message ids are made as the workload makes them
(``bench.workload``): Svix's millisecond KSUIDs stamped with each delivery's time, so ordered
over the month as Svix made them, or (``message_ids="random"``, a file of its own) fully random.
Rows go in with
``executemany`` in big transactions on one connection, synchronous off (a scratch file, renamed
into place once complete). A file whose sidecar (``<file>.prefill.json``) names the same
schema version, size, message ids and generator is reused as it is: copy it before writing into
it (``copy_store``). ``python -m bench.prefill [JOBS] [ksuid|random]`` loads one under
bench/results/prefill/. The PostgreSQL variant is ``bench.prefill_pg``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import workload
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS

if TYPE_CHECKING:
    from collections.abc import Iterator

CACHE = Path(__file__).resolve().parent / "results" / "prefill"
GENERATOR = 3
"""Bump when the rows this module makes change: stores made before are loaded again."""
CHUNK = 50_000
DAY = 86_400.0
HANDLER = "archive"

Rows = dict[str, list[tuple[Any, ...]]]


def store_path(path: Path, jobs: int, message_ids: str = "ksuid") -> Path:
    """``path`` itself, or ``path/jobhook-<jobs>.db`` when it is a directory
    (``jobhook-<jobs>-random-ids.db`` for random message ids)."""
    return path / file_name(jobs, message_ids) if path.is_dir() else path


def file_name(jobs: int, message_ids: str = "ksuid") -> str:
    return f"jobhook-{jobs}.db" if message_ids == "ksuid" else f"jobhook-{jobs}-random-ids.db"


def _marker(jobs: int, version: int, message_ids: str) -> dict[str, int | str]:
    return {"jobs": jobs, "schema": version, "generator": GENERATOR, "message_ids": message_ids}


def _sidecar(db: Path) -> Path:
    return db.with_name(db.name + ".prefill.json")


def is_current(db: Path, jobs: int, message_ids: str = "ksuid") -> bool:
    """The file at ``db`` was loaded with ``jobs`` jobs and ``message_ids`` by this generator
    on today's schema."""
    side = _sidecar(db)
    if not (db.exists() and side.exists()):
        return False
    try:
        marker = json.loads(side.read_text("utf-8"))
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
    except (ValueError, sqlite3.Error, OSError):
        return False
    current = _marker(jobs, len(SQLITE_MIGRATIONS), message_ids)
    return bool(marker == current and version == marker["schema"])


def ensure_prefilled(path: Path, jobs: int = 1_000_000, message_ids: str = "ksuid") -> Path:
    """The SQLite store file at ``path`` (or in directory ``path``) holding ``jobs`` jobs as
    a month of traffic leaves them, with message ids of the kind ``message_ids`` (``ksuid`` or
    ``random``); loaded now unless a current one is there already."""
    db = store_path(path, jobs, message_ids)
    if is_current(db, jobs, message_ids):
        return db
    db.parent.mkdir(parents=True, exist_ok=True)
    scratch = db.with_name(db.name + ".loading")
    for stale in (db, _sidecar(db), scratch, *_companions(scratch), *_companions(db)):
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    asyncio.run(_migrate(scratch))
    conn = sqlite3.connect(scratch, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")  # off WAL while loading: no WAL to grow
        for pragma in ("synchronous=OFF", "cache_size=-1048576", "temp_store=MEMORY"):
            conn.execute(f"PRAGMA {pragma}")
        for rows in month(jobs, message_ids=message_ids):
            conn.execute("BEGIN")
            for table, values in rows.items():
                conn.executemany(INSERTS[table], values)
            conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA journal_mode=WAL")  # as jobhook leaves it
    finally:
        conn.close()
    scratch.rename(db)
    for leftover in _companions(scratch):
        leftover.unlink(missing_ok=True)
    _sidecar(db).write_text(json.dumps(_marker(jobs, len(SQLITE_MIGRATIONS), message_ids)),
                            "utf-8")  # fmt: skip
    print(f"bench: prefilled {jobs:,} jobs in {time.perf_counter() - started:.0f} s: {db}",
          file=sys.stderr)  # fmt: skip
    return db


def copy_store(db: Path, to: Path) -> Path:
    """A working copy of a prefilled store (the original stays as loaded), on disk before this
    returns: a gigabyte of dirty pages written back during the first round would queue the
    store's fsyncs behind it (177 req/s instead of 3,200 in one run)."""
    for stale in (to, *_companions(to)):
        stale.unlink(missing_ok=True)
    shutil.copyfile(db, to)
    fd = os.open(to, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return to


def _companions(db: Path) -> tuple[Path, ...]:
    return tuple(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", ".lock"))


async def _migrate(db: Path) -> None:
    from receiver.store.sqlite.store import SQLiteStore

    store = SQLiteStore(db)
    await store.open()
    await store.close()


INSERTS = {
    "jobs": """INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
        error_code, created_at, updated_at, last_news_at, terminal_at, progress_done,
        progress_total, id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
    "deliveries": """INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
        received_at, job) VALUES (?, ?, ?, ?, ?, ?, ?)""",
    "completions": """INSERT INTO completions (id, source, job_id, state, provider_status,
        metadata, error, error_code, created_at, phase, result_path, result_sha256,
        result_bytes, attempts, next_attempt_at, resolved_at, confidence, job)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'ready', ?, ?, ?, 1, ?, ?, ?, ?)""",
    "dispatches": """INSERT INTO dispatches (completion_id, handler, state, attempts,
        next_attempt_at, last_error, error_code, updated_at, finished_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
}
TABLES = tuple(INSERTS)
STATES = (  # (share, state, provider status) of a month's jobs
    (0.890, "succeeded", "Completed"),
    (0.050, "failed", "Failed"),
    (0.010, "cancelled", "Cancelled"),
    (0.025, "running", "InProgress"),
    (0.025, "queued", "Pending"),
)


def month(
    jobs: int, seed: int = 26, now: float | None = None, message_ids: str = "ksuid"
) -> Iterator[Rows]:
    """The rows of ``jobs`` jobs created over the 30 days before ``now``, oldest first, in
    chunks (table name -> rows, in an order that satisfies the foreign keys); message ids of
    the kind ``message_ids``, KSUIDs stamped with their delivery's time."""
    rng = random.Random(seed)
    now = time.time() if now is None else now
    created = sorted(now - rng.random() * 30 * DAY for _ in range(jobs))
    completion_id = 0
    for start in range(0, jobs, CHUNK):
        rows: Rows = {table: [] for table in TABLES}
        for number, at in enumerate(created[start : start + CHUNK], start + 1):
            completion_id = _job(rows, rng, (number, at), completion_id, now, message_ids)
        yield rows


def _pick(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    for share, state, status in STATES:
        if roll < share:
            return state, status
        roll -= share
    return STATES[-1][1], STATES[-1][2]


def _job(
    rows: Rows, rng: random.Random, seen: tuple[int, float], last_id: int, now: float, ids: str
) -> int:
    """One job's rows added to ``rows`` (``seen``: jobhook's id of the job, its creation time);
    the last completion id used."""
    number, at = seen
    job, source = workload.job_id(rng), "reducto"
    state, status = _pick(rng)
    terminal = state in ("succeeded", "failed", "cancelled")
    meta = json.dumps(workload.metadata(rng))
    error, code = (("Document could not be opened: file is encrypted", "DOCUMENT_CORRUPT")
                   if state == "failed" else (None, None))  # fmt: skip
    done = min(at + rng.uniform(5, 600), now) if terminal else None
    pages = rng.randrange(1, 200)
    news = done if done is not None else min(at + rng.uniform(1, 60), now)
    rows["jobs"].append((source, job, state, status, meta, error, code, at, news, news, done,
                         pages if terminal else None, pages, number))  # fmt: skip
    if not terminal or rng.random() < 0.12:  # an InProgress update before the terminal one
        update = min(at + 1.0, now)
        rows["deliveries"].append((source, workload.message_id(rng, ids, update), job,
                                   "running", "InProgress", update, number))  # fmt: skip
    if not terminal:
        return last_id
    assert done is not None
    rows["deliveries"].append((source, workload.message_id(rng, ids, done), job, state, status,
                               done, number))  # fmt: skip
    cid = last_id + 1
    ok = state == "succeeded"
    resolved = done + rng.uniform(0.2, 5.0)
    rows["completions"].append((
        cid, source, job, state, status, meta, error, code, done,
        f"results/{source}/{job}.json" if ok else None,
        f"{rng.getrandbits(256):064x}" if ok else None,
        rng.randrange(2_000, 2_000_000) if ok else None,
        done, resolved, round(rng.uniform(0.6, 1.0), 3) if ok else None, number,
    ))  # fmt: skip
    if rng.random() < 0.03:  # dead: its handler kept failing until retries ran out
        rows["dispatches"].append((cid, HANDLER, "dead", 8, resolved + 3600, "HTTP 503",
                                   "http_5xx", resolved + 3600, resolved + 3600))  # fmt: skip
    else:
        rows["dispatches"].append((cid, HANDLER, "succeeded", 1, resolved, None, None,
                                   resolved + 0.05, resolved + 0.05))  # fmt: skip
    return cid


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    ids = sys.argv[2] if len(sys.argv) > 2 else "ksuid"
    print(ensure_prefilled(CACHE / file_name(jobs, ids), jobs, ids))


if __name__ == "__main__":
    main()
