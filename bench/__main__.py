"""``uv run --group dev python -m bench [NAME ...]``: run the benchmarks, print tables, write JSON.

Names: ingest, latency, large, poller, startup, tracing, fields, console (all when none is
given). The ingest benchmark needs wrk and adnanh/webhook (``apt-get install -y wrk webhook``;
installed automatically when run as root), the large one curl; ``ingest --quick`` is its short
form.
Figures go to bench/results/<name>.json (the latest) and a dated copy.
"""

from __future__ import annotations

import argparse
import importlib
import time

from bench import phases, report, workload

BENCHMARKS = {
    "ingest": "bench.ingest",
    "latency": "bench.latency",
    "large": "bench.large",
    "poller": "bench.poller",
    "startup": "bench.startup",
    "tracing": "bench.tracing",
    "fields": "bench.field_stats",
    "console": "bench.console",
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME",
        help=f"benchmarks to run: {', '.join(BENCHMARKS)} (default: all)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (medians)")
    parser.add_argument("--seconds", type=float, default=10.0, help="ingest: seconds per round")
    parser.add_argument("--connections", type=int, default=32, help="ingest: connections")
    parser.add_argument(
        "--workload", choices=workload.WORKLOADS, default="realistic",
        help="ingest: realistic (random job ids, Svix's time-ordered message ids, retries, "
        "InProgress updates, 1M-job store; jobhook also takes the random-ids variant beside "
        "it), random-ids (fully random message ids, alone) or sequential (the old one: "
        "tag-0000001..., an empty store)",
    )  # fmt: skip
    parser.add_argument(
        "--prefill", type=int, default=None, metavar="JOBS",
        help="ingest: jobs in the store before the run (default 1,000,000; 0 sequential)",
    )  # fmt: skip
    parser.add_argument(
        "--sustain-minutes", type=int, default=None,
        help="ingest: minutes of sustained load on jobhook (SQLite) after the rounds, each run "
        "(default 10; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--sustain-from", choices=("prefilled", "empty", "both"), default="both",
        help="ingest: the sustained load's store: the rounds' prefilled one, a fresh empty one, "
        "or both, one after the other (default)",
    )  # fmt: skip
    parser.add_argument(
        "--rate-phases", type=phases.parse_percentages, default=(), metavar="P,P",
        help="ingest: after the rounds, send jobhook (SQLite) webhooks open loop at these "
        "percentages of its saturated rate (the rounds' median), e.g. 25,50 (default: none)",
    )  # fmt: skip
    parser.add_argument(
        "--rate-base", type=float, default=None, metavar="REQ/S",
        help="ingest: the rate --rate-phases are percentages of, instead of the rounds' median "
        "(to run the same rates on stores of two sizes, say)",
    )  # fmt: skip
    parser.add_argument(
        "--rate-minutes", type=int, default=10, metavar="N",
        help="ingest: phases (of --phase-seconds) at each --rate-phases rate (default 10)",
    )  # fmt: skip
    parser.add_argument(
        "--phase-seconds", type=int, default=60, metavar="S",
        help="ingest: the length of one phase of the sustained and rate-phase runs, reported a "
        "phase a row (default 60: a minute; shorter for smoke runs only)",
    )  # fmt: skip
    parser.add_argument("--no-postgres", action="store_true", help="ingest: no PostgreSQL row")
    parser.add_argument(
        "--no-confirming", action="store_true",
        help="ingest: no jobhook-confirming row (a source whose job API, the simulator on "
        "loopback, confirms every completion and answers its result inline)",
    )  # fmt: skip
    parser.add_argument("--floor", action="store_true", help="ingest: add the floor's row")
    parser.add_argument(
        "--quick", action="store_true",
        help="ingest: 2 rounds of 5 s and no sustained load unless --sustain-minutes says "
        "(a few minutes on a loaded store)",
    )  # fmt: skip
    parser.add_argument("--rate", type=float, default=500.0, help="latency: webhooks per second")
    parser.add_argument("--webhooks", type=int, default=10_000, help="latency: webhooks per round")
    parser.add_argument("--size-mib", type=int, default=1024, help="large: result size in MiB")
    parser.add_argument("--jobs", type=int, default=10_000, help="poller, fields: jobs")
    parser.add_argument("--window", type=float, default=60.0, help="poller: seconds measured")
    parser.add_argument(
        "--console-jobs", type=int, default=1_000_000, help="console: jobs in the store"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 2, 5.0
    if args.sustain_minutes is None:
        args.sustain_minutes = 0 if args.quick else 10
    if args.phase_seconds < 1:
        parser.error("--phase-seconds must be at least 1")
    if args.rate_minutes < 1:
        parser.error("--rate-minutes must be at least 1")
    if args.rate_base is not None and not args.rate_base > 0:
        parser.error("--rate-base must be a rate above 0 (requests a second)")
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    names = args.names or list(BENCHMARKS)
    machine = report.machine()
    report.console.print(
        f"[bold]jobhook bench[/bold]: {machine['cores']} cores, {machine['memory_gib']} GiB, "
        f"{machine['cpu']}, Python {machine['python']}, load {machine['load_average']}"
    )
    for name in names:
        report.console.rule(name)
        started = time.perf_counter()
        data = importlib.import_module(BENCHMARKS[name]).run(args)
        path = report.save(name, {"seconds": round(time.perf_counter() - started, 1), **data})
        report.console.print(f"  -> {path.relative_to(report.RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
