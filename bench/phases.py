"""Fixed-rate phases of ``bench ingest`` (``--rate-phases 25,50 --rate-minutes 10``).

After the saturated rounds, jobhook on SQLite (the rounds' row, on the store they left) is sent
webhooks open loop (``bench.loadgen``: request i due at start + i / rate, so a stall is counted
in the latency of every request due while it lasted, not hidden as wrk's closed loop hides it)
from a process of its own (``loadgen.run_apart``: the samplers below are threads of the bench's
process, kept out of the sender's interpreter, where they delayed its sends) at each given
percentage of the rate the rounds measured (their median), for N phases of
``--phase-seconds`` (a minute) each, without a pause between the phases of one rate. Each phase
of a rate is reported: throughput (answers that arrived in it, a second), p50/p99/p99.9 of the
requests due in it (from their slot to their answer), answers not 2xx, the sends that left
later than 1 ms after their slot and the worst lateness (the sender's own lag: when it falls
behind, the report says so and judges nothing, rather than blaming the server), the store's size
at its end and the WAL's peak. Targets: p99 <= 10 ms at 50 %, <= 5 ms at 25 %, and flat: the
last phase's p99 <= 2 x the first's.

A rate's requests are written ahead (the workload's, as for wrk) into one file read a line at a
time while they are sent, each signed for the second it is due (a run is longer than Svix's
five minutes of tolerance).
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import ingest_report, loadgen, procs, report, signing, storestats
from bench.polled import Polled

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from bench.ingest_report import Check

RATE_P99_MS = {25.0: 5.0, 50.0: 10.0}
"""The p99 each percentage of the saturated rate is held to; other percentages are measured."""
TARGET_FLAT = 2.0
"""The last phase's p99 at most this many times the first's."""
SENDER_LATE_SHARE = 0.001
"""Past this share of late sends (or a late send past the p99 target) the sender, not the
server, may be what the tail measures: the rate is judged on each request's latency from its
release (slot plus the sender's lateness) rather than from its slot."""
SIZE_POLL_SECONDS = 0.25


def parse_percentages(text: str) -> tuple[float, ...]:
    """``"25,50"`` -> (25.0, 50.0): percentages of the saturated rate, each in (0, 100]."""
    values = tuple(float(part) for part in text.split(",") if part.strip())
    if not values or any(not 0 < v <= 100 for v in values):
        raise ValueError(f"rate phases are percentages in (0, 100], comma-separated: {text!r}")
    return values


@dataclass(frozen=True, slots=True)
class Plan:
    """One fixed rate: its percentage of the saturated rate, requests a second, phases."""

    percent: float
    rate: float
    phases: int
    phase_seconds: int

    @property
    def requests(self) -> int:
        return math.ceil(self.rate * self.phases * self.phase_seconds)


def plan(saturated: float, percentages: tuple[float, ...], phases: int,
         phase_seconds: int) -> list[Plan]:  # fmt: skip
    """The fixed rates to run, in the order given, from the rounds' saturated rate."""
    return [Plan(p, saturated * p / 100, phases, phase_seconds) for p in percentages]


def request_lines(path: Path, host: str, port: int) -> Iterator[bytes]:
    """The raw HTTP requests of a request file (``id TAB ts TAB signature TAB body`` lines)."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            message_id, ts, signature, body = line.rstrip("\n").split("\t", 3)
            headers = {"svix-id": message_id, "svix-timestamp": ts, "svix-signature": signature,
                       "Content-Type": "application/json"}  # fmt: skip
            yield loadgen.http_request(host, port, procs.WEBHOOK_PATH, headers, body)


def phase_figures(record: loadgen.Record, rate: float, phases: int,
                  phase_seconds: float) -> list[dict[str, Any]]:  # fmt: skip
    """Each phase's figures from an open-loop run's record: requests due in it, their latency
    percentiles (answered - due, in microseconds), answers not 2xx (no answer included),
    throughput (answers arriving in it, a second; the last phase takes the stragglers), and
    the sends the schedule released late."""
    due: list[list[float]] = [[] for _ in range(phases)]
    released: list[list[float]] = [[] for _ in range(phases)]
    answered = [0] * phases
    failed = [0] * phases
    columns = zip(record.due, record.answered, record.status, record.index, strict=True)
    for at, sent_at, status, index in columns:
        k = min(max(int((at - record.start) / phase_seconds), 0), phases - 1)
        if not 200 <= status < 300:
            failed[k] += 1
        if status:
            due[k].append((sent_at - at) * 1e6)
            released[k].append((sent_at - at - record.lateness[index]) * 1e6)
            j = min(max(int((sent_at - record.start) / phase_seconds), 0), phases - 1)
            answered[j] += 1
    lateness: list[list[float]] = [[] for _ in range(phases)]
    for i, late in enumerate(record.lateness):
        lateness[min(int(i / rate / phase_seconds), phases - 1)].append(late)
    out = []
    for k in range(phases):
        lag = loadgen.Lag.of(lateness[k], record.lag.late_after)
        latencies = sorted(due[k])
        from_release = sorted(released[k])
        out.append({
            "requests": len(lateness[k]),
            "answers": len(latencies),
            "rps": answered[k] / phase_seconds,
            "p50_us": report.percentile(latencies, 50),
            "p99_us": report.percentile(latencies, 99),
            "p999_us": report.percentile(latencies, 99.9),
            "max_us": latencies[-1] if latencies else float("nan"),
            "p99_release_us": report.percentile(from_release, 99),
            "not_2xx": failed[k],
            "late_sends": lag.late,
            "worst_late_ms": lag.worst * 1000,
        })  # fmt: skip
    return out


def overall(record: loadgen.Record) -> dict[str, float]:
    """The whole rate's percentiles (microseconds) over every request answered, from its slot,
    and its p99 from its release (the slot plus the sender's own lateness)."""
    columns = zip(record.due, record.answered, record.status, record.index, strict=True)
    answered = [(a - d, record.lateness[i]) for d, a, s, i in columns if s]
    latencies = sorted(took * 1e6 for took, _ in answered)
    from_release = sorted((took - late) * 1e6 for took, late in answered)
    return {"p50_us": report.percentile(latencies, 50),
            "p99_us": report.percentile(latencies, 99),
            "p999_us": report.percentile(latencies, 99.9),
            "p99_release_us": report.percentile(from_release, 99)}  # fmt: skip


def sender_behind(lag: loadgen.Lag, target_ms: float | None) -> bool:
    """Whether the sender fell behind enough to be what a tail measures."""
    if lag.share > SENDER_LATE_SHARE:
        return True
    return target_ms is not None and lag.late > 0 and lag.worst * 1000 > target_ms


def checks(percent: float, phases: list[dict[str, Any]], whole: dict[str, float],
           lag: loadgen.Lag) -> list[Check]:  # fmt: skip
    """The targets of one fixed rate: its p99 (over every request of the rate; the worst
    phase shown), flat over its phases, every answer 2xx. From each request's slot; when the
    sender fell behind, from its release instead (its slot plus the sender's own lateness:
    what the server and the connections' queue took, and a stall is still counted in every
    request released while it lasted), and the line says so."""
    where = f"{percent:g} % of saturated"
    target_ms = RATE_P99_MS.get(percent)
    p99 = f"{where}: p99 <= {target_ms:g} ms" if target_ms is not None else f"{where}: p99"
    flat = f"{where}: last phase's p99 <= {TARGET_FLAT:g} x the first's"
    answered = f"{where}: every answer 2xx"
    failed = sum(p["not_2xx"] for p in phases)
    requests = sum(p["requests"] for p in phases)
    answered_check: Check = (answered, f"{failed:,} of {requests:,} not 2xx", failed == 0)
    key, why = "p99_us", ""
    if sender_behind(lag, target_ms):
        key = "p99_release_us"
        why = (
            f"; from the release: the sender behind ({lag.late:,} of {lag.sends:,} sends late, > "
            f"{lag.late_after * 1000:g} ms, worst {lag.worst * 1000:.1f} ms; from the slot "
            f"{whole['p99_us'] / 1000:.2f} ms)"
        )
    worst = max(p[key] for p in phases) / 1000
    measured = f"{whole[key] / 1000:.2f} ms (worst phase {worst:.2f} ms){why}"
    met = None if target_ms is None else whole[key] / 1000 <= target_ms
    p99_check: Check = (p99, measured, met)
    if len(phases) < 2:
        return [p99_check, (flat, "one phase: nothing to compare", None), answered_check]
    first, last = phases[0][key], phases[-1][key]
    growth = last / first
    flat_check: Check = (flat, f"{first / 1000:.2f} -> {last / 1000:.2f} ms ({growth:.1f} x)",
                         growth <= TARGET_FLAT)  # fmt: skip
    return [p99_check, flat_check, answered_check]


class Sizes(Polled):
    """The store's and its WAL's sizes, polled from a thread every ``interval`` seconds, each
    sample stamped with ``time.time()``; per phase: the WAL's peak, the store's size at its
    end."""

    def __init__(self, db: Path, interval: float = SIZE_POLL_SECONDS) -> None:
        self._db = db
        self._wal = Path(f"{db}-wal")
        self.samples: list[tuple[float, int, int]] = []
        super().__init__(interval)

    def _size(self, path: Path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    def _sample(self) -> None:
        wal = self._size(self._wal)
        self.samples.append((time.time(), wal, self._size(self._db) + wal))

    def per_phase(self, start: float, phases: int, seconds: float) -> list[dict[str, int]]:
        out = []
        for k in range(phases):
            lo, hi = start + k * seconds, start + (k + 1) * seconds
            inside = [s for s in self.samples if lo <= s[0] < hi] or [
                min(self.samples, key=lambda s: abs(s[0] - hi))]  # fmt: skip
            out.append({"wal_peak_bytes": max(s[1] for s in inside),
                        "store_bytes": inside[-1][2]})  # fmt: skip
        return out


def run_rate(
    service: procs.Service, db: Path, one: Plan, work: Path, args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    """One fixed rate on ``service``: write its requests, quiesce, send them; its figures."""
    from bench.ingest import quiesce  # the rounds' own wait for idle CPUs

    prefix = work / f"rate-{one.percent:g}"
    written = time.time()
    signing.write_requests(prefix, f"rate{one.percent:g}", one.requests, 1, args.workload,
                           stamp=lambda n: int(written + n / one.rate))  # fmt: skip
    write_seconds = time.time() - written
    waited = quiesce()
    cpu, load = service.cpu_seconds(), os.getloadavg()[0]
    lines = functools.partial(request_lines, Path(f"{prefix}.0"), "127.0.0.1", service.port)
    with (
        Sizes(db) as sizes,
        storestats.Readings(service.url) as readings,
        procs.FsyncProbe(db.parent) as disk,
    ):
        record, sender = loadgen.run_apart("127.0.0.1", service.port, lines, one.rate,
                                           connections=args.connections)  # fmt: skip
    cpu = service.cpu_seconds() - cpu
    Path(f"{prefix}.0").unlink(missing_ok=True)
    phases = phase_figures(record, one.rate, one.phases, one.phase_seconds)
    for figures, size in zip(phases, sizes.per_phase(record.start, one.phases,
                                                     one.phase_seconds), strict=True):  # fmt: skip
        figures.update(size)
    stats = readings.per_phase(record.start, one.phases, one.phase_seconds)
    for k, (figures, held) in enumerate(zip(phases, stats, strict=True)):
        lo, hi = record.start + k * one.phase_seconds, record.start + (k + 1) * one.phase_seconds
        figures.update(held)
        figures.update(
            storestats.fsync_figures(
                [ms for ms, at in zip(disk.samples, disk.stamps, strict=True) if lo <= at < hi]
            )
        )
    whole = overall(record)
    return {
        "percent": one.percent,
        "rate": one.rate,
        "phase_seconds": one.phase_seconds,
        "phases": phases,
        "overall": whole,
        "late_sends": record.lag.late,
        "sends": record.lag.sends,
        "worst_late_ms": record.lag.worst * 1000,
        "sender_behind": sender_behind(record.lag, RATE_P99_MS.get(one.percent)),
        "cpu_us_per_request": cpu / max(len(record.status), 1) * 1e6,
        "sender_cpu_us_per_request": sender / max(len(record.status), 1) * 1e6,
        "sender_core_share": sender / (one.phases * one.phase_seconds),
        "load_average": round((load + os.getloadavg()[0]) / 2, 2),
        "write_seconds": round(write_seconds, 1),
        "quiesce_seconds": round(waited, 1),
        "checks": checks(one.percent, phases, whole, record.lag),
    }


def run(service: procs.Service, db: Path, saturated: float, work: Path,
        args: argparse.Namespace) -> list[dict[str, Any]]:  # fmt: skip
    """Every fixed rate of ``args.rate_phases``, in order, on ``service`` and its store."""
    out = []
    for one in plan(saturated, args.rate_phases, args.rate_minutes, args.phase_seconds):
        report.console.print(
            f"  rate phases: {one.percent:g} % of {saturated:,.0f} req/s = {one.rate:,.0f} "
            f"req/s, {one.phases} x {one.phase_seconds} s ({one.requests:,} requests)"
        )
        result = run_rate(service, db, one, work, args)
        out.append(result)
        for n, p in enumerate(result["phases"], 1):
            report.console.print(
                f"    phase {n}/{one.phases}: {p['rps']:,.0f} req/s, p50 "
                f"{p['p50_us'] / 1000:.2f} ms, p99 {p['p99_us'] / 1000:.2f} ms (from the "
                f"release {p['p99_release_us'] / 1000:.2f}), p99.9 "
                f"{p['p999_us'] / 1000:.2f} ms, {p['not_2xx']:,} not 2xx, "
                f"{p['late_sends']:,} late sends (worst {p['worst_late_ms']:.1f} ms)"
            )
            report.console.print(f"      {storestats.line(p)}")
    return out


def show(results: list[dict[str, Any]], workload_name: str) -> None:
    """Each fixed rate's table, a phase a row, and its summary line."""
    for result in results:
        ids = ingest_report.MESSAGE_IDS.get(workload_name, workload_name)
        report.show(
            f"fixed rate {result['percent']:g} % of saturated = {result['rate']:,.0f} req/s, "
            f"open loop, jobhook (SQLite), {ids}, a {result['phase_seconds']} s phase a row",
            ["phase", "req/s", "p50 ms", "p99 ms", "p99 from release", "p99.9 ms", "not 2xx",
             "late sends", "worst late ms", "store MB", "WAL MiB peak"],
            [[n, p["rps"], p["p50_us"] / 1000, p["p99_us"] / 1000, p["p99_release_us"] / 1000,
              p["p999_us"] / 1000, p["not_2xx"], p["late_sends"], p["worst_late_ms"],
              p["store_bytes"] / 1e6,
              p["wal_peak_bytes"] / 2**20] for n, p in enumerate(result["phases"], 1)],
        )  # fmt: skip
        sender = ("[red]the sender fell behind[/red]: " if result["sender_behind"] else
                  "sender kept up: ")  # fmt: skip
        report.console.print(
            f"  {result['percent']:g} %: {sender}{result['late_sends']:,} of "
            f"{result['sends']:,} sends late (> {loadgen.LATE_AFTER * 1000:g} ms), worst "
            f"{result['worst_late_ms']:.1f} ms (its CPU {result['sender_cpu_us_per_request']:,.0f} "
            f"us a request, {result['sender_core_share']:.0%} of a core); jobhook's CPU "
            f"{result['cpu_us_per_request']:,.0f} us a request; "
            f"{ingest_report.summary_line(result['checks'])}"
        )


def target_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The fixed rates' targets as rows of the targets table."""
    return [[target, measured, "-" if ok is None else report.verdict(ok)]
            for result in results for target, measured, ok in result["checks"]]  # fmt: skip
