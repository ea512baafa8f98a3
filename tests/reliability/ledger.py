"""The crash ledger: signed webhooks at a steady rate into real services that are SIGKILLed again
and again, and a ledger of what was acknowledged against what the handlers received.

    sender ──POST /webhooks/reducto (retried like Svix until a 2xx)──▶ service process(es)
           (round-robin over the replicas)                    (SQLite, or PostgreSQL shared
                                                               by replicas; 2 http handlers)
    killer ──SIGKILL one at a random moment, restart── N times           │
    downstream (in this process) ◀──POST /alpha, /beta──────────────────────┘

A webhook counts as acknowledged once any attempt got a 2xx. At the end every acknowledged job
must have reached every handler at least once; handler calls beyond the first are duplicates,
and only dispatches that the killed process had claimed (``running``) when a kill landed may be
delivered twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import socket
import sqlite3
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from receiver.service.serving import serving
from tests.reliability.service import Service
from tests.support import SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

HANDLERS = ("alpha", "beta")
READY_TIMEOUT = 120.0
"""Seconds a start may take: on a machine loaded by other work, ten times what it takes idle."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How hard the run pushes: rate, kills and how long each service lives before one."""

    kills: int
    rate: float
    """New webhooks per second."""
    uptime: tuple[float, float]
    """Seconds a ready service runs before its kill (uniform)."""
    startup_kills: float = 0.2
    """The share of kills aimed at startup instead (0.1 to 1 s after the start, before ready)."""
    latency: tuple[float, float] = (0.0, 0.02)
    """How long the downstream works on each handler call, so kills land during handling."""
    lease_seconds: float = 10.0
    """Long enough that a replica starved of CPU on a loaded machine keeps its claims (shorter
    leases ran out on live replicas, and they repeated work no kill had interrupted); a killed
    one's claims are freed sooner by the heartbeat check."""
    concurrency: int = 16
    open_webhooks: int = 800
    """Webhooks the sender keeps open (sending or waiting to retry) at once, like Svix's queue."""
    connections: int = 64
    drain_timeout: float = 120.0
    seed: int = 1
    log_level: str = "info"
    replicas: int = 1
    """Services sharing the store (more than one needs PostgreSQL); each kill picks one."""


@dataclass(slots=True)
class Figures:
    """What a run did and what it found; ``lost`` must be 0."""

    seconds: float = 0.0
    offered: float = 0.0
    webhooks: int = 0
    attempts: int = 0
    acknowledged: int = 0
    unacknowledged: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    transport_errors: int = 0
    kills: int = 0
    kills_before_ready: int = 0
    kills_during_handling: int = 0
    claimed_at_kills: int = 0
    handler_calls: int = 0
    delivered: int = 0
    duplicates: int = 0
    lost: int = 0
    restarts: list[float] = field(default_factory=list)
    """Seconds from each restart to ready (starts killed before ready are not in it)."""
    load: float = 0.0
    """The highest one-minute load average seen at a kill."""
    wall: float = 0.0
    """Seconds of the whole run: starts, kills, sending, draining, stops."""
    stored: tuple[set[str], dict[str, int]] = (set(), {})
    """What the store held at the end: message ids, dispatches by state."""

    @property
    def slowest_restart(self) -> float:
        return max(self.restarts, default=0.0)

    @property
    def median_restart(self) -> float:
        return statistics.median(self.restarts) if self.restarts else 0.0

    @property
    def rate(self) -> float:
        return self.webhooks / self.seconds if self.seconds else 0.0

    @property
    def client_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if 400 <= status < 500)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def line(self) -> str:
        return (
            f"webhooks={self.webhooks} ({self.rate:.0f}/s of {self.offered:.0f}/s offered, "
            f"over {self.seconds:.0f}s) "
            f"attempts={self.attempts} 2xx={self.acknowledged} unacked={self.unacknowledged} "
            f"4xx={self.client_errors} 5xx={self.server_errors} "
            f"transport_errors={self.transport_errors} kills={self.kills} "
            f"(before_ready={self.kills_before_ready}, "
            f"during_handling={self.kills_during_handling}, claimed={self.claimed_at_kills}) "
            f"handler_calls={self.handler_calls} "
            f"delivered={self.delivered} duplicates={self.duplicates} lost={self.lost} "
            f"restarts={len(self.restarts)} (median {self.median_restart:.1f}s, "
            f"slowest {self.slowest_restart:.1f}s) load<={self.load:.1f} wall={self.wall:.0f}s"
        )


