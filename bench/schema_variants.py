"""Where a job's completion costs least: in a table keyed by the job's id, or folded into its row.

``python -m bench.schema_variants [--jobs 200000] [--webhooks 20000] [--batch 16]
[--message-ids ksuid|random] [--rounds 1]`` builds two stores from the same month of traffic
(``bench.prefill.month``'s rows, translated), each with sequential integer job ids given at a
job's first sight:

- **keyed** (K): ``jobs`` with ``id INTEGER PRIMARY KEY`` and ``UNIQUE (source, job_id)``;
  ``deliveries`` point at the job's id (an index on it instead of (source, job_id));
  ``completions`` keep today's columns and are unique by the job's id, not by (source, job_id);
  ``dispatches`` as today.
- **folded** (F): the same ``jobs`` table carrying the completion's columns (``phase`` NULL
  until the job completes; the completion's state, metadata and errors are the job's own);
  the due-resolution index is a partial index on ``jobs``; ``dispatches`` point at the job.

Both are ``ANALYZE``d and in WAL mode. It then runs the realistic workload's webhooks
(``bench.storeprobe.events``: the same mix and seed) through each variant's ingest, written
here in raw SQL after ``receiver.store.sqlite.operations.ingest`` (a delivery as the dedupe key,
the job inserted or upserted, a completion when the event finishes the job, one dispatch per
handler), ``--batch`` webhooks a transaction, synchronous=FULL, the checkpoint thread on as in
the service; then claims and resolves every completion the run made (``CLAIM_COMPLETIONS`` and
``RESOLVE_COMPLETION``, in F an UPDATE of the whole job row), a transaction per batch. Per
webhook and per completion it prints what ``bench.storeprobe`` reads: the writer thread's CPU,
the B-tree pages written (``CACHE_WRITE``), the random leaves and their trees, the WAL bytes:
with ``--rounds``, medians of that many runs, the variants taking turns to go first.
The job's own statements are today's (``receiver.store.sql``): the ``jobs`` table is the same in
both variants, so only the completion's place differs.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import prefill
from bench.report import RESULTS
from bench.storeprobe import CACHE_MISS, CACHE_WRITE, DbStatus, PageMap, WalReader, events
from receiver.store import codec, sql
from receiver.store.sqlite import sql as sqlite_sql
from receiver.store.sqlite import writer
from receiver.store.sqlite.checkpoint import Checkpointer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from receiver.models import Event

VARIANTS = ("keyed", "folded")
HANDLERS = (prefill.HANDLER,)

_JOB_COLUMNS = """
    id              INTEGER PRIMARY KEY,
    source          TEXT NOT NULL,
    job_id          TEXT NOT NULL,
    state           TEXT NOT NULL,
    provider_status TEXT NOT NULL,
    metadata        TEXT NOT NULL DEFAULT '{}',
    error           TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    last_news_at    REAL NOT NULL,
    terminal_at     REAL,
    progress_done   INTEGER,
    progress_total  INTEGER,
    expected_pages  INTEGER,
    next_poll_at    REAL,
    poll_attempts   INTEGER NOT NULL DEFAULT 0,
    error_code      TEXT,"""

_JOB_INDEXES = """
CREATE INDEX jobs_poll ON jobs (source, next_poll_at) WHERE terminal_at IS NULL;
CREATE INDEX jobs_listing ON jobs (created_at, source, job_id);
CREATE INDEX jobs_terminal ON jobs (terminal_at) WHERE terminal_at IS NOT NULL;
"""

_DISPATCH_COLUMNS = """
    handler         TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error      TEXT,
    lease_owner     TEXT,
    lease_until     REAL,
    updated_at      REAL NOT NULL,
    finished_at     REAL,
    error_code      TEXT,"""

KEYED = f"""
CREATE TABLE jobs ({_JOB_COLUMNS}
    UNIQUE (source, job_id)
);
{_JOB_INDEXES}
CREATE TABLE deliveries (
    source          TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    job             INTEGER NOT NULL,
    state           TEXT NOT NULL,
    provider_status TEXT NOT NULL,
    received_at     REAL NOT NULL,
    PRIMARY KEY (source, message_id)
);
CREATE INDEX deliveries_job ON deliveries (job);

