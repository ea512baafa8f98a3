"""Poller: ``--jobs`` tracked jobs whose webhooks never come, polled within the provider's budget.

The simulator (``jobhook simulate``, Reducto's shape) enforces a sliding-window budget of
``RPM`` requests per minute per API key and records every request it answers, refusals
included; jobhook is configured with the same budget, the tightest it may use. No webhook
is ever sent, so the poller is the only way anything completes. Half the jobs have finished
at the provider (their webhook was lost), half run for a day; they are registered with
``POST /jobs`` in a shuffled order, so nothing tells the poller which is which, and a poller
that wastes no request needs 1 / (finished share) = 2.0 requests per completed job while it
works through the backlog. Registering 10,000 jobs takes a while: the measured window starts
once it is over, with the poller already busy.

Measured over ``--window`` seconds: the CPU of the jobhook process (and of the simulator
answering the same requests, as an anchor), the job-API requests the simulator logged, the
jobs that became terminal in jobhook's store, and - over the whole run - the requests the
simulator refused for the budget (violations), 429s, and the most requests accepted in any
sliding 60 s (recounted here from the simulator's log).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import httpx

from bench import procs, report

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

RPM = 600  # the simulator's budget per key, and jobhook's requests_per_minute
TARGET_CPU_PERCENT = 5.0
TRACK_CONCURRENCY = 16
SETTLE_SECONDS = 2.0


def _terminal(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        (count,) = conn.execute(
            "SELECT count(*) FROM jobs WHERE terminal_at IS NOT NULL"
        ).fetchone()
    finally:
        conn.close()
    return int(count)


def _create_jobs(sim: procs.Service, count: int, seed: int) -> list[str]:
    """``count`` jobs in the simulator, half finished already, half running for a day."""
    finished = count // 2
    ids: list[str] = []
    with httpx.Client(base_url=sim.url, trust_env=False, timeout=60) as client:
        for n, duration in ((finished, 0.0), (count - finished, 86_400.0)):
            if n:
                answer = client.post("/_sim/jobs", json={"count": n, "duration": duration,
                                                         "result": "inline"})  # fmt: skip
                answer.raise_for_status()
                ids += answer.json()["job_ids"]
    random.Random(seed).shuffle(ids)
    return ids


async def _track(url: str, token: str, job_ids: list[str]) -> int:
    """Register every job with ``POST /jobs``; how many were not answered 2xx."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for job_id in job_ids:
        queue.put_nowait(job_id)
    failed = 0
    headers = {"Authorization": f"Bearer {token}"}

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal failed
        while not queue.empty():
            job_id = queue.get_nowait()
            answer = await client.post("/jobs", json={"source": "reducto", "job_id": job_id})
            failed += not answer.is_success

    async with httpx.AsyncClient(base_url=url, headers=headers, trust_env=False,
                                 timeout=30) as client:  # fmt: skip
        await asyncio.gather(*(worker(client) for _ in range(TRACK_CONCURRENCY)))
    return failed


def _api_log(sim: procs.Service) -> list[dict[str, Any]]:
    with httpx.Client(base_url=sim.url, trust_env=False, timeout=60) as client:
        route = client.get("/_sim").json()["job_route"]
        prefix = route.split("{", 1)[0]
        entries: list[dict[str, Any]] = client.get("/_sim/log", params={"path": prefix}).json()[
            "entries"
        ]
    return entries