class Downstream:
    """The handlers' target: counts each call per handler and job, after working ``latency``."""

    def __init__(self, latency: tuple[float, float], rng: random.Random) -> None:
        self.latency = latency
        self.rng = rng
        self.calls: dict[str, collections.Counter[str]] = {
            h: collections.Counter() for h in HANDLERS
        }
        self.in_flight = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":  # the sending replica was killed
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.in_flight += 1
        try:
            await asyncio.sleep(self.rng.uniform(*self.latency))
            self.calls[scope["path"].strip("/")][json.loads(body)["job_id"]] += 1
        finally:
            self.in_flight -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    def missing(self, job_ids: set[str]) -> int:
        """(job, handler) pairs not delivered yet."""
        return sum(1 for h in HANDLERS for j in job_ids if self.calls[h][j] == 0)


class Sender:
    """Creates webhooks at ``rate`` and retries each (new timestamp and signature) until a 2xx."""

    def __init__(self, services: Sequence[Service], plan: Plan, rng: random.Random) -> None:
        self.services = services
        """Each attempt goes to the next one, like a round-robin load balancer."""
        self.plan = plan
        self.rng = rng
        self.created = 0
        self.attempts = 0
        self.transport_errors = 0
        self.statuses: collections.Counter[int] = collections.Counter()
        self.acked: set[str] = set()
        self.refused: set[str] = set()
        self.give_up_at: float | None = None
        """Set when sending stops: open webhooks are retried until then, like Svix's schedule."""
        self.acked_at: dict[str, float] = {}
        """When (monotonic) each acknowledged webhook got its 2xx."""
        self.answers: list[tuple[float, int]] = []
        """(monotonic time, status) of every answer, when ``record_answers``."""
        self.record_answers = False
        self._turn = 0
        # At most one request per pooled connection at a time: with hundreds of webhooks queued
        # inside httpcore's pool every assignment scans them all, and after a kill the retries
        # kept this loop busy with that scan instead of sending (seen on a loaded 2-core
        # machine: the service ready and idle, no connection open, the test never ending).
        self._sending = asyncio.Semaphore(plan.connections)

    async def run(self, stop: asyncio.Event, give_up_after: float) -> None:
        """Send until ``stop``; then retry what is still open for up to ``give_up_after`` s.

        Svix retries a message for about 27 hours, so a webhook is not abandoned while the
        service is still being killed, however long that takes; once the kills are over the
        service has ``give_up_after`` seconds to acknowledge everything still open.
        """
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(self.plan.open_webhooks)
        tasks: set[asyncio.Task[None]] = set()
        limits = httpx.Limits(max_connections=self.plan.connections)
        async with httpx.AsyncClient(timeout=10.0, limits=limits) as client:
            started = loop.time()
            while not stop.is_set():
                delay = started + self.created / self.plan.rate - loop.time()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    continue
                await slots.acquire()
                task = asyncio.create_task(self._deliver(client, self.created))
                task.add_done_callback(lambda t: (slots.release(), tasks.discard(t)))
                tasks.add(task)
                self.created += 1
            self.give_up_at = time.monotonic() + give_up_after
            await asyncio.gather(*tasks)

    async def _deliver(self, client: httpx.AsyncClient, n: int) -> None:
        job_id, msg_id = f"job-{n}", f"msg-{n}"
        body = reducto_body(job_id)
        for attempt in range(1, 10_000):
            self.attempts += 1
            try:
                async with self._sending:
                    self._turn += 1
                    service = self.services[self._turn % len(self.services)]
                    response = await client.post(
                        f"{service.url}/webhooks/reducto",
                        content=body,
                        headers=signed_headers(body, msg_id=msg_id),
                    )
            except httpx.TransportError:
                self.transport_errors += 1
            else:
                self.statuses[response.status_code] += 1
                if self.record_answers:
                    self.answers.append((time.monotonic(), response.status_code))
                if response.is_success:
                    self.acked.add(job_id)
                    self.acked_at[job_id] = time.monotonic()
                    return
                if response.status_code < 500:
                    self.refused.add(job_id)
                    return
            if self.give_up_at is not None and time.monotonic() > self.give_up_at:
                return
            # Svix waits 5 s, then minutes; a shorter schedule keeps the run short.
            await asyncio.sleep(min(0.25 * 2**attempt, 4.0) * self.rng.uniform(0.5, 1.0))