CREATE TABLE completions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job             INTEGER NOT NULL UNIQUE,
    source          TEXT NOT NULL,
    job_id          TEXT NOT NULL,
    state           TEXT NOT NULL,
    provider_status TEXT NOT NULL,
    metadata        TEXT NOT NULL DEFAULT '{{}}',
    error           TEXT,
    created_at      REAL NOT NULL,
    phase           TEXT NOT NULL DEFAULT 'resolving',
    result_path     TEXT,
    result_sha256   TEXT,
    result_bytes    INTEGER,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error      TEXT,
    lease_owner     TEXT,
    lease_until     REAL,
    resolved_at     REAL,
    result_ref      TEXT,
    confidence      REAL,
    error_code      TEXT,
    traceparent     TEXT,
    error_where     TEXT,
    resolve_seconds REAL
);
CREATE INDEX completions_due ON completions (next_attempt_at) WHERE phase = 'resolving';
CREATE INDEX completions_results ON completions (id) WHERE result_path IS NOT NULL;

CREATE TABLE dispatches (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    completion_id   INTEGER NOT NULL
                    REFERENCES completions (id) ON DELETE CASCADE,{_DISPATCH_COLUMNS}
    UNIQUE (completion_id, handler)
);
CREATE INDEX dispatches_due ON dispatches (state, next_attempt_at);
"""
"""(K): the completion in a table of its own, unique by the job's id."""

FOLDED = f"""
CREATE TABLE jobs ({_JOB_COLUMNS}
    phase           TEXT,
    completion_created_at REAL,
    result_path     TEXT,
    result_sha256   TEXT,
    result_bytes    INTEGER,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,
    last_error      TEXT,
    lease_owner     TEXT,
    lease_until     REAL,
    resolved_at     REAL,
    result_ref      TEXT,
    confidence      REAL,
    error_where     TEXT,
    traceparent     TEXT,
    resolve_seconds REAL,
    UNIQUE (source, job_id)
);
{_JOB_INDEXES}
CREATE INDEX jobs_due ON jobs (next_attempt_at) WHERE phase = 'resolving';
CREATE INDEX jobs_results ON jobs (id) WHERE result_path IS NOT NULL;

CREATE TABLE deliveries (
    source          TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    job             INTEGER NOT NULL,
    state           TEXT NOT NULL,
    provider_status TEXT NOT NULL,
    received_at     REAL NOT NULL,
    PRIMARY KEY (source, message_id)
);
CREATE INDEX deliveries_job ON deliveries (job);

CREATE TABLE dispatches (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job             INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,{_DISPATCH_COLUMNS}
    UNIQUE (job, handler)
);
CREATE INDEX dispatches_due ON dispatches (state, next_attempt_at);
"""
"""(F): the completion's columns on the job's row; ``phase`` is NULL until the job completes."""

SCHEMAS = {"keyed": KEYED, "folded": FOLDED}

_JOB_INSERT = """INSERT INTO jobs (id, source, job_id, state, provider_status, metadata, error,
    error_code, created_at, updated_at, last_news_at, terminal_at, progress_done,
    progress_total"""
_DELIVERY_INSERT = """INSERT INTO deliveries (source, message_id, job, state, provider_status,
    received_at) VALUES (?, ?, ?, ?, ?, ?)"""
_DISPATCH_VALUES = """handler, state, attempts, next_attempt_at, last_error, error_code,
    updated_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""

PREFILL = {
    "keyed": {
        "jobs": f"{_JOB_INSERT}) VALUES ({', '.join('?' * 14)})",
        "deliveries": _DELIVERY_INSERT,
        "completions": """INSERT INTO completions (id, job, source, job_id, state,
            provider_status, metadata, error, error_code, created_at, phase, result_path,
            result_sha256, result_bytes, attempts, next_attempt_at, resolved_at, confidence)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'ready', ?, ?, ?, 1, ?, ?, ?)""",
        "dispatches": "INSERT INTO dispatches (completion_id, " + _DISPATCH_VALUES,
    },
    "folded": {
        "jobs": f"""{_JOB_INSERT}, phase, completion_created_at, result_path, result_sha256,
            result_bytes, attempts, next_attempt_at, resolved_at, confidence)
            VALUES ({", ".join("?" * 23)})""",
        "deliveries": _DELIVERY_INSERT,
        "dispatches": "INSERT INTO dispatches (job, " + _DISPATCH_VALUES,
    },
}
"""Each variant's rows from ``bench.prefill.month`` (see ``translate``)."""