def _busiest_minute(times: list[float]) -> int:
    """The most requests in any sliding 60 s window."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - 60.0:
            start += 1
        best = max(best, end - start + 1)
    return best


def _round(n: int, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    directory = work / f"r{n}"
    directory.mkdir()
    sim_port, port = procs.free_port(), procs.free_port()
    token = secrets.token_urlsafe(24)
    sim = procs.simulator(directory, sim_port, "--requests-per-minute", str(RPM))
    poll = {"grace_seconds": 0, "initial_delay": 2.0, "max_delay": 60.0,
            "requests_per_minute": RPM}  # fmt: skip
    token_ref = "env:BENCH_ADMIN_TOKEN"  # noqa: S105 (where the token is, not the token)
    config = procs.jobhook_config(directory, port, api_base_url=sim.url, poll=poll,
                                  admin_token=token_ref)  # fmt: skip
    jobhook = procs.jobhook(directory, config, port)
    jobhook.env = procs.environment(BENCH_ADMIN_TOKEN=token)  # in no file, in no output
    with procs.running(sim, ready="/_sim"), procs.running(jobhook):
        job_ids = _create_jobs(sim, args.jobs, seed=n)
        started = time.perf_counter()
        failed = asyncio.run(_track(jobhook.url, token, job_ids))
        track_seconds = time.perf_counter() - started
        if failed:
            raise RuntimeError(
                f"{failed} of {len(job_ids)} jobs were not tracked; see {jobhook.log}"
            )
        time.sleep(SETTLE_SECONDS)
        t0, cpu0, sim_cpu0 = time.time(), jobhook.cpu_seconds(), sim.cpu_seconds()
        done0 = _terminal(directory / "jobhook.db")
        time.sleep(args.window)
        t1, cpu1, sim_cpu1 = time.time(), jobhook.cpu_seconds(), sim.cpu_seconds()
        done1 = _terminal(directory / "jobhook.db")
        rss = jobhook.rss()
        entries = _api_log(sim)
    seconds = t1 - t0
    window = [e for e in entries if t0 <= e["t"] < t1]
    requests = len(window)
    completed = done1 - done0
    accepted = [e["t"] for e in entries if e["reason"] != "rate_limited"]
    return {
        "jobs": args.jobs,
        "track_seconds": track_seconds,
        "window_seconds": seconds,
        "cpu_percent": (cpu1 - cpu0) / seconds * 100,
        "sim_cpu_percent": (sim_cpu1 - sim_cpu0) / seconds * 100,
        "cpu_ms_per_request": (cpu1 - cpu0) / requests * 1000 if requests else float("nan"),
        "requests": requests,
        "requests_per_minute": requests / seconds * 60,
        "completed": completed,
        "requests_per_completed": requests / completed if completed else float("nan"),
        "violations": sum(1 for e in entries if e["reason"] == "rate_limited"),
        "status_429": sum(1 for e in entries if e["status"] == 429),
        "other_errors": sum(1 for e in entries if e["status"] >= 400 and e["status"] != 429),
        "busiest_minute": _busiest_minute(accepted),
        "all_requests": len(entries),
        "terminal_at_end": done1,
        "rss_mb": rss / 1_000_000,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = procs.workdir("poller")
    rounds = []
    for n in range(args.rounds):
        figures = _round(n, work, args)
        rounds.append(figures)
        report.console.print(
            f"  round {n + 1}/{args.rounds}: tracked {args.jobs:,} in "
            f"{figures['track_seconds']:.1f} s; {figures['requests']:,} requests "
            f"({figures['requests_per_minute']:.0f}/min), "
            f"{figures['completed']:,} completed, CPU {figures['cpu_percent']:.2f}% of a core, "
            f"{figures['violations']} violations"
        )
    keys = ("cpu_percent", "sim_cpu_percent", "cpu_ms_per_request", "requests_per_minute",
            "requests_per_completed", "rss_mb", "track_seconds")  # fmt: skip
    med = {key: report.median([r[key] for r in rounds]) for key in keys}
    summed = ("requests", "completed", "violations", "status_429", "other_errors")
    totals = {key: sum(r[key] for r in rounds) for key in summed}
    busiest = max(r["busiest_minute"] for r in rounds)
    report.show(
        f"poller: {args.jobs:,} tracked jobs (half finished, webhooks lost), budget {RPM}/min, "
        f"{args.rounds} rounds x {args.window:g} s (medians)",
        ["CPU % (1 core)", "CPU ms/req", "simulator CPU %", "req/min", "req/completed job",
         "completed", "429s", "jobhook RSS MB"],
        [[med["cpu_percent"], med["cpu_ms_per_request"], med["sim_cpu_percent"],
          med["requests_per_minute"], med["requests_per_completed"],
          f"{totals['completed']:,}", totals["status_429"], med["rss_mb"]]],
    )  # fmt: skip
    ok = {
        "violations": totals["violations"] == 0 and busiest <= RPM,
        "cpu": med["cpu_percent"] < TARGET_CPU_PERCENT,
    }
    report.show(
        "poller targets",
        ["target", "measured", "verdict"],
        [
            [f"zero rate-limit violations (busiest 60 s <= {RPM})",
             f"{totals['violations']} (busiest 60 s: {busiest})",
             report.verdict(ok["violations"])],
            [f"jobhook CPU < {TARGET_CPU_PERCENT:g}% of one core", f"{med['cpu_percent']:.2f}%",
             report.verdict(ok["cpu"])],
            ["(info) requests per completed job; 2.0 = no request wasted",
             f"{med['requests_per_completed']:.2f}", ""],
        ],
    )  # fmt: skip
    return {"budget_rpm": RPM, "rounds": rounds, "medians": med, "totals": totals,
            "busiest_minute": busiest, "targets": ok}  # fmt: skip