def write_config(
    tmp_path: Path, target: str, plan: Plan, store: str | None = None, extra: str = ""
) -> Path:
    """One configuration for every replica: ``store`` (default: SQLite in the data directory),
    the two http handlers, and ``extra`` TOML appended."""
    config = tmp_path / "jobhook.toml"
    store_table = f'[store]\nurl = "{store}"\n' if store else ""
    handlers = "".join(
        f'[[handlers]]\nname = "{h}"\ntype = "http"\nurl = "{target}/{h}"\ntimeout = 10\n'
        "backoff_initial = 0.2\nbackoff_max = 2\nmax_attempts = 50\n"
        for h in HANDLERS
    )
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
{store_table}[server]
shutdown_grace_seconds = 5
[dispatch]
lease_seconds = {plan.lease_seconds}
concurrency = {plan.concurrency}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
{handlers}{extra}""",
        encoding="utf-8",
    )
    return config


class StoreProbe(Protocol):
    """Reads the services' store from beside them."""

    async def dispatches_in(self, *states: str) -> int:
        """Dispatches in one of ``states``."""

    async def claimed_by(self, pid: int) -> int:
        """Dispatches the (now dead) process ``pid`` had claimed and not finished: the only
        ones its death may repeat."""

    async def stored(self) -> tuple[set[str], dict[str, int]]:
        """The message ids the store holds, and its dispatches counted by state."""


class SQLiteProbe:
    """Read-only reads of the SQLite file one service has open."""

    def __init__(self, db: Path) -> None:
        self.db = db

    async def dispatches_in(self, *states: str) -> int:
        return dispatches_in(self.db, *states)

    async def claimed_by(self, pid: int) -> int:
        return dispatches_in(self.db, "running")  # one process: every claim was its own

    async def stored(self) -> tuple[set[str], dict[str, int]]:
        return stored_state(self.db)


