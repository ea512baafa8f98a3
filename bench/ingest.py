"""Ingest: signed webhooks at fixed concurrency, jobhook beside a bare endpoint on its stack.

Every request is a distinct terminal Reducto webhook (``Completed``, a new message id and a
new job id), so each one is verified, parsed and stored in one group-committed transaction
(delivery + job + completion rows, fsync'd) before its 2xx. The source has no job API and no
handler is configured, so nothing runs after the commit and the figures are the intake's own.
The bare Starlette endpoint (bench.bare) runs on the same server stack with the same worker
count. Two more anchors place the write: the floor (bench.floor), the same stack with only what
the target asks for, a svix verification and one group-committed, de-duplicated SQLite insert;
and nullstore (bench.nullstore), jobhook itself on a store that stores nothing, the ceiling of
every other part of the intake. The four are measured in turn, round by round (the order
rotates), and compared by their medians.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import TYPE_CHECKING, Any

from bench import procs, report, signing, wrk

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

TARGET_RATIO = 0.50
TARGET_P99_MS = 10.0
HEADROOM = 1.5  # requests written per round, over the fastest rate seen so far


def _measure(
    service: procs.Service, prefix: Path, tag: str, count: int, args: argparse.Namespace
) -> dict[str, Any]:
    signing.write_requests(prefix, tag, count, wrk.THREADS)
    cpu = service.cpu_seconds()
    figures = wrk.run(
        service.url + "/webhooks/reducto", prefix, connections=args.connections,
        seconds=args.seconds,
    )  # fmt: skip
    figures["cpu_us_per_request"] = (service.cpu_seconds() - cpu) / figures["requests"] * 1e6
    # When wrk runs out of requests it starts over: a repeat is a 2xx duplicate, no new row.
    figures["acked_ids"] = min(figures["ok"], count)
    return figures


def _stored(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (count,) = conn.execute("SELECT count(*) FROM deliveries").fetchone()
    return int(count)


def run(args: argparse.Namespace) -> dict[str, Any]:
    wrk.require_wrk()
    work = procs.workdir("ingest")
    port, bare_port, floor_port = procs.free_port(), procs.free_port(), procs.free_port()
    config = procs.jobhook_config(work, port)
    jobhook = procs.jobhook(work, config, port)
    bare = procs.bare(work, bare_port)
    null_port, null_dir = procs.free_port(), work / "nullstore"
    null_dir.mkdir()
    nullstore = procs.nullstore(work, procs.jobhook_config(null_dir, null_port), null_port)
    (work / "floor.db").unlink(missing_ok=True)
    floor_argv = [sys.executable, "-m", "bench.floor", str(floor_port), str(work / "floor.db")]
    floor = procs.Service("floor", floor_argv, floor_port, work / "floor.log")
    services = (bare, nullstore, floor, jobhook)
    rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in services}
    sent_ok = 0
    with procs.running(*services):
        best = 0.0
        for service in services:  # warm-up, not counted
            warm = _measure(service, work / "req", f"warm-{service.name}", 20_000,
                            _short(args))  # fmt: skip
            best = max(best, warm["rps"])
            sent_ok += warm["acked_ids"] if service is jobhook else 0
        for n in range(args.rounds):
            order = services[n % len(services) :] + services[: n % len(services)]
            for service in order:
                count = int(best * args.seconds * HEADROOM) + 1000
                figures = _measure(service, work / "req", f"r{n}-{service.name}", count, args)
                best = max(best, figures["rps"])
                rounds[service.name].append(figures)
                if service is jobhook:
                    sent_ok += figures["acked_ids"]
                report.console.print(
                    f"  round {n + 1}/{args.rounds} {service.name}: {figures['rps']:,.0f} req/s, "
                    f"p99 {figures['p99_us'] / 1000:.1f} ms"
                )
    stored = _stored(work / "jobhook.db")
    return _summarise(rounds, stored, sent_ok, args)


def _short(args: argparse.Namespace) -> argparse.Namespace:
    import argparse

    return argparse.Namespace(**{**vars(args), "seconds": 3})


def _summarise(
    rounds: dict[str, list[dict[str, Any]]], stored: int, sent_ok: int, args: argparse.Namespace
) -> dict[str, Any]:
    med = {
        name: {
            key: report.median([r[key] for r in runs])
            for key in ("rps", "p50_us", "p99_us", "cpu_us_per_request")
        }
        | {key: sum(r[key] for r in runs) for key in ("non2xx", "socket_errors", "wraps")}
        for name, runs in rounds.items()
    }
    ratio = med["jobhook"]["rps"] / med["bare"]["rps"]
    floor_ratio = med["floor"]["rps"] / med["bare"]["rps"]
    null_ratio = med["nullstore"]["rps"] / med["bare"]["rps"]
    # The service time of one webhook at saturation (1 / throughput), in microseconds: what
    # the target allows, what jobhook takes without its write, and what the write adds.
    budget_us = 1e6 / (TARGET_RATIO * med["bare"]["rps"])
    null_us = 1e6 / med["nullstore"]["rps"]
    write_us = 1e6 / med["jobhook"]["rps"] - null_us
    p99_ms = med["jobhook"]["p99_us"] / 1000
    rows = [
        [
            name,
            m["rps"],
            m["p50_us"] / 1000,
            m["p99_us"] / 1000,
            m["non2xx"],
            m["socket_errors"],
            m["cpu_us_per_request"],
        ]
        for name, m in med.items()
    ]
    report.show(
        f"ingest: {args.connections} connections, {args.rounds} rounds x {args.seconds:g} s "
        "(medians)",
        ["endpoint", "req/s", "p50 ms", "p99 ms", "non-2xx", "socket err", "CPU us/req"],
        rows,
    )
    report.show(
        "ingest targets",
        ["target", "measured", "verdict"],
        [
            [
                f"jobhook >= {TARGET_RATIO:.2f} x bare req/s",
                f"{ratio:.2f}",
                report.verdict(ratio >= TARGET_RATIO),
            ],
            [
                f"jobhook p99 <= {TARGET_P99_MS:g} ms",
                f"{p99_ms:.1f} ms",
                report.verdict(p99_ms <= TARGET_P99_MS),
            ],
            [
                "(nullstore: jobhook storing nothing, x bare)",
                f"{null_ratio:.2f}, p99 {med['nullstore']['p99_us'] / 1000:.1f} ms",
                "reference",
            ],
            [
                "(time per webhook the target leaves for the write)",
                f"{budget_us - null_us:,.0f} us; the write takes {write_us:,.0f} us",
                "",
            ],
            [
                "(the floor: verify + one durable insert, x bare)",
                f"{floor_ratio:.2f}, p99 {med['floor']['p99_us'] / 1000:.1f} ms",
                "reference",
            ],
            [
                "(jobhook x the floor)",
                f"{med['jobhook']['rps'] / med['floor']['rps']:.2f}",
                "",
            ],
            [
                "every 2xx durably stored (rows / 2xx)",
                f"{stored:,} / {sent_ok:,}",
                report.verdict(stored >= sent_ok),
            ],
        ],
    )
    return {
        "events": "terminal (Reducto 'Completed'), unique message and job ids",
        "connections": args.connections,
        "rounds": rounds,
        "medians": med,
        "ratio": ratio,
        "floor_ratio": floor_ratio,
        "nullstore_ratio": null_ratio,
        "write_budget_us": budget_us - null_us,
        "write_us": write_us,
        "stored": stored,
        "acknowledged": sent_ok,
        "targets": {
            "ratio": ratio >= TARGET_RATIO,
            "p99": p99_ms <= TARGET_P99_MS,
            "stored": stored >= sent_ok,
        },
    }
