"""Ingest: signed webhooks at fixed concurrency, jobhook beside its anchors, in the same run.

The default workload is the realistic one (``bench.workload``): random job ids in the
providers' shapes, Svix's time-ordered message ids (millisecond KSUIDs), ~5 % Svix retries,
~10 % InProgress updates before their terminal event, bodies of the bench's provider
(``procs.SOURCE``) with metadata, into a store that already holds a month of traffic (1,000,000
jobs, ``bench.prefill``; PostgreSQL: ``bench.prefill_pg``), copied afresh for the run. Beside
it, jobhook on SQLite also takes the ``random-ids`` variant (fully random message ids, as a
sender with ids of its own may send) into a store prefilled with ids of that kind: the row
``jobhook-random-ids``.
``--workload random-ids`` runs that variant alone; ``--workload sequential`` is the old one
(``tag-0000001``..., unique terminal webhooks, an empty store). No handler is configured, so
nothing runs after the commit.

Rows, each driven by wrk with the same connections and the same request files' shape:
bare Starlette (``bench.bare``, the ratios' denominator); bare + svix verification
(``bench.bare_verify``, the practical ceiling); adnanh/webhook (``bench.adnanh``, a Go
receiver that stores nothing); nullstore (``bench.nullstore``: jobhook whose store executes
nothing, the ceiling of everything but the write); jobhook on SQLite; jobhook on PostgreSQL
(when the server and the ``postgres`` extra are there); the floor (``bench.floor``) with
``--floor``. They take turns round by round (``turn_order``: each first in its turn, the rest
forwards or backwards, so no row always runs after the same one) and are compared by medians.
``--sustain-minutes`` then drives jobhook on SQLite alone, a minute at a time, to show whether
its rate and its tail hold as the store and its WAL grow: on the store of the rounds (the
prefilled one) and on a fresh empty store (``--sustain-from``), the ``-wal`` file's size polled
throughout each minute for its peak.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psutil  # type: ignore[import-untyped]

from bench import adnanh, ingest_report, phases, procs, report, signing, storestats, workload, wrk
from bench.polled import Polled
from bench.prefill import CACHE, copy_store, ensure_prefilled, file_name

if TYPE_CHECKING:
    import argparse

T = TypeVar("T")
HEADROOM = 1.5  # requests written per round, over the fastest rate the endpoint has shown
WAL_POLL_SECONDS = 0.25


RANDOM_IDS = "jobhook-random-ids"
"""The row of jobhook on SQLite taking the random-ids variant beside the realistic workload."""


def _measure(
    service: procs.Service, prefix: Path, tag: str, count: int, args: argparse.Namespace,
    seconds: float | None = None, wal: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One wrk run of ``seconds`` (default ``args.seconds``) on fresh requests of the workload
    (the random-ids variant for that row); with ``wal``, that file's peak size while it ran."""
    seconds = args.seconds if seconds is None else seconds
    entered = time.perf_counter()
    name = "random-ids" if service.name == RANDOM_IDS else args.workload
    job_ids = iter(service.job_ids(count)) if service.job_ids is not None else None
    kinds = signing.write_requests(prefix, tag, count, wrk.THREADS, name, job_ids=job_ids)
    waited = quiesce()
    idle = time.perf_counter() - entered
    server = postgres_cpu_seconds() if service.name == "jobhook-pg" else 0.0
    before = service.probe() if service.probe is not None else {}
    beside = service.beside.cpu_seconds() if service.beside is not None else 0.0
    cpu = service.cpu_seconds()
    load = os.getloadavg()[0]
    stats = storestats.read(service.url) if wal is not None else {}
    with (
        WalPeak(wal) if wal is not None else contextlib.nullcontext() as peak,
        procs.FsyncProbe(wal.parent) if wal is not None else contextlib.nullcontext() as disk,
    ):
        figures = wrk.run(service.url + procs.WEBHOOK_PATH, prefix,
                          connections=args.connections, seconds=seconds)  # fmt: skip
    if wal is not None:
        figures |= storestats.delta(stats, storestats.read(service.url))
    if disk is not None:
        figures |= storestats.fsync_figures(disk.samples)
    if service.beside is not None:
        beside = service.beside.cpu_seconds() - beside
        figures["beside_cpu_us_per_request"] = beside / figures["requests"] * 1e6
    if service.probe is not None:
        after = service.probe()
        figures |= {f"{k}_before": v for k, v in before.items()}
        figures |= {f"{k}_after": v for k, v in after.items()}
    if peak is not None:
        figures["wal_peak_bytes"] = peak.peak
    figures["cpu_us_per_request"] = (service.cpu_seconds() - cpu) / figures["requests"] * 1e6
    if service.name == "jobhook-pg":
        server = postgres_cpu_seconds() - server
        figures["server_cpu_us_per_request"] = server / figures["requests"] * 1e6
    figures["load_average"] = round((load + os.getloadavg()[0]) / 2, 2)
    figures["kinds"] = kinds
    figures["quiesce_seconds"] = round(waited, 1)
    figures["idle_before_seconds"] = round(idle, 1)  # writing the requests, then quiescing
    figures["seconds"] = seconds
    return figures