class PostgresProbe:
    """Reads of the database the replicas share (a connection each time: it may restart)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        """The rows of one statement, on a connection of its own."""
        import asyncpg  # type: ignore[import-untyped]  # the 'postgres' extra, as the store

        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    async def dispatches_in(self, *states: str) -> int:
        rows = await self.fetch(
            "SELECT count(*) FROM dispatches WHERE state = ANY($1::text[])", list(states)
        )
        return int(rows[0][0])

    async def claimed_by(self, pid: int) -> int:
        owner = f"{socket.gethostname()}:{pid}:%"  # receiver.loops.worker_id()
        rows = await self.fetch(
            "SELECT count(*) FROM dispatches WHERE state = 'running' AND lease_owner LIKE $1",
            owner,
        )
        return int(rows[0][0])

    async def stored(self) -> tuple[set[str], dict[str, int]]:
        messages = {r[0] for r in await self.fetch("SELECT message_id FROM deliveries")}
        rows = await self.fetch("SELECT state, count(*) FROM dispatches GROUP BY state")
        return messages, {str(r[0]): int(r[1]) for r in rows}


def dispatches_in(db: Path, *states: str) -> int:
    """Dispatches in one of ``states``, read-only beside a service that has the store open."""
    if not db.exists():
        return 0
    marks = ", ".join("?" * len(states))
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        try:
            ((count,),) = conn.execute(
                f"SELECT count(*) FROM dispatches WHERE state IN ({marks})", states
            )
        except sqlite3.OperationalError:  # killed before its first migration committed
            return 0
    return int(count)


class Killer:
    """SIGKILLs ``plan.kills`` times and restarts each killed service at once.

    Every replica lives its own cycle (start; ready or not; run; SIGKILL), so one replica's
    restart does not hold up the kills of the others. With more than one replica a kill waits
    until another one is ready, so one always serves; a single service goes down with each kill.
    """

    def __init__(
        self,
        services: Sequence[Service],
        plan: Plan,
        probe: StoreProbe,
        figures: Figures,
        progress: Path | None = None,
    ) -> None:
        self.services = services
        self.plan = plan
        self.probe = probe
        self.figures = figures
        self.left = plan.kills
        self.ready = set(range(len(services)))
        """Replicas known to serve: ready, and not killed since."""
        self.client: httpx.AsyncClient | None = None
        """Asks the replicas' ``/readyz`` while a kill waits for another one to serve."""
        self.progress = progress
        """A line per kill is appended to it; a file beside it named ``*.stop`` ends the kills
        early, so that a long run out of time still drains and reports its figures."""

    async def run(self) -> None:
        """Until the plan's kills are done; the last restarts may still be under way."""
        async with httpx.AsyncClient(timeout=1.0) as self.client, asyncio.TaskGroup() as group:
            for n in range(len(self.services)):
                group.create_task(self._cycles(n, random.Random(self.plan.seed * 100 + n)))

    async def _cycles(self, n: int, rng: random.Random) -> None:
        while self.left > 0 and not (self.progress and self.progress.with_suffix(".stop").exists()):
            self.left -= 1
            await self.kill_once(n, rng)

    async def kill_once(self, n: int, rng: random.Random) -> None:
        """One cycle of replica ``n``: a kill at a random moment (while it starts, or after it
        has served a while), what it had claimed then, and its restart."""
        service = self.services[n]
        if rng.random() < self.plan.startup_kills:
            await asyncio.sleep(rng.uniform(0.1, 1.0))  # after its start, which just began
        else:
            await self._ready(n)
            await asyncio.sleep(rng.uniform(*self.plan.uptime))
        while True:
            for m, other in enumerate(self.services):
                if m not in self.ready and await other.is_ready(self.client):
                    self._mark_ready(m)
            before_ready = n not in self.ready
            if len(self.services) == 1 or self.ready - {n}:
                break
            await asyncio.sleep(0.2)
        # Nothing awaited from the check to the kill: no other replica is killed in between.
        self.ready.discard(n)
        assert service.process is not None
        pid = service.process.pid
        service.kill()
        self.figures.kills += 1
        self.figures.kills_before_ready += before_ready
        self.figures.load = max(self.figures.load, os.getloadavg()[0])
        claimed = await self.probe.claimed_by(pid)
        self.figures.kills_during_handling += claimed > 0
        self.figures.claimed_at_kills += claimed
        service.start()
        if self.progress is not None:  # what a run cut short had reached
            f = self.figures
            with self.progress.open("a", encoding="utf-8") as out:
                out.write(
                    f"{time.strftime('%H:%M:%S')} replica={n} kills={f.kills} "
                    f"(before_ready={f.kills_before_ready}, "
                    f"during_handling={f.kills_during_handling}, claimed={f.claimed_at_kills}) "
                    f"restarts={len(f.restarts)} (median {f.median_restart:.1f}s, "
                    f"slowest {f.slowest_restart:.1f}s) load<={f.load:.1f}\n"
                )

    async def settle(self) -> None:
        """Until every service is ready again after the last kills."""
        for n in range(len(self.services)):
            await self._ready(n)

    async def _ready(self, n: int) -> None:
        """Until replica ``n`` answers ``/readyz``; its start's time to ready is recorded."""
        if n not in self.ready:
            await self.services[n].wait_ready(timeout=READY_TIMEOUT)
            self._mark_ready(n)

    def _mark_ready(self, n: int) -> None:
        if n not in self.ready:
            self.ready.add(n)
            self.figures.restarts.append(time.monotonic() - self.services[n].started_at)


