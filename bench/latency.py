"""End-to-end latency: from a webhook's 2xx to the start of the handler it completes.

Terminal Reducto webhooks (a new job each) go to ``jobhook serve`` at a fixed rate, open
loop; the sender stamps each 2xx on arrival, and a handler (bench.stamp) stamps its own
start, both with ``time.time()`` on the same machine. The source has no job API, so the
completion is ready at once: what is measured is commit -> wake -> claim -> handler, not a
provider's answer time. A negative figure means the handler had started before the 2xx
reached the sender.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import uvloop

from bench import loadgen, procs, report, signing
from tests.support import signed_headers

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

TARGET_P50_MS = 5.0
TARGET_P99_MS = 50.0


def _requests(port: int, tag: str, count: int) -> list[tuple[str, bytes]]:
    now = int(time.time())
    out = []
    for n in range(count):
        job_id = f"{tag}-{n:06d}"
        body = signing.body(job_id)
        headers = signed_headers(body, msg_id=f"msg_{job_id}", timestamp=now)
        out.append((job_id, loadgen.http_request("127.0.0.1", port, procs.WEBHOOK_PATH,
                                                 headers, body)))  # fmt: skip
    return out


def _stamps(path: Path, want: set[str], timeout: float) -> dict[str, float]:
    """Handler start times of the jobs in ``want``, waiting up to ``timeout`` for them all."""
    deadline = time.monotonic() + timeout
    found: dict[str, float] = {}
    while True:
        found = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            job_id, _, stamp = line.partition("\t")
            if job_id in want:
                found[job_id] = float(stamp)
        if len(found) == len(want) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _round(
    service: procs.Service, stamps: Path, tag: str, args: argparse.Namespace
) -> dict[str, Any]:
    requests = _requests(service.port, tag, args.webhooks)
    with (
        procs.FsyncProbe(stamps.parent) as probe,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        answers, lag = runner.run(loadgen.send("127.0.0.1", service.port, requests, args.rate))
    ok = {a.job_id: a for a in answers if 200 <= a.status < 300}
    started = _stamps(stamps, set(ok), timeout=30.0)
    delays = [(started[j] - a.answered) * 1000 for j, a in ok.items() if j in started]
    waits = [(a.answered - a.due) * 1000 for a in answers]
    span = max(a.due for a in answers) - min(a.due for a in answers)
    return {
        "sent": len(requests),
        "rate": (len(answers) - 1) / span if span else float("nan"),
        "non2xx": len(answers) - len(ok),
        "handled": len(delays),
        "p50_ms": report.percentile(delays, 50),
        "p99_ms": report.percentile(delays, 99),
        "max_ms": max(delays, default=float("nan")),
        "before_2xx": sum(1 for d in delays if d < 0),
        "answer_p50_ms": report.percentile(waits, 50),
        "answer_p99_ms": report.percentile(waits, 99),
        "sender_lag_ms": lag.worst * 1000,
        "sender_late": lag.late,
        "fsync_p99_ms": report.percentile(probe.samples, 99),
        "fsync_max_ms": max(probe.samples, default=float("nan")),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = procs.workdir("latency")
    port = procs.free_port()
    stamps = work / "stamps.tsv"
    stamps.touch()
    handler = {"name": "stamp", "type": "bench.stamp:Stamp", "path": str(stamps)}
    config = procs.jobhook_config(work, port, handlers=[handler])
    jobhook = procs.jobhook(work, config, port)
    rounds = []
    with procs.running(jobhook):
        _round(jobhook, stamps, "warm", _fewer(args))
        for n in range(args.rounds):
            figures = _round(jobhook, stamps, f"r{n}", args)
            rounds.append(figures)
            report.console.print(
                f"  round {n + 1}/{args.rounds}: {figures['rate']:.0f} webhooks/s, "
                f"2xx -> handler p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms "
                f"(disk: fsync p99 {figures['fsync_p99_ms']:.1f} ms, "
                f"max {figures['fsync_max_ms']:.0f} ms)"
            )
    keys = ("rate", "p50_ms", "p99_ms", "max_ms", "answer_p50_ms", "answer_p99_ms")
    med = {key: report.median([r[key] for r in rounds]) for key in keys}
    totals = {key: sum(r[key] for r in rounds) for key in ("sent", "handled", "non2xx",
                                                           "before_2xx")}  # fmt: skip
    report.show(
        f"latency: 2xx -> handler start, {args.rounds} rounds x {args.webhooks:,} webhooks "
        f"at {args.rate:g}/s (medians)",
        [
            "webhooks/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "2xx p50 ms",
            "2xx p99 ms",
            "handled",
            "non-2xx",
        ],
        [
            [
                med["rate"],
                med["p50_ms"],
                med["p99_ms"],
                med["max_ms"],
                med["answer_p50_ms"],
                med["answer_p99_ms"],
                f"{totals['handled']:,} / {totals['sent']:,}",
                totals["non2xx"],
            ]
        ],
    )
    ok = {"p50": med["p50_ms"] <= TARGET_P50_MS, "p99": med["p99_ms"] <= TARGET_P99_MS,
          "all_handled": totals["handled"] == totals["sent"]}  # fmt: skip
    report.show(
        "latency targets",
        ["target", "measured", "verdict"],
        [
            [f"p50 <= {TARGET_P50_MS:g} ms", f"{med['p50_ms']:.2f} ms", report.verdict(ok["p50"])],
            [f"p99 <= {TARGET_P99_MS:g} ms", f"{med['p99_ms']:.2f} ms", report.verdict(ok["p99"])],
            [
                "every webhook handled",
                f"{totals['handled']:,} / {totals['sent']:,}",
                report.verdict(ok["all_handled"]),
            ],
        ],
    )
    return {"rounds": rounds, "medians": med, "totals": totals, "targets": ok}


def _fewer(args: argparse.Namespace) -> argparse.Namespace:
    import argparse

    return argparse.Namespace(**{**vars(args), "webhooks": min(args.webhooks, 1000)})