_NO_COMPLETION: tuple[Any, ...] = (None, None, None, None, None, 0, None, None, None)


def translate(rows: prefill.Rows, last_id: int) -> tuple[dict[str, prefill.Rows], int]:
    """One chunk of ``bench.prefill.month``'s rows in each variant's shape: jobs numbered from
    ``last_id + 1`` in the month's order (the order they were first seen); the last id used."""
    # The month's rows end with the job's id in today's schema; the variants number jobs here.
    rows = {table: [r[:-1] for r in values] if table != "dispatches" else values
            for table, values in rows.items()}  # fmt: skip
    ids: dict[str, int] = {}
    for job in rows["jobs"]:
        last_id += 1
        ids[job[1]] = last_id
    job_of: dict[int, int] = {}
    completion_of: dict[str, tuple[Any, ...]] = {}
    keyed_completions = []
    for c in rows["completions"]:
        job_of[c[0]] = ids[c[2]]
        completion_of[c[2]] = c
        keyed_completions.append((c[0], ids[c[2]], *c[1:]))
    deliveries = [(d[0], d[1], ids[d[2]], *d[3:]) for d in rows["deliveries"]]
    folded_jobs = []
    for job in rows["jobs"]:
        done = _NO_COMPLETION
        if (comp := completion_of.get(job[1])) is not None:
            done = ("ready", comp[8], *comp[9:12], 1, *comp[12:])
        folded_jobs.append((ids[job[1]], *job, *done))
    return {
        "keyed": {
            "jobs": [(ids[job[1]], *job) for job in rows["jobs"]],
            "deliveries": deliveries,
            "completions": keyed_completions,
            "dispatches": rows["dispatches"],
        },
        "folded": {
            "jobs": folded_jobs,
            "deliveries": deliveries,
            "dispatches": [(job_of[d[0]], *d[1:]) for d in rows["dispatches"]],
        },
    }, last_id


def _marker(jobs: int, ids: str) -> dict[str, Any]:
    ddl = hashlib.sha256(json.dumps([SCHEMAS, PREFILL], sort_keys=True).encode()).hexdigest()
    return {"jobs": jobs, "message_ids": ids, "generator": prefill.GENERATOR, "ddl": ddl[:16]}


