"""``uv run --group dev python -m bench [NAME ...]``: run the benchmarks, print tables, write JSON.

Names: ingest, latency, large, poller, startup, tracing, fields, console (all when none is
given). The ingest
benchmark needs wrk (``apt-get install -y wrk``; installed automatically when run as root),
the large one curl. Figures go to bench/results/<name>.json (the latest) and a dated copy.
"""

from __future__ import annotations

import argparse
import importlib
import time

from bench import report

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
    parser.add_argument("--rate", type=float, default=500.0, help="latency: webhooks per second")
    parser.add_argument("--webhooks", type=int, default=10_000, help="latency: webhooks per round")
    parser.add_argument("--size-mib", type=int, default=1024, help="large: result size in MiB")
    parser.add_argument("--jobs", type=int, default=10_000, help="poller, fields: jobs")
    parser.add_argument("--window", type=float, default=60.0, help="poller: seconds measured")
    parser.add_argument(
        "--console-jobs", type=int, default=1_000_000, help="console: jobs in the store"
    )
    args = parser.parse_args(argv)
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
