"""The ingest benchmark's tables: the rows side by side with their ratios, the targets, sizes."""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING, Any, TypeAlias

from bench import report, workload

if TYPE_CHECKING:
    import argparse

TARGET_RATIO = 0.35
GOAL_RATIO = 0.50
"""The ratio jobhook on SQLite is to reach over bare Starlette; the one it is on the way to."""
TARGET_PG_RATIO = 0.25
TARGET_P99_MS = 20.0
TARGET_CONNECTIONS = 32
"""The p99 target holds at this many connections; at others the row is measured, not judged."""
TARGET_SUSTAINED = 0.90
TARGET_SUSTAINED_P99 = 2.0
TARGET_WAL_BYTES = 128 * 2**20
SUSTAINED_RUNS = {"prefilled": "from the prefilled store", "empty": "from an empty store"}
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


QUIET_LOAD = 0.5
"""A load average (1 minute) at or above this before the run: the machine was not quiet."""


def header(
    *, measured_on: str, load_before: tuple[float, float, float], jobs: int, ids: str,
    store_bytes: int, args: argparse.Namespace, at: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What a stranger needs to run the same benchmark and compare: the commit, the date, the
    store (its size, its jobs, how it was filled, its message ids), the phases' lengths, the
    bare server's settings, and the load average before the run."""
    from importlib.metadata import version

    from bench import bare, prefill, wrk

    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    if jobs:
        kind = MESSAGE_IDS.get(args.workload, ids)
        filled = (
            f"prefilled with {jobs:,} jobs (a month of traffic, bench.prefill generator "
            f"{prefill.GENERATOR}, loaded without HTTP), {kind}; a fresh copy per row"
        )
    else:
        filled = "empty (a new store)"
    base = (f"{args.rate_base:,.0f} req/s (--rate-base)" if args.rate_base
            else "the saturated rate")  # fmt: skip
    rate = (f"{', '.join(f'{p:g} %' for p in args.rate_phases)} of {base}, "
            f"{args.rate_minutes} x {args.phase_seconds} s each, open loop"
            if args.rate_phases else "none")  # fmt: skip
    sustained = (f"{args.sustain_minutes} x {args.phase_seconds} s from {args.sustain_from}"
                 if args.sustain_minutes else "none")  # fmt: skip
    options = ", ".join(f"{k}={v}" for k, v in bare.OPTIONS.items() if k != "host")
    servers = ", ".join(f"{m} {version(m)}" for m in ("uvicorn", "uvloop", "httptools",
                                                       "starlette"))  # fmt: skip
    return {
        "commit": measured_on,
        "date": when,
        "load_before": list(load_before),
        "quiet": load_before[0] < QUIET_LOAD,
        "store_bytes": store_bytes,
        "store": filled,
        "jobs": jobs,
        "message_ids": ids if jobs else None,
        "workload": args.workload,
        "rounds": f"a 3 s warm-up, then {args.rounds} rounds x {args.seconds:g} s per row, "
                  f"wrk -t{wrk.THREADS} -c{args.connections}, the rows taking turns",
        "sustained": sustained,
        "rate_phases": rate,
        "bare": f"bench/bare.py: uvicorn, 1 process, 1 worker, {options}; {servers}",
    }  # fmt: skip


def header_lines(facts: dict[str, Any]) -> list[str]:
    """The header's lines, a warning first when the machine was not quiet."""
    load = ", ".join(f"{x:.2f}" for x in facts["load_before"])
    warning = [] if facts["quiet"] else [
        f"[red]WARNING: not quiet[/red]: load average {load} before the run (>= {QUIET_LOAD}): "
        "figures from a busy machine are not results"]  # fmt: skip
    return [
        *warning,
        f"commit {facts['commit']}, {facts['date']}; load average before the run {load}",
        f"store: {facts['store_bytes'] / 1e6:,.0f} MB, {facts['store']}",
        f"phases: {facts['rounds']}; sustained: {facts['sustained']}; rate phases: "
        f"{facts['rate_phases']}",
        f"bare server: {facts['bare']}",
    ]


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def _ratio(med: dict[str, dict[str, float]], name: str, over: str = "bare") -> float:
    if name not in med or over not in med:
        return float("nan")
    return med[name]["rps"] / med[over]["rps"]


def medians(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Each row's medians over its rounds, and its errors and wraps summed."""
    return {
        name: {key: report.median([r[key] for r in runs]) for key in KEYS}
        | {key: sum(r[key] for r in runs) for key in ("non2xx", "socket_errors", "wraps")}
        for name, runs in rounds.items()
    }


def round_ratios(
    rounds: dict[str, list[dict[str, Any]]], name: str, over: str
) -> list[float] | None:
    """``name``'s rate over ``over``'s round by round; None when the two lists do not pair up.

    Both lists are in run order, one entry a round; an entry's ``round`` (when there) must
    match its partner's, so a row left out of a round cannot shift the pairs."""
    mine, theirs = rounds.get(name, []), rounds.get(over, [])
    if not mine or len(mine) != len(theirs):
        return None
    pairs = list(zip(mine, theirs, strict=True))
    if any(a.get("round", i) != b.get("round", i) for i, (a, b) in enumerate(pairs)):
        return None
    return [a["rps"] / b["rps"] for a, b in pairs]


def targets(
    med: dict[str, dict[str, float]],
    rounds: dict[str, list[dict[str, Any]]],
    sustained: dict[str, list[dict[str, Any]]],
    connections: int,
) -> list[list[str]]:
    """The targets table: target, measured, verdict (met, MISSED, ``-`` when not measured)."""
    ratio, pg_ratio = _ratio(med, "jobhook"), _ratio(med, "jobhook-pg")
    p99 = med["jobhook"]["p99_us"] / 1000 if "jobhook" in med else float("nan")
    rows = [
        [f"jobhook (SQLite) >= {TARGET_RATIO:.2f} x bare (the goal: {GOAL_RATIO:.2f})",
         f"{ratio:.2f}", _judge(ratio, ratio >= TARGET_RATIO)],
        _ahead_every_round(rounds),
        _p99_row(p99, connections),
        [f"jobhook (PostgreSQL) >= {TARGET_PG_RATIO:.2f} x bare", f"{pg_ratio:.2f}",
         _judge(pg_ratio, pg_ratio >= TARGET_PG_RATIO)],
    ]  # fmt: skip
    for run in SUSTAINED_RUNS:
        if run in sustained:
            rows += sustained_rows(run, sustained[run])
    if not sustained:
        rows.append(["sustained", "not run (--sustain-minutes 0)", "-"])
    return rows


def _judge(value: float, ok: bool) -> str:
    return report.verdict(ok) if value == value else "-"  # NaN: the row was not measured


def _ahead_every_round(rounds: dict[str, list[dict[str, Any]]]) -> list[str]:
    target = "jobhook ahead of adnanh/webhook in every round"
    if "adnanh" not in rounds or "jobhook" not in rounds:
        return [target, "no adnanh row", "-"]
    ratios = round_ratios(rounds, "jobhook", "adnanh")
    if ratios is None:
        return [target, "the rounds do not pair up", "-"]
    text = ", ".join(f"{r:.2f}" for r in ratios) + f" x adnanh (worst {min(ratios):.2f})"
    return [target, text, report.verdict(min(ratios) > 1)]


def _p99_row(p99: float, connections: int) -> list[str]:
    target = f"jobhook p99 <= {TARGET_P99_MS:g} ms at {TARGET_CONNECTIONS} connections"
    if connections != TARGET_CONNECTIONS:
        return [target, f"{p99:.1f} ms at {connections} connections", "-"]
    return [target, f"{p99:.1f} ms", _judge(p99, p99 <= TARGET_P99_MS)]


def errors(figures: dict[str, Any]) -> int:
    """Requests not answered 2xx: other statuses, socket errors and timeouts (wrk's counts)."""
    return int(sum(figures.get(key, 0) for key in ("non2xx", "socket_errors", "timeouts")))


Check: TypeAlias = tuple[str, str, bool | None]
"""A target, what was measured, and whether it was met (None: not judged)."""


def sustained_checks(run: str, minutes: list[dict[str, Any]]) -> list[Check]:
    """The sustained targets of one run (its minutes in order): throughput and p99 of the last
    minute against the first, the WAL file's peak over every minute, and every answer 2xx."""
    where = f"sustained, {run} store"
    rate = f"{where}: last minute >= {TARGET_SUSTAINED:.0%} of the first's req/s"
    tail = f"{where}: last minute's p99 <= {TARGET_SUSTAINED_P99:g} x the first's"
    wal = f"{where}: WAL never over {TARGET_WAL_BYTES / 2**20:g} MiB"
    answered = f"{where}: every answer 2xx"
    if not minutes:
        return [(rate, "not run", None), (tail, "not run", None), (wal, "not run", None),
                (answered, "not run", None)]  # fmt: skip
    peak = max(m["wal_peak_bytes"] for m in minutes)
    wal_check = (wal, f"peak {peak / 2**20:,.0f} MiB over {len(minutes)} min",
                 peak <= TARGET_WAL_BYTES)  # fmt: skip
    failed = sum(errors(m) for m in minutes)
    total = sum(m["requests"] for m in minutes) if all("requests" in m for m in minutes) else None
    of = f" of {total:,}" if total is not None else ""
    answered_check = (answered, f"{failed:,}{of} not 2xx", failed == 0)
    if len(minutes) < 2:
        return [(rate, "one minute: nothing to compare", None),
                (tail, "one minute: nothing to compare", None), wal_check,
                answered_check]  # fmt: skip
    first, last = minutes[0], minutes[-1]
    share = last["rps"] / first["rps"]
    growth = last["p99_us"] / first["p99_us"]
    return [
        (rate, f"{first['rps']:,.0f} -> {last['rps']:,.0f} req/s ({share:.0%}) over "
         f"{len(minutes)} min, store {first['store_bytes'] / 1e6:,.0f} -> "
         f"{last['store_bytes'] / 1e6:,.0f} MB", share >= TARGET_SUSTAINED),
        (tail, f"{first['p99_us'] / 1000:.1f} -> {last['p99_us'] / 1000:.1f} ms "
         f"({growth:.1f} x)", growth <= TARGET_SUSTAINED_P99),
        wal_check,
        answered_check,
    ]  # fmt: skip


def sustained_rows(run: str, minutes: list[dict[str, Any]]) -> list[list[str]]:
    """``sustained_checks`` as rows of the targets table (met, MISSED, ``-``)."""
    return [[target, measured, "-" if ok is None else report.verdict(ok)]
            for target, measured, ok in sustained_checks(run, minutes)]  # fmt: skip


def pass_miss(ok: bool | None) -> str:
    """A target's verdict on a summary line: PASS, MISS, or ``-`` when it was not judged."""
    if ok is None:
        return "-"
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def summary_line(checks: list[Check]) -> str:
    """The checks on one line: ``measured (target): PASS|MISS; ...``, the targets shortened to
    what follows their run's name."""
    parts = [f"{target.split(': ', 1)[-1]}: {measured} -> {pass_miss(ok)}"
             for target, measured, ok in checks]  # fmt: skip
    return "; ".join(parts)


def summarise(
    rounds: dict[str, list[dict[str, Any]]],
    sustained: dict[str, list[dict[str, Any]]],
    rated: list[dict[str, Any]],
    sizes: dict[str, dict[str, int]],
    notes: list[str],
    args: argparse.Namespace,
    jobs: int,
    description: str,
    measured_on: str,
    facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    med = medians(rounds)
    for line in header_lines(facts) if facts else []:
        report.console.print(line)
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
    from bench import phases

    phases.show(rated, args.workload)
    for run, minutes in sustained.items():
        _show_minutes(run, minutes, args.workload)
    table = targets(med, rounds, sustained, args.connections) + phases.target_rows(rated)
    table += [
        ["(bare + svix verification: the practical ceiling, x bare)",
         f"{_ratio(med, 'bare+verify'):.2f}", "reference"],
        ["(nullstore: jobhook storing nothing, x bare)", f"{_ratio(med, 'nullstore'):.2f}",
         "reference"],
    ]  # fmt: skip
    if "jobhook-random-ids" in med:
        random_ratio = _ratio(med, "jobhook-random-ids")
        random_p99 = med["jobhook-random-ids"]["p99_us"] / 1000
        table.append(["(jobhook on random message ids: x bare, p99)",
                      f"{random_ratio:.2f}, p99 {random_p99:.1f} ms", "variant"])  # fmt: skip
    table += confirming_rows(med, rounds)
    report.show("ingest targets", ["target", "measured", "verdict"], table)
    confirming = confirming_line(rounds.get(CONFIRMING, []))
    if confirming:
        report.console.print(confirming)
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
        "header": facts,
        "workload": args.workload,
        "description": description,
        "prefilled_jobs": jobs,
        "commit": measured_on,
        "connections": args.connections,
        "notes": notes,
        "rounds": rounds,
        "medians": med,
        "ratio": _ratio(med, "jobhook"),
        "pg_ratio": _ratio(med, "jobhook-pg"),
        "sustained": sustained,
        "rate_phases": rated,
        "sizes": sizes,
    }


MESSAGE_IDS = {"realistic": "Svix KSUID message ids", "random-ids": "random message ids",
               "sequential": "sequential ids"}  # fmt: skip


def minute_rows(minutes: list[dict[str, Any]]) -> list[list[Any]]:
    """A sustained run's table, a minute a row: req/s, p50/p99/p99.9, answers not 2xx, the
    store's size at the minute's end, the WAL's size at its end and its peak, the seconds the
    server had no load before the minute (its requests being written, the machine quiescing)."""
    return [[n, m["rps"], m["p50_us"] / 1000, m["p99_us"] / 1000, m["p999_us"] / 1000,
             errors(m), m["store_bytes"] / 1e6, m["wal_bytes"] / 2**20,
             m["wal_peak_bytes"] / 2**20, m.get("idle_before_seconds", float("nan")),
             m["load_average"]] for n, m in enumerate(minutes, 1)]  # fmt: skip


CONFIRMING = "jobhook-confirming"


def confirming_rows(
    med: dict[str, dict[str, float]], rounds: dict[str, list[dict[str, Any]]]
) -> list[list[str]]:
    """The confirming row beside jobhook's: x bare, x adnanh (medians, and round by round), p99."""
    if CONFIRMING not in med:
        return []
    ratios = round_ratios(rounds, CONFIRMING, "adnanh")
    each = f" (rounds {', '.join(f'{r:.2f}' for r in ratios)})" if ratios else ""
    text = (f"{_ratio(med, CONFIRMING):.2f} x bare, {_ratio(med, CONFIRMING, 'adnanh'):.2f} x "
            f"adnanh{each}, p99 {med[CONFIRMING]['p99_us'] / 1000:.1f} ms; jobhook row "
            f"{_ratio(med, 'jobhook'):.2f} x bare")  # fmt: skip
    return [["(jobhook confirming every completion with a job API: x bare, x adnanh, p99)",
             text, "variant"]]  # fmt: skip


def confirming_line(runs: list[dict[str, Any]]) -> str:
    """What the confirming row's job API did in its rounds: confirmations answered, those still
    waiting at each round's end, the simulator's CPU a webhook (a remote API's, in a
    deployment: on this machine it takes the cores the row is measured on)."""
    if not runs or not all("job_api_requests_after" in r for r in runs):
        return ""
    answered = sum(r["job_api_requests_after"] - r["job_api_requests_before"] for r in runs)
    webhooks = sum(r["requests"] for r in runs)
    waiting = ", ".join(f"{r['confirmations_waiting_after']:,.0f}" for r in runs)
    sim = report.median([r["beside_cpu_us_per_request"] for r in runs])
    return (
        f"{CONFIRMING}: the job API answered {answered:,.0f} confirmations during its "
        f"rounds' {webhooks:,} webhooks; waiting at each round's end: {waiting}; the "
        f"simulator's CPU {sim:,.0f} us a webhook (on the same cores)"
    )


def _show_minutes(run: str, minutes: list[dict[str, Any]], workload_name: str) -> None:
    phase = minutes[0].get("seconds", 60) if minutes else 60
    report.show(
        f"sustained {SUSTAINED_RUNS.get(run, run)}, jobhook (SQLite), "
        f"{MESSAGE_IDS.get(workload_name, workload_name)}, a {phase:g} s phase a row",
        ["minute", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "not 2xx", "store MB",
         "WAL MiB at its end", "WAL MiB peak", "idle s before", "load"],
        minute_rows(minutes),
    )  # fmt: skip
    report.console.print(f"  sustained ({run}): {summary_line(sustained_checks(run, minutes))}")