def prefilled(directory: Path, jobs: int, ids: str) -> dict[str, Path]:
    """Both variants' stores of ``jobs`` jobs with message ids ``ids`` in ``directory``, loaded
    from one pass over the month's rows unless current ones are there (a sidecar names the
    size, ids, generator and DDL they were made with)."""
    suffix = "" if ids == "ksuid" else "-random-ids"
    paths = {v: directory / f"schema-{v}-{jobs}{suffix}.db" for v in VARIANTS}
    sidecar = directory / f"schema-variants-{jobs}{suffix}.json"
    marker = _marker(jobs, ids)
    if (
        sidecar.exists()
        and json.loads(sidecar.read_text("utf-8")) == marker
        and all(p.exists() for p in paths.values())
    ):
        return paths
    directory.mkdir(parents=True, exist_ok=True)
    sidecar.unlink(missing_ok=True)
    started = time.perf_counter()
    conns = {}
    for variant, path in paths.items():
        for stale in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
            stale.unlink(missing_ok=True)
        conn = sqlite3.connect(path, isolation_level=None)
        for pragma in ("synchronous=OFF", "cache_size=-524288", "temp_store=MEMORY"):
            conn.execute(f"PRAGMA {pragma}")
        conn.executescript(SCHEMAS[variant])
        conns[variant] = conn
    last_id = 0
    try:
        for rows in prefill.month(jobs, message_ids=ids):
            shaped, last_id = translate(rows, last_id)
            for variant, conn in conns.items():
                conn.execute("BEGIN")
                for table, values in shaped[variant].items():
                    conn.executemany(PREFILL[variant][table], values)
                conn.execute("COMMIT")
        for conn in conns.values():
            conn.execute("ANALYZE")
            conn.execute("PRAGMA journal_mode=WAL")
    finally:
        for conn in conns.values():
            conn.close()
    sidecar.write_text(json.dumps(marker), "utf-8")
    print(f"bench: prefilled both variants with {jobs:,} jobs in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip
    return paths


INSERT_KEYED_NEW_COMPLETION = """
INSERT INTO completions (job, source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref, error_code, traceparent)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT (job) DO NOTHING
"""
INSERT_KEYED_COMPLETION = """
INSERT INTO completions (job, source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref, error_code, traceparent)
SELECT id, source, job_id, state, provider_status, metadata, error, ?2, ?2, ?3, ?4, error_code, ?5
FROM jobs WHERE id = ?1
ON CONFLICT (job) DO NOTHING
"""
INSERT_FOLDED_NEW_COMPLETED_JOB = """
INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, created_at, updated_at,
                  last_news_at, terminal_at, progress_done, progress_total, expected_pages,
                  next_poll_at, error_code, phase, completion_created_at, next_attempt_at,
                  result_ref, traceparent)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?7, ?7, ?15, ?16)
ON CONFLICT DO NOTHING
"""
"""A job whose first news finishes it: its row and its completion in one insert."""
COMPLETE_FOLDED_JOB = """
UPDATE jobs SET phase = ?2, completion_created_at = ?3, next_attempt_at = ?3, result_ref = ?4,
    traceparent = ?5
WHERE id = ?1 AND phase IS NULL
"""
KEYED_DELIVERY = """
INSERT INTO deliveries (source, message_id, job, state, provider_status, received_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
KEYED_REQUEUE_DEAD = sql.REQUEUE_DEAD_FOR_JOB
FOLDED_REQUEUE_DEAD = sql.REQUEUE_DEAD_FOR_JOB.replace(
    "completion_id = (SELECT id FROM completions WHERE job = ?)", "job = ?"
)
FOLDED_DISPATCH = """
INSERT INTO dispatches (job, handler, next_attempt_at, updated_at)
VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
FOLDED_CLAIM = """
UPDATE jobs SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM jobs
    WHERE phase = 'resolving' AND next_attempt_at <= ?
      AND (lease_until IS NULL OR lease_until < ?)
    ORDER BY next_attempt_at LIMIT ?)
RETURNING id, source, job_id, state, provider_status, metadata, error, completion_created_at,
    phase, result_path, result_sha256, result_bytes, attempts, result_ref, traceparent,
    resolved_at, resolve_seconds, error_code
"""
FOLDED_RESOLVE = sql.RESOLVE_COMPLETION.replace("UPDATE completions", "UPDATE jobs")
CLAIM = {"keyed": sqlite_sql.CLAIM_COMPLETIONS, "folded": FOLDED_CLAIM}
RESOLVE = {"keyed": sql.RESOLVE_COMPLETION, "folded": FOLDED_RESOLVE}


def _job(db: sqlite3.Connection, args: Sequence[Any], first: str) -> tuple[int, str | None]:
    """The job's id after ``first`` (an insert of a new job), and None for a new job, else its
    state before this news."""
    cursor = db.execute(first, args)
    if cursor.rowcount:
        return int(cursor.lastrowid or 0), None
    job, state = db.execute(
        "SELECT id, state FROM jobs WHERE source = ? AND job_id = ?", args[:2]
    ).fetchone()
    return int(job), str(state)


def ingest_keyed(
    db: sqlite3.Connection, event: Event, handlers: Sequence[str], resolve: bool, now: float
) -> str:
    """``operations.ingest`` on (K); the outcome (duplicate, accepted, completed). The job goes
    first, since the delivery needs its id (a duplicate's job is always there already)."""
    args = codec.job_args(event, now)
    job, known = _job(db, args, sqlite_sql.INSERT_NEW_JOB)
    delivery = (event.source, event.message_id, job, event.state.value, event.provider_status, now)
    if not db.execute(KEYED_DELIVERY, delivery).rowcount:
        db.execute(KEYED_REQUEUE_DEAD, (now, now, job))
        return "duplicate"
    state = (
        event.state.value
        if known is None
        else db.execute(sqlite_sql.UPSERT_JOB, args).fetchone()[0]
    )
    if not (event.state.terminal and state == event.state):
        return "accepted"
    phase, ref = codec.completion_phase(event, resolve)
    if known is None:
        params = (job, *args[:7], phase, ref, event.error_code, event.traceparent)
        created = db.execute(INSERT_KEYED_NEW_COMPLETION, params)
    else:
        created = db.execute(INSERT_KEYED_COMPLETION, (job, now, phase, ref, event.traceparent))
    if not created.rowcount:
        return "accepted"
    db.executemany(sql.INSERT_DISPATCH, [(created.lastrowid, h, now, now) for h in handlers])
    return "completed"


def ingest_folded(
    db: sqlite3.Connection, event: Event, handlers: Sequence[str], resolve: bool, now: float
) -> str:
    """``operations.ingest`` on (F): a job whose first news finishes it is inserted with its
    completion; a known job's completion is an UPDATE of its row."""
    args = codec.job_args(event, now)
    phase, ref = codec.completion_phase(event, resolve)
    if event.state.terminal:
        first_args: Sequence[Any] = (*args, phase, ref, event.traceparent)
        job, known = _job(db, first_args, INSERT_FOLDED_NEW_COMPLETED_JOB)
    else:
        job, known = _job(db, args, sqlite_sql.INSERT_NEW_JOB)
    delivery = (event.source, event.message_id, job, event.state.value, event.provider_status, now)
    if not db.execute(KEYED_DELIVERY, delivery).rowcount:
        db.execute(FOLDED_REQUEUE_DEAD, (now, now, job))
        return "duplicate"
    if known is None:
        completed = event.state.terminal
    else:
        state = db.execute(sqlite_sql.UPSERT_JOB, args).fetchone()[0]
        completed = bool(
            event.state.terminal
            and state == event.state
            and db.execute(COMPLETE_FOLDED_JOB, (job, phase, now, ref, event.traceparent)).rowcount
        )
    if not completed:
        return "accepted"
    db.executemany(FOLDED_DISPATCH, [(job, h, now, now) for h in handlers])
    return "completed"


INGEST: dict[str, Callable[[sqlite3.Connection, Event, Sequence[str], bool, float], str]] = {
    "keyed": ingest_keyed,
    "folded": ingest_folded,
}


@dataclass
class Tally:
    """What a run of transactions wrote, summed over its commits."""

    items: int = 0
    commits: int = 0
    cpu: float = 0.0
    cpu_commit: float = 0.0
    pages: int = 0
    misses: int = 0
    wal_bytes: int = 0
    random_leaves: dict[str, int] = field(default_factory=dict)

    def per(self, n: int) -> dict[str, Any]:
        n = max(n, 1)
        return {
            "cpu_us": self.cpu / n * 1e6,
            "cpu_us_in_commit": self.cpu_commit / n * 1e6,
            "pages": self.pages / n,
            "random_leaves": sum(self.random_leaves.values()) / n,
            "random_leaves_by_tree": {
                tree: round(count / n, 3)
                for tree, count in sorted(self.random_leaves.items(), key=lambda kv: -kv[1])
            },
            "wal_bytes": self.wal_bytes / n,
            "cache_misses": self.misses / n,
        }


class Meter:
    """Runs transactions on the writer's connection and tallies what each commit wrote."""

    def __init__(self, conn: sqlite3.Connection, wal: Path) -> None:
        self.conn = conn
        self.pages_of = PageMap(conn)
        self.status = DbStatus(conn)
        self.reader = WalReader(wal)
        for counter in (CACHE_WRITE, CACHE_MISS):
            self.status.take(counter)

    def transaction(self, tally: Tally, work: Callable[[], int]) -> int:
        """``work`` in one ``BEGIN IMMEDIATE ... COMMIT``; it returns how many items it did."""
        cpu0 = time.thread_time()
        self.conn.execute("BEGIN IMMEDIATE")
        done = work()
        cpu1 = time.thread_time()
        self.conn.execute("COMMIT")
        cpu2 = time.thread_time()
        tally.items += done
        tally.commits += 1
        tally.cpu += cpu2 - cpu0
        tally.cpu_commit += cpu2 - cpu1
        tally.pages += self.status.take(CACHE_WRITE)
        tally.misses += self.status.take(CACHE_MISS)
        written, size = self.reader.last_commit()
        tally.wal_bytes += size
        for page in set(written):
            tree = self.pages_of.random_leaf(page)
            if tree is not None:
                tally.random_leaves[tree] = tally.random_leaves.get(tree, 0) + 1
        return done


def run(db: Path, variant: str, hooks: Sequence[Event], batch: int) -> dict[str, Any]:
    """The webhooks ``hooks`` through ``variant``'s ingest into ``db``, then every completion
    they made claimed and resolved; the figures per webhook and per completion."""
    conn = writer.connect(db)
    checkpointer = Checkpointer(db)
    checkpointer.start()
    meter = Meter(conn, Path(f"{db}-wal"))
    ingest = INGEST[variant]
    outcomes: dict[str, int] = {}
    webhooks = Tally()

    def ingest_batch(events: Sequence[Event]) -> int:
        now = time.time()
        for event in events:
            outcome = ingest(conn, event, HANDLERS, True, now)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return len(events)

    for start in range(0, len(hooks), batch):
        meter.transaction(webhooks, functools.partial(ingest_batch, hooks[start : start + batch]))
    claims, resolves = Tally(), Tally()
    owner, claimed = "bench", list[Any]()

    def claim() -> int:
        now = time.time() + 1.0
        claimed[:] = conn.execute(CLAIM[variant], (owner, now + 60, now, now, batch)).fetchall()
        return len(claimed)

    def resolve() -> int:
        for row in claimed:
            conn.execute(RESOLVE[variant], _resolution(row[0], row[2], owner))
        return len(claimed)

    while meter.transaction(claims, claim):
        meter.transaction(resolves, resolve)
    checkpointer.stop()
    meter.reader.close()
    rows = _rows(conn, variant)
    conn.close()
    return {
        "variant": variant,
        "webhooks": len(hooks),
        "batch": batch,
        "outcomes": outcomes,
        "rows": rows,
        "per_webhook": webhooks.per(len(hooks)),
        "per_claimed_completion": claims.per(claims.items),
        "per_resolved_completion": resolves.per(resolves.items),
        "completions_resolved": resolves.items,
        "store_mb": db.stat().st_size / 1e6,
        "load_average": os.getloadavg()[0],
    }


def _resolution(completion: int, job: str, owner: str) -> tuple[Any, ...]:
    """``codec.resolution_params`` of a successful fetch: a result file, its hash and size."""
    digest = hashlib.sha256(job.encode()).hexdigest()
    return (f"results/reducto/{job}.json", digest, 48_213, None, None, None, None, time.time(),
            0.93, None, 0.41, completion, owner)  # fmt: skip


def _rows(conn: sqlite3.Connection, variant: str) -> dict[str, int]:
    """How many jobs, deliveries, completions and dispatches the store holds: the same in both
    variants when both did the same work."""
    table = "completions" if variant == "keyed" else "jobs"
    queries = {
        "jobs": "SELECT count(*) FROM jobs",
        "deliveries": "SELECT count(*) FROM deliveries",
        "completions": f"SELECT count(*) FROM {table} WHERE phase IS NOT NULL",  # noqa: S608
        "resolving": f"SELECT count(*) FROM {table} WHERE phase = 'resolving'",  # noqa: S608
        "dispatches": "SELECT count(*) FROM dispatches",
    }
    return {name: int(conn.execute(q).fetchone()[0]) for name, q in queries.items()}


def compare(
    directory: Path, jobs: int, webhooks: int, batch: int, ids: str, rounds: int = 1
) -> dict[str, dict[str, Any]]:
    """Both variants, each on a fresh copy of its prefilled store, with the same webhooks,
    ``rounds`` times, the order rotating round by round (the first to run meets a colder OS
    cache and whatever else the machine is doing); each figure the median of the rounds."""
    stores = prefilled(directory / "prefill", jobs, ids)
    work = directory / "work" / "schema_variants"
    work.mkdir(parents=True, exist_ok=True)
    hooks = events(webhooks, seed=7, ids=ids)
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in stores}
    for round_ in range(rounds):
        for variant in VARIANTS[round_ % 2 :] + VARIANTS[: round_ % 2]:
            db = prefill.copy_store(stores[variant], work / f"{variant}-{ids}.db")
            runs[variant].append(run(db, variant, hooks, batch))
    results = {}
    for variant, each in runs.items():
        cpu = [r["per_webhook"]["cpu_us"] for r in each]
        results[variant] = _median(each)
        results[variant].update(jobs=jobs, message_ids=ids, rounds=rounds, writer_cpu_us=cpu)
    return results


