"""Field stats: ``GET /jobs/stats``'s per-field figures and the weak-field filter on a big store.

A SQLite store (migrated by the real store) is filled with ``--jobs`` resolved DocExtract jobs
of four fields each, spread over 30 days (so the 24 h period holds about a thirtieth); every
10th job's ``total`` is weak. Then, through the store's own methods, each figure is read
``--rounds`` times: ``field_stats`` for 24 h and 30 d (with ``job_stats`` over 30 d, the rest
of ``/jobs/stats``, as an anchor), the first page of ``field=total&max_confidence=0.8``, and
the export's union of field names (all jobs; the last 24 h). Medians are printed.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import report
from receiver.store.rows import JobFilter
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable

FIELDS = ("invoice_number", "total", "vendor", "due_date")
DAY = 86400.0


def _fill(db: Path, jobs: int, now: float) -> None:
    rng = random.Random(7)
    conn = sqlite3.connect(db)
    try:
        with conn:
            for start in range(0, jobs, 10_000):
                job_rows, completion_rows, field_rows = [], [], []
                for n in range(start, min(start + 10_000, jobs)):
                    at = now - rng.random() * 30 * DAY
                    job_id = f"job-{n:08d}"
                    job_rows.append(("docextract", job_id, at, at + 5))
                    confidences = {name: round(0.85 + rng.random() * 0.15, 3) for name in FIELDS}
                    if n % 10 == 9:
                        confidences["total"] = 0.62
                    completion_rows.append((n + 1, job_id, at, min(confidences.values())))
                    field_rows += [
                        (n + 1, name, "docextract", at, c, f"v{n}")
                        for name, c in confidences.items()
                    ]
                conn.executemany(
                    "INSERT INTO jobs (source, job_id, state, provider_status, metadata, "
                    "created_at, updated_at, last_news_at, terminal_at) "
                    "VALUES (?, ?, 'succeeded', 'completed', '{}', ?, ?4, ?4, ?4)",
                    job_rows,
                )
                conn.executemany(
                    "INSERT INTO completions (id, source, job_id, state, provider_status, metadata,"
                    " created_at, next_attempt_at, phase, confidence) VALUES (?, 'docextract', ?,"
                    " 'succeeded', 'completed', '{}', ?3, ?3, 'ready', ?)",
                    completion_rows,
                )
                conn.executemany(
                    "INSERT INTO job_fields (completion_id, field, source, created_at, confidence,"
                    " value) VALUES (?, ?, ?, ?, ?, ?)",
                    field_rows,
                )
    finally:
        conn.close()


async def _time(rounds: int, work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    seconds, answer = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        answer = await work()
        seconds.append(time.perf_counter() - started)
    return report.median(seconds), answer


async def _measure(db: Path, rounds: int, now: float) -> dict[str, Any]:
    store = SQLiteStore(db)
    await store.open()
    try:
        weak = JobFilter(field="total", max_confidence=0.8)
        recent = JobFilter(created_after=now - DAY)
        figures: dict[str, Any] = {}
        for name, work in (
            ("stats_24h", lambda: store.field_stats(now - DAY, {"docextract": 0.85}, 0.8)),
            ("stats_30d", lambda: store.field_stats(now - 31 * DAY, {"docextract": 0.85}, 0.8)),
            ("job_stats_30d (anchor: the other figures)", lambda: store.job_stats(now - 31 * DAY)),
            ("weak_first_page", lambda: store.list_jobs(weak, limit=50)),
            ("export_names_filtered_24h", lambda: store.field_names(recent, 100)),
            ("export_field_names", lambda: store.field_names(JobFilter(), 100)),
        ):
            seconds, answer = await _time(rounds, work)
            figures[name] = {"seconds": round(seconds, 4)}
            if name.startswith("stats"):
                figures[name]["rows"] = sum(f.count for f in answer.fields)
        return figures
    finally:
        await store.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    jobs = args.jobs
    now = time.time()
    with tempfile.TemporaryDirectory(prefix="jobhook-bench-fields-") as tmp:
        db = Path(tmp) / "store.db"
        store = SQLiteStore(db)
        asyncio.run(_open_and_close(store))
        started = time.perf_counter()
        _fill(db, jobs, now)
        filled = time.perf_counter() - started
        figures = asyncio.run(_measure(db, args.rounds, now))
    rows = [
        (name, f["seconds"], f.get("rows", "")) for name, f in figures.items()
    ]  # fmt: skip
    report.show(
        f"field stats, SQLite, {jobs} jobs x {len(FIELDS)} fields (filled in {filled:.1f} s)",
        ["read", "median seconds", "field values counted"],
        rows,
    )
    return {"jobs": jobs, "fields_per_job": len(FIELDS), "figures": figures}


async def _open_and_close(store: SQLiteStore) -> None:
    await store.open()
    await store.close()
