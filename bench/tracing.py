"""Tracing's cost on the intake: the ingest load against jobhook with tracing off, on at 100 %
sampling and on at parent-based 10 %, each exporting OTLP/HTTP to a loopback sink.

The three run side by side as separate ``jobhook serve`` processes (each its own SQLite store)
and take turns round by round, the order rotating, so the shared machine's drift falls on all
three alike; figures are medians. Every request is a distinct terminal webhook, as in ingest:
one server span and its verify and store children each when sampled.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import httpx

from bench import ingest, procs, report, wrk

if TYPE_CHECKING:
    import argparse

TARGET_FULL = 0.15
TARGET_TENTH = 0.03
VARIANTS: dict[str, dict[str, str]] = {
    "off": {},
    "on-100%": {"OTEL_TRACES_SAMPLER": "always_on"},
    "on-10%": {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    wrk.require_wrk()
    work = procs.workdir("tracing")
    sink_port = procs.free_port()
    sink = procs.Service(
        "otlp-sink", [sys.executable, "-m", "bench.otlpsink", str(sink_port)], sink_port,
        work / "sink.log",
    )  # fmt: skip
    services = []
    for name, extra in VARIANTS.items():
        port, directory = procs.free_port(), work / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "jobhook.db").unlink(missing_ok=True)
        env = procs.environment(**extra)
        for key in [k for k in env if k.startswith("OTEL_") and k not in extra]:
            del env[key]
        if extra:
            env.update(OTEL_EXPORTER_OTLP_ENDPOINT=sink.url, OTEL_SERVICE_NAME="jobhook-bench")
        service = procs.jobhook(directory, procs.jobhook_config(directory, port), port, name)
        service.env = env
        services.append(service)
    rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in services}
    with procs.running(sink, *services):
        best = 0.0
        for service in services:  # warm-up, not counted
            warm = ingest._measure(service, work / "req", f"warm-{service.name}", 20_000,
                                   ingest._short(args))  # fmt: skip
            best = max(best, warm["rps"])
        for n in range(args.rounds):
            order = services[n % len(services) :] + services[: n % len(services)]
            for service in order:
                count = int(best * args.seconds * ingest.HEADROOM) + 1000
                figures = ingest._measure(service, work / "req", f"r{n}-{service.name}", count,
                                          args)  # fmt: skip
                best = max(best, figures["rps"])
                rounds[service.name].append(figures)
                report.console.print(
                    f"  round {n + 1}/{args.rounds} {service.name}: {figures['rps']:,.0f} req/s, "
                    f"p99 {figures['p99_us'] / 1000:.1f} ms"
                )
        exported = httpx.get(sink.url + "/stats", timeout=5).json()
    return _summarise(rounds, exported, args)


def _summarise(
    rounds: dict[str, list[dict[str, Any]]], exported: dict[str, int], args: argparse.Namespace
) -> dict[str, Any]:
    med = {
        name: {
            key: report.median([r[key] for r in runs])
            for key in ("rps", "p50_us", "p99_us", "cpu_us_per_request")
        }
        | {"non2xx": sum(r["non2xx"] for r in runs)}
        for name, runs in rounds.items()
    }
    off = med["off"]["rps"]
    cost = {name: 1 - m["rps"] / off for name, m in med.items()}
    report.show(
        f"tracing: ingest at {args.connections} connections, {args.rounds} rounds x "
        f"{args.seconds:g} s (medians)",
        ["variant", "req/s", "cost", "p50 ms", "p99 ms", "CPU us/req", "non-2xx"],
        [
            [
                name,
                m["rps"],
                f"{cost[name]:.1%}",
                m["p50_us"] / 1000,
                m["p99_us"] / 1000,
                m["cpu_us_per_request"],
                m["non2xx"],
            ]
            for name, m in med.items()
        ],
    )
    report.show(
        "tracing targets",
        ["target", "measured", "verdict"],
        [
            [
                f"100 % sampling costs <= {TARGET_FULL:.0%}",
                f"{cost['on-100%']:.1%}",
                report.verdict(cost["on-100%"] <= TARGET_FULL),
            ],
            [
                f"parent-based 10 % costs <= {TARGET_TENTH:.0%}",
                f"{cost['on-10%']:.1%}",
                report.verdict(cost["on-10%"] <= TARGET_TENTH),
            ],
            [
                "(exported to the sink)",
                f"{exported['requests']:,} requests, {exported['bytes'] / 1e6:,.1f} MB",
                "",
            ],
        ],
    )
    return {
        "connections": args.connections,
        "rounds": rounds,
        "medians": med,
        "cost": cost,
        "exported": exported,
        "targets": {
            "full": cost["on-100%"] <= TARGET_FULL,
            "tenth": cost["on-10%"] <= TARGET_TENTH,
        },
    }