async def run_ledger(
    tmp_path: Path, plan: Plan, store: str | None = None
) -> tuple[Figures, list[Service], Downstream, Sender]:
    """Run the whole scenario on SQLite, or on the PostgreSQL database ``store`` with
    ``plan.replicas`` services; the caller checks the figures and the store."""
    downstream = Downstream(plan.latency, random.Random(plan.seed + 1))
    figures = Figures()
    probe: StoreProbe = (
        SQLiteProbe(tmp_path / "data" / "jobhook.db") if store is None else PostgresProbe(store)
    )
    async with serving(downstream) as target:
        config = write_config(tmp_path, target, plan, store)
        suffix = [""] if plan.replicas == 1 else [f"-{n}" for n in range(plan.replicas)]
        services = [Service(config, tmp_path / f"service{s}.log", level=plan.log_level)
                    for s in suffix]  # fmt: skip
        sender = Sender(services, plan, random.Random(plan.seed + 2))
        stop_sending = asyncio.Event()
        started = time.monotonic()
        sending: asyncio.Task[None] | None = None
        try:
            for service in services:
                service.start()
            for service in services:
                await service.wait_ready(timeout=READY_TIMEOUT)
            sending = asyncio.create_task(sender.run(stop_sending, give_up_after=120.0))
            killer = Killer(services, plan, probe, figures, tmp_path / "ledger.progress")
            await killer.run()
            await killer.settle()
            await asyncio.sleep(1.0)  # the last services take webhooks for a while, unkilled
            stop_sending.set()
            await sending
            figures.seconds = time.monotonic() - started
            with contextlib.suppress(TimeoutError):  # what is still missing then is lost
                async with asyncio.timeout(plan.drain_timeout):
                    # Until every handler got its call and the store has recorded every
                    # outcome: a call made just before a kill is redone after its lease.
                    while downstream.missing(sender.acked) or await probe.dispatches_in(
                        "pending", "running"
                    ):
                        await asyncio.sleep(0.2)
            for service in services:
                await service.stop()
            figures.wall = time.monotonic() - started
        finally:
            stop_sending.set()
            if sending is not None and not sending.done():  # the run was cut short
                sending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sending
            for service in services:
                service.close()
    figures.offered = plan.rate
    figures.webhooks = sender.created
    figures.attempts = sender.attempts
    figures.acknowledged = len(sender.acked)
    figures.unacknowledged = sender.created - len(sender.acked)
    figures.statuses = dict(sender.statuses)
    figures.transport_errors = sender.transport_errors
    figures.handler_calls = sum(sum(c.values()) for c in downstream.calls.values())
    figures.lost = downstream.missing(sender.acked)
    figures.delivered = len(sender.acked) * len(HANDLERS) - figures.lost
    figures.duplicates = sum(n - 1 for c in downstream.calls.values() for n in c.values() if n > 1)
    figures.stored = await probe.stored()
    return figures, services, downstream, sender


def stored_state(db: Path) -> tuple[set[str], dict[str, int]]:
    """The message ids the store holds, and its dispatches counted by state."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        messages = {row[0] for row in conn.execute("SELECT message_id FROM deliveries")}
        states = dict(conn.execute("SELECT state, count(*) FROM dispatches GROUP BY state"))
    return messages, states