class WalPeak(Polled):
    """The largest size a WAL file reached while the block ran, polled from a thread every
    ``interval`` seconds (and once on the way in and out).

    The file's size at a minute's end is its peak only while nothing shrinks it: SQLite starts
    a WAL over without truncating it, but ``journal_size_limit`` or a TRUNCATE checkpoint cuts
    it back. Polled, the peak holds whatever the store's checkpoints do (to a poll's width)."""

    def __init__(self, path: Path, interval: float = WAL_POLL_SECONDS) -> None:
        self._path = path
        self.peak = 0
        super().__init__(interval)

    def _sample(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.peak = max(self.peak, self._path.stat().st_size)


def postgres_cpu_seconds() -> float:
    """CPU time of the machine's PostgreSQL server processes (its backends included), live ones
    only: jobhook's connections are pooled, so the backends serving it live through a round."""
    total = 0.0
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info["cpu_times"]
        if proc.info["name"] in ("postgres", "postmaster") and times is not None:
            total += times.user + times.system
    return total


QUIET_PERCENT = 15.0
QUIET_TIMEOUT = 30.0


def quiesce() -> float:
    """Wait until the machine's CPUs are idle (under ``QUIET_PERCENT`` busy over half a second,
    at most ``QUIET_TIMEOUT``); the seconds waited.

    The rows' services all run for the whole benchmark, and the one measured last goes on
    working after its round: jobhook's checkpoint thread copies the WAL it left, PostgreSQL
    vacuums and writes back. Measured right after them, a row paid for that work (nullstore
    made 0.20 x bare in a run where it made 0.40 x measured alone).

    First the page cache's dirty data is written back (``os.sync``): the requests a run has
    just written (hundreds of MB for a fixed rate's ten minutes) would otherwise be written
    back by the kernel half a minute later, in the middle of the measured run, where that
    write-back stalled the store's fsyncs for up to ~150 ms (``bench.storestats``' fsync probe).
    """
    started = time.perf_counter()
    os.sync()
    psutil.cpu_percent()
    while time.perf_counter() - started < QUIET_TIMEOUT:
        if psutil.cpu_percent(interval=0.5) < QUIET_PERCENT:
            break
    return time.perf_counter() - started


def _postgres(work: Path, port: int, jobs: int) -> tuple[procs.Service | None, str]:
    """jobhook on a fresh copy of the prefilled PostgreSQL database; or None and why not."""
    try:
        import asyncpg  # type: ignore[import-untyped]  # noqa: F401

        from bench import prefill_pg

        if jobs:
            prefill_pg.ensure_pg_prefilled(jobs)
            url = prefill_pg.fresh_database()
        else:
            url = prefill_pg.empty_database()
    except Exception as exc:  # no extra, no server: the row is left out, and said so
        return None, f"PostgreSQL row left out: {type(exc).__name__}: {exc}"
    directory = work / "pg"
    directory.mkdir()
    config = procs.jobhook_config(directory, port, store_url=url)
    return procs.jobhook(directory, config, port, name="jobhook-pg"), url


def _sqlite_size(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


CONFIRMING = "jobhook-confirming"
"""The row of jobhook on SQLite whose source names a job API (the simulator) that confirms
every completion and answers its result inline, as a deployment's does."""
UNBUDGETED = 6_000_000
"""Requests a minute the simulator allows and jobhook may make: no budget holds a completion
back, so each is confirmed as soon as the dispatcher gets to it."""
SIM_JOBS_CHUNK = 100_000  # the most ``POST /_sim/jobs`` makes at once


def _confirming(work: Path, jobs: int, ids: str) -> tuple[procs.Service, procs.Service]:
    """The simulator (``procs.SOURCE``'s provider, terminal jobs of one page with a small
    inline result, no budget) and jobhook on a copy of the rounds' prefilled store, its source
    confirming with it; the row's new jobs are created in the simulator before each run."""
    directory = work / "confirming"
    directory.mkdir()
    db = directory / "jobhook.db"
    if jobs:
        copy_store(ensure_prefilled(CACHE / file_name(jobs, ids), jobs, ids), db)
    sim = procs.simulator(directory, procs.free_port(), "--requests-per-minute",
                          str(UNBUDGETED), "--result", "inline", "--pages", "1",
                          "--duration", "0")  # fmt: skip
    port = procs.free_port()
    config = procs.jobhook_config(directory, port, api_base_url=sim.url,
                                  poll={"requests_per_minute": UNBUDGETED})  # fmt: skip
    service = procs.jobhook(directory, config, port, name=CONFIRMING)
    service.job_ids = lambda count: sim_jobs(sim.url, count)
    service.beside = sim
    service.probe = lambda: confirmations(sim.url, db)
    return sim, service


def sim_jobs(url: str, count: int) -> list[str]:
    """``count`` finished jobs made in the simulator at ``url``; their ids."""
    import httpx

    ids: list[str] = []
    with httpx.Client(base_url=url, trust_env=False, timeout=300) as client:
        while len(ids) < count:
            n = min(SIM_JOBS_CHUNK, count - len(ids))
            answer = client.post("/_sim/jobs", json={"count": n, "duration": 0,
                                                     "result": "inline", "pages": 1})  # fmt: skip
            answer.raise_for_status()
            ids += answer.json()["job_ids"]
    return ids


def confirmations(url: str, db: Path) -> dict[str, float]:
    """Requests the simulator's job API has answered so far, and the completions of ``db``
    still waiting for their confirmation."""
    import sqlite3

    import httpx

    with httpx.Client(base_url=url, trust_env=False, timeout=60) as client:
        seq = client.get("/_sim/log", params={"since": 2**62}).json()["last_seq"]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        query = "SELECT count(*) FROM completions WHERE phase = 'resolving'"
        (waiting,) = conn.execute(query).fetchone()
    finally:
        conn.close()
    return {"job_api_requests": float(seq), "confirmations_waiting": float(waiting)}


def _jobhook_sqlite(directory: Path, name: str = "jobhook") -> procs.Service:
    """``jobhook serve`` on the SQLite store ``directory``/jobhook.db, on a free port: every
    SQLite row and sustained run is served this one way."""
    port = procs.free_port()
    return procs.jobhook(directory, procs.jobhook_config(directory, port), port, name=name)


def sustain(
    service: procs.Service, db: Path, run: str, rate: float, work: Path,
    args: argparse.Namespace,
) -> list[dict[str, Any]]:  # fmt: skip
    """``args.sustain_minutes`` wrk runs of ``args.phase_seconds`` (a minute unless a smoke
    run says otherwise) on ``service`` (its store ``db``), each written for the fastest rate
    seen so far (``rate`` before the first); each minute's figures with the store's size and
    its WAL file's size at the end and peak.

    Each minute is a wrk run of its own: between two of them the server has no load while the
    next minute's requests are written and the machine quiesces (``idle_before_seconds``)."""
    minutes: list[dict[str, Any]] = []
    wal = Path(f"{db}-wal")
    seconds = args.phase_seconds
    for minute in range(args.sustain_minutes):
        count = int(rate * seconds * HEADROOM) + 1000
        figures = _measure(service, work / "req", f"s-{run}-{minute}", count, args, seconds,
                           wal)  # fmt: skip
        figures["store_bytes"] = _sqlite_size(db)
        figures["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
        minutes.append(figures)
        rate = max(m["rps"] for m in minutes)
        report.console.print(
            f"  sustained ({run}) minute {minute + 1}/{args.sustain_minutes}: "
            f"{figures['rps']:,.0f} req/s, p50 {figures['p50_us'] / 1000:.1f} ms, "
            f"p99 {figures['p99_us'] / 1000:.1f} ms, p99.9 {figures['p999_us'] / 1000:.1f} ms, "
            f"{ingest_report.errors(figures):,} not 2xx, "
            f"store {figures['store_bytes'] / 1e6:,.0f} MB (WAL "
            f"{figures['wal_bytes'] / 2**20:,.0f} MiB, peak "
            f"{figures['wal_peak_bytes'] / 2**20:,.0f}), load {figures['load_average']}"
        )
        report.console.print(f"    {storestats.line(figures)}")
    return minutes


def _sustain_empty(work: Path, rate: float, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The sustained run on a fresh, empty store of its own, served as the ``jobhook`` row is."""
    directory = work / "empty"
    directory.mkdir()
    service = _jobhook_sqlite(directory, "jobhook-empty")
    with running([service], {service.name: "/readyz"}):
        return sustain(service, directory / "jobhook.db", "empty", rate, work, args)


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()  # before the benchmark's own work: the machine's own load
    wrk.require_wrk()
    measured_on = ingest_report.commit()  # now: the services start from this code
    work = procs.workdir("ingest")
    notes: list[str] = []
    jobs = args.prefill if args.prefill is not None else (
        0 if args.workload == "sequential" else 1_000_000)  # fmt: skip
    db = work / "jobhook.db"
    ids = workload.MESSAGE_IDS.get(args.workload, "ksuid")
    if jobs:
        copy_store(ensure_prefilled(CACHE / file_name(jobs, ids), jobs, ids), db)
    facts = ingest_report.header(measured_on=measured_on, load_before=load_before, jobs=jobs,
                                 ids=ids, store_bytes=_sqlite_size(db) if jobs else 0,
                                 args=args)  # fmt: skip
    for line in ingest_report.header_lines(facts):
        report.console.print(line)
    services = [procs.bare(work), _verify(work)]
    exe = adnanh.binary()
    if exe:
        services.append(adnanh.service(work, procs.free_port(), exe))
    else:
        notes.append("adnanh/webhook row left out: no `webhook` binary (apt-get install webhook)")
    null_port, null_dir = procs.free_port(), work / "nullstore"
    null_dir.mkdir()
    services.append(procs.nullstore(work, procs.jobhook_config(null_dir, null_port), null_port))
    jobhook = _jobhook_sqlite(work)
    services.append(jobhook)
    random_db = None
    if args.workload == "realistic":
        random_dir = work / "random-ids"
        random_dir.mkdir()
        random_db = random_dir / "jobhook.db"
        if jobs:
            source = ensure_prefilled(CACHE / file_name(jobs, "random"), jobs, "random")
            copy_store(source, random_db)
        services.append(_jobhook_sqlite(random_dir, RANDOM_IDS))
    helpers: list[procs.Service] = []
    if not args.no_confirming:
        sim, confirming = _confirming(work, jobs, ids)
        helpers.append(sim)
        services.append(confirming)
        confirming_db = work / "confirming" / "jobhook.db"
    if args.no_postgres:
        pg, pg_url = None, "skipped (--no-postgres)"
    elif args.workload == "random-ids":
        pg, pg_url = None, "PostgreSQL row left out: its prefilled database holds KSUID ids"
    else:
        pg, pg_url = _postgres(work, procs.free_port(), jobs)
    if pg is None:
        notes.append(pg_url)
    else:
        services.append(pg)
    if args.floor:
        floor_port = procs.free_port()
        floor_argv = [sys.executable, "-m", "bench.floor", str(floor_port), str(work / "floor.db")]
        services.append(procs.Service("floor", floor_argv, floor_port, work / "floor.log"))
    sizes: dict[str, dict[str, int]] = {"jobhook": {"before": _sqlite_size(db) if jobs else 0}}
    if random_db is not None:
        sizes[RANDOM_IDS] = {"before": _sqlite_size(random_db) if jobs else 0}
    if pg is not None:
        sizes["jobhook-pg"] = {"before": _pg_size()}
    if not args.no_confirming:
        sizes[CONFIRMING] = {"before": _sqlite_size(confirming_db) if jobs else 0}
    rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in services}
    sustained: dict[str, list[dict[str, Any]]] = {}
    runs = ("prefilled", "empty") if args.sustain_from == "both" else (args.sustain_from,)
    ready = {s.name: ("/" if s.name == "adnanh" else "/readyz") for s in services}
    ready |= {s.name: "/_sim" for s in helpers}
    with running([*helpers, *services], ready):
        best = take_turns(services, rounds, work, args)
        sizes["jobhook"]["after_rounds"] = _sqlite_size(db)
        rated: list[dict[str, Any]] = []
        if args.rate_phases:
            saturated = args.rate_base or report.median([r["rps"] for r in rounds["jobhook"]])
            rated = phases.run(jobhook, db, saturated, work, args)
            sizes["jobhook"]["after_rate_phases"] = _sqlite_size(db)
        if random_db is not None:
            sizes[RANDOM_IDS]["after"] = _sqlite_size(random_db)
        if not args.no_confirming:
            sizes[CONFIRMING]["after"] = _sqlite_size(confirming_db)
        if args.sustain_minutes and "prefilled" in runs:
            sustained["prefilled"] = sustain(jobhook, db, "prefilled", best["jobhook"], work,
                                             args)  # fmt: skip
        if args.sustain_minutes and "empty" in runs:
            # An empty store takes webhooks faster than a loaded one: its first minute is
            # written for nullstore's rate, the ceiling of everything but the write.
            rate = max(best["jobhook"], best.get("nullstore", 0.0))
            sustained["empty"] = _sustain_empty(work, rate, args)
            sizes["jobhook-empty"] = {
                "before": 0,
                "after": _sqlite_size(work / "empty" / "jobhook.db"),
            }
    sizes["jobhook"]["after"] = _sqlite_size(db)
    if pg is not None:
        sizes["jobhook-pg"]["after"] = _pg_size()
    return ingest_report.summarise(
        rounds,
        sustained,
        rated,
        sizes,
        notes,
        args,
        jobs,
        workload.DESCRIPTION[args.workload],
        measured_on,
        facts,
    )


def take_turns(
    services: list[procs.Service], rounds: dict[str, list[dict[str, Any]]], work: Path,
    args: argparse.Namespace,
) -> dict[str, float]:  # fmt: skip
    """A warm-up each, then ``args.rounds`` rounds in which the running ``services`` take turns
    (in ``turn_order``), their figures added to ``rounds``; each one's best rate."""
    best: dict[str, float] = {}
    for service in services:  # warm-up, not counted; also learns each one's rate
        warm = _measure(service, work / "req", f"warm-{service.name}", 20_000, args, 3)
        best[service.name] = warm["rps"]
    for n in range(args.rounds):
        order = turn_order(services, n)
        for service in order:
            count = int(best[service.name] * args.seconds * HEADROOM) + 1000
            figures = _measure(service, work / "req", f"r{n}-{service.name}", count, args,
                               args.seconds)  # fmt: skip
            best[service.name] = max(best[service.name], figures["rps"])
            figures["round"] = n  # rows are compared round by round: pair them by this
            rounds[service.name].append(figures)
            report.console.print(
                f"  round {n + 1}/{args.rounds} {service.name}: {figures['rps']:,.0f} req/s, "
                f"p99 {figures['p99_us'] / 1000:.1f} ms, load {figures['load_average']}"
            )
    return best


def turn_order(services: list[T], n: int) -> list[T]:
    """Round ``n``'s order: each row first in its turn (``n`` modulo their number), the others
    after it forwards in even rounds and backwards in odd ones, so that no row runs right after
    the same one in every round. A row leaves work behind that ``quiesce`` does not wait for
    (the checkpoint thread's random writes after a store's round are disk, not CPU): with the
    order merely rotating, each row ran right after the same neighbour and paid for its
    leftovers in every round (docs/performance.md, "One write an answer")."""
    first = n % len(services)
    step = 1 if n % 2 == 0 else -1
    return [services[(first + step * i) % len(services)] for i in range(len(services))]


def _short(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with 3-second rounds (bench.tracing's warm-up)."""
    import argparse

    return argparse.Namespace(**{**vars(args), "seconds": 3})


def _verify(work: Path) -> procs.Service:
    port = procs.free_port()
    argv = [sys.executable, "-m", "bench.bare_verify", str(port)]
    return procs.Service("bare+verify", argv, port, work / "bare_verify.log")


def _pg_size() -> int:
    from bench import prefill_pg

    return prefill_pg.database_size()


@contextlib.contextmanager
def running(services: list[procs.Service], ready: dict[str, str]) -> Any:
    try:
        for service in services:
            service.start().wait_ready(ready[service.name], timeout=120)
        yield
    finally:
        for service in reversed(services):
            service.stop()