def _median(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each number the median of its values in ``results``; anything else as the first has it."""
    out: dict[str, Any] = {}
    for key, first in results[0].items():
        if isinstance(first, dict):
            out[key] = _median([r[key] for r in results])
        elif isinstance(first, (int, float)):
            out[key] = statistics.median(r.get(key, 0) for r in results)
        else:
            out[key] = first
    return out


_SHOWN = (
    ("per_webhook", "cpu_us", "writer CPU µs / webhook", "{:.1f}"),
    ("per_webhook", "cpu_us_in_commit", "  of it in COMMIT", "{:.1f}"),
    ("per_webhook", "pages", "B-tree pages / webhook", "{:.2f}"),
    ("per_webhook", "random_leaves", "random leaves / webhook", "{:.2f}"),
    ("per_webhook", "wal_bytes", "WAL bytes / webhook", "{:,.0f}"),
    ("per_webhook", "cache_misses", "cache misses / webhook", "{:.2f}"),
    ("per_claimed_completion", "cpu_us", "claim CPU µs / completion", "{:.1f}"),
    ("per_claimed_completion", "pages", "claim pages / completion", "{:.2f}"),
    ("per_claimed_completion", "wal_bytes", "claim WAL bytes / compl.", "{:,.0f}"),
    ("per_resolved_completion", "cpu_us", "resolve CPU µs / compl.", "{:.1f}"),
    ("per_resolved_completion", "pages", "resolve pages / compl.", "{:.2f}"),
    ("per_resolved_completion", "wal_bytes", "resolve WAL bytes / compl.", "{:,.0f}"),
)


def render(results: dict[str, dict[str, Any]]) -> str:
    """The two variants side by side, then each one's random leaves by tree."""
    first = next(iter(results.values()))
    lines = [
        f"{first['jobs']:,} jobs prefilled, {first['webhooks']:,} webhooks in batches of "
        f"{first['batch']}, message ids: {first['message_ids']}, medians of {first['rounds']} "
        "round(s)",
        f"{'':28}" + "".join(f"{name:>16}" for name in results),
    ]
    for group, key, label, form in _SHOWN:
        lines.append(f"{label:28}" + "".join(f"{form.format(r[group][key]):>16}"
                                             for r in results.values()))  # fmt: skip
    lines.append(f"{'store MB (after the run)':28}"
                 + "".join(f"{r['store_mb']:>16.0f}" for r in results.values()))  # fmt: skip
    for name, r in results.items():
        lines.append(f"random leaves / webhook by tree ({name}): "
                     f"{r['per_webhook']['random_leaves_by_tree']}")  # fmt: skip
        lines.append(f"rows after the run ({name}): {r['rows']}, outcomes: {r['outcomes']}")
        lines.append(f"writer CPU µs / webhook, each round ({name}): "
                     + ", ".join(f"{cpu:.1f}" for cpu in r["writer_cpu_us"]))  # fmt: skip
    lines.append(f"load average: {os.getloadavg()[0]:.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.schema_variants", description=__doc__)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--webhooks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--message-ids", choices=("ksuid", "random"), default="ksuid")
    parser.add_argument("--rounds", type=int, default=1, help="medians of this many runs")
    parser.add_argument("--dir", type=Path, default=RESULTS,
                        help="where the stores and the results go")  # fmt: skip
    args = parser.parse_args(argv)
    results = compare(args.dir, args.jobs, args.webhooks, args.batch, args.message_ids, args.rounds)
    print(render(results))
    out = args.dir / f"schema_variants-{args.message_ids}.json"
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
