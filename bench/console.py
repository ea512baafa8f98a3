"""Console: the jobs page (100 rows) rendered from a store of ``--console-jobs`` jobs.

The store is the month of traffic ``bench.prefill.ensure_prefilled`` builds (1,000,000 jobs by
default; built once, then reused). Until that module is present, a smaller store is filled here
through the store API and the table says so. jobhook's real app serves the store on loopback;
an httpx client logs in to the console like a browser and asks for each page ``REQUESTS``
times after a warm-up. Figures are whole request times (routing, store reads, template), as an
operator's browser waits for them. Target: the first jobs page under 200 ms.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

import httpx

from bench import report
from receiver.config.settings import Settings
from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.service.serving import serving
from receiver.store.rows import JobFilter
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

TARGET_MS = 200.0
REQUESTS = 30
FALLBACK_JOBS = 20_000
STATES = (State.SUCCEEDED,) * 8 + (State.FAILED, State.RUNNING)


async def fill(path: Path, jobs: int) -> Path:
    """A stand-in store of ``jobs`` jobs through the store API (succeeded, failed, running)."""
    store = SQLiteStore(path)
    await store.open()
    try:
        have = len(await store.list_jobs(JobFilter(), limit=jobs))
        for start in range(have, jobs, 500):
            events = [
                Event(source="reducto", job_id=f"bench-{i:08d}", state=STATES[i % len(STATES)],
                      provider_status="x", via="webhook", message_id=f"m-{i}",
                      metadata={"customer": f"c{i % 50}"})
                for i in range(start, min(start + 500, jobs))
            ]  # fmt: skip
            # No dispatches: a stand-in of delivered traffic, so no handler is busy while timed.
            await asyncio.gather(*(store.ingest(e, (), resolve=False) for e in events))
    finally:
        await store.close()
    return path


async def store_path(jobs: int) -> tuple[Path, int, str]:
    """The store to read, how many jobs it holds, and where it came from."""
    folder = report.RESULTS / "stores"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        prefill = importlib.import_module("bench.prefill")
    except ImportError:
        count = min(jobs, FALLBACK_JOBS)
        path = await fill(folder / f"console-{count}.db", count)
        return path, count, f"filled here ({count:,}; bench.prefill is absent)"
    path = folder / f"prefilled-{jobs}.db"
    made: Path = await asyncio.to_thread(prefill.ensure_prefilled, path, jobs)
    return made, jobs, "bench.prefill (a month of traffic)"


def settings(path: Path, data: Path, token: str) -> Settings:
    return Settings.model_validate(
        {"data_dir": str(data), "server": {"admin_token": token},
         "store": {"url": f"sqlite:///{path}"},
         "sources": {"reducto": {"provider": "reducto", "secrets": [_throwaway_secret()]}},
         "handlers": [{"name": "files", "type": "file", "dir": str(data / "out")}],
         "log": {"level": "warning"}},
        context={"env": {}},
    )  # fmt: skip


def _throwaway_secret() -> str:
    # Nothing is signed in this benchmark; the source only needs a well-formed key.
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


async def _timed(client: httpx.AsyncClient, path: str, rounds: int) -> list[float]:
    for _ in range(3):
        (await client.get(path)).raise_for_status()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = await client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return times


async def measure(jobs: int, rounds: int) -> dict[str, Any]:
    path, count, origin = await store_path(jobs)
    token = secrets.token_urlsafe(24)
    app = create_app(settings(path, path.parent / "console-data", token))
    figures: dict[str, Any] = {"jobs_in_store": count, "store": origin, "pages": {}}
    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        login = await client.post("/ui/login", data={"token": token})
        assert login.status_code == 303, f"the console refused the login: {login.status_code}"
        first = (await client.get("/ui/jobs")).text
        rows = first.count('<td class="id">')
        older = re.search(r'href="/ui/jobs\?(cursor=[^"]+)" rel="next"', first)
        pages = {"jobs, newest 100": "/ui/jobs", "jobs, state=failed": "/ui/jobs?state=failed",
                 "jobs, metadata filter": "/ui/jobs?metadata=customer%3Ac7"}  # fmt: skip
        if older:
            pages["jobs, second page (cursor)"] = "/ui/jobs?" + older.group(1).replace("&amp;", "&")
        pages |= {"(info) overview 24h": "/ui/overview", "(info) dead letters": "/ui/dead"}
        for name, page in pages.items():
            times = await _timed(client, page, rounds * REQUESTS // 3)
            figures["pages"][name] = {
                "median_ms": round(report.median(times), 1),
                "p95_ms": round(report.percentile(times, 95), 1),
            }
    figures["rows_on_first_page"] = rows
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    figures = asyncio.run(measure(args.console_jobs, args.rounds))
    first = figures["pages"]["jobs, newest 100"]["median_ms"]
    report.show(
        f"console pages from a store of {figures['jobs_in_store']:,} jobs ({figures['store']}), "
        f"{figures['rows_on_first_page']} rows on the first page",
        ["page", "median ms", "p95 ms"],
        [(name, p["median_ms"], p["p95_ms"]) for name, p in figures["pages"].items()],
    )
    report.console.print(f"  jobs page < {TARGET_MS:g} ms: {report.verdict(first < TARGET_MS)}")
    return {"target_ms": TARGET_MS, **figures}
