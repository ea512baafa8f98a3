"""The ingest benchmark's tables: the rows side by side with their ratios, the targets, sizes."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING, Any

from bench import report, workload

if TYPE_CHECKING:
    import argparse

TARGET_RATIO = 0.50
TARGET_PG_RATIO = 0.30
TARGET_P99_MS = 10.0
TARGET_SUSTAINED = 0.90
KEYS = ("rps", "p50_us", "p99_us", "p999_us", "cpu_us_per_request", "load_average")


def commit() -> str:
    """The commit measured (``+dirty`` when the work tree has changes)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        git = ["git", "-C", root]
        head = _out([*git, "rev-parse", "--short", "HEAD"])
        dirty = _out([*git, "status", "--porcelain", "--", "receiver", "bench"])
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def _ratio(med: dict[str, dict[str, float]], name: str, over: str = "bare") -> float:
    if name not in med or over not in med:
        return float("nan")
    return med[name]["rps"] / med[over]["rps"]


def summarise(
    rounds: dict[str, list[dict[str, Any]]],
    sustained: list[dict[str, Any]],
    sizes: dict[str, dict[str, int]],
    notes: list[str],
    args: argparse.Namespace,
    jobs: int,
    description: str,
    measured_on: str,
) -> dict[str, Any]:
    med = {
        name: {key: report.median([r[key] for r in runs]) for key in KEYS}
        | {key: sum(r[key] for r in runs) for key in ("non2xx", "socket_errors", "wraps")}
        for name, runs in rounds.items()
    }
    variant = (f"; row jobhook-random-ids: {workload.DESCRIPTION['random-ids']}, into a store "
               "prefilled with such ids" if "jobhook-random-ids" in rounds else "")  # fmt: skip
    report.console.print(
        f"workload ({args.workload}): {description}{variant}; store prefilled with {jobs:,} "
        f"jobs; {args.connections} connections, {args.rounds} rounds x {args.seconds:g} s, "
        f"medians; commit {measured_on}"
    )
    for note in notes:
        report.console.print(f"  note: {note}")
    rows = [[name, m["rps"], _ratio(med, name), m["p50_us"] / 1000, m["p99_us"] / 1000,
             m["p999_us"] / 1000, m["non2xx"] + m["socket_errors"], m["cpu_us_per_request"],
             m["load_average"]] for name, m in med.items()]  # fmt: skip
    report.show(
        "ingest (medians)",
        ["endpoint", "req/s", "x bare", "p50 ms", "p99 ms", "p99.9 ms", "errors", "CPU us/req",
         "load"],
        rows,
    )  # fmt: skip
    ratio, pg_ratio = _ratio(med, "jobhook"), _ratio(med, "jobhook-pg")
    p99 = med["jobhook"]["p99_us"] / 1000
    over_adnanh = _ratio(med, "jobhook", "adnanh")
    drift = _drift(sustained)
    targets = [
        [f"jobhook (SQLite) >= {TARGET_RATIO:.2f} x bare", f"{ratio:.2f}",
         report.verdict(ratio >= TARGET_RATIO)],
        ["jobhook ahead of adnanh/webhook", f"{over_adnanh:.2f} x adnanh",
         report.verdict(over_adnanh > 1) if over_adnanh == over_adnanh else "-"],
        [f"jobhook p99 <= {TARGET_P99_MS:g} ms", f"{p99:.1f} ms",
         report.verdict(p99 <= TARGET_P99_MS)],
        [f"jobhook (PostgreSQL) >= {TARGET_PG_RATIO:.2f} x bare", f"{pg_ratio:.2f}",
         report.verdict(pg_ratio >= TARGET_PG_RATIO) if pg_ratio == pg_ratio else "-"],
        [f"sustained: last minute >= {TARGET_SUSTAINED:.0%} of the first", drift[0],
         drift[1]],
        ["(bare + svix verification: the practical ceiling, x bare)",
         f"{_ratio(med, 'bare+verify'):.2f}", "reference"],
        ["(nullstore: jobhook storing nothing, x bare)", f"{_ratio(med, 'nullstore'):.2f}",
         "reference"],
    ]  # fmt: skip
    if "jobhook-random-ids" in med:
        random_ratio = _ratio(med, "jobhook-random-ids")
        random_p99 = med["jobhook-random-ids"]["p99_us"] / 1000
        targets.append(["(jobhook on random message ids: x bare, p99)",
                        f"{random_ratio:.2f}, p99 {random_p99:.1f} ms", "variant"])  # fmt: skip
    report.show("ingest targets", ["target", "measured", "verdict"], targets)
    pg_runs = rounds.get("jobhook-pg", [])
    if pg_runs and all("server_cpu_us_per_request" in r for r in pg_runs):
        server = report.median([r["server_cpu_us_per_request"] for r in pg_runs])
        med["jobhook-pg"]["server_cpu_us_per_request"] = server
        report.console.print(
            f"jobhook-pg: the PostgreSQL server's CPU per request {server:,.0f} us, beside "
            f"jobhook's {med['jobhook-pg']['cpu_us_per_request']:,.0f} (the SQLite row's CPU "
            "includes its writer process; this row's does not include the server)"
        )
    report.show(
        "store size (MB)",
        ["store", "before", "after the rounds", "after"],
        [[name, s.get("before", 0) / 1e6, s.get("after_rounds", s.get("after", 0)) / 1e6,
          s.get("after", 0) / 1e6] for name, s in sizes.items()],
    )  # fmt: skip
    return {
        "workload": args.workload,
        "description": description,
        "prefilled_jobs": jobs,
        "commit": measured_on,
        "connections": args.connections,
        "notes": notes,
        "rounds": rounds,
        "medians": med,
        "ratio": ratio,
        "pg_ratio": pg_ratio,
        "sustained": sustained,
        "sizes": sizes,
    }


def _drift(sustained: list[dict[str, Any]]) -> tuple[str, str]:
    if len(sustained) < 2:
        return "not run (--sustain-minutes)", "-"
    first, last = sustained[0]["rps"], sustained[-1]["rps"]
    share = last / first
    text = (f"{first:,.0f} -> {last:,.0f} req/s ({share:.0%}) over {len(sustained)} min, "
            f"store {sustained[0]['store_bytes'] / 1e6:,.0f} -> "
            f"{sustained[-1]['store_bytes'] / 1e6:,.0f} MB")  # fmt: skip
    return text, report.verdict(share >= TARGET_SUSTAINED)
