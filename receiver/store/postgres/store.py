"""The shared store for several replicas: PostgreSQL through an asyncpg pool.

Each write is one transaction on a pooled connection, except webhooks: their ingests are
grouped, a batch stored by one function call and one commit
(``receiver.store.postgres.group_commit``), a few batches in flight at once. Constraints and row
locks do what the SQLite store's single writer does: a message id is accepted once however many
replicas race for it, and claims use ``FOR UPDATE SKIP LOCKED`` so two replicas never lease the
same work. This module is PostgreSQL's connector; the store's logic is the engine's
(``receiver.store.engine``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

from receiver.store.connector import Connector
from receiver.store.engine import SQLEngine
from receiver.store.postgres import durability
from receiver.store.postgres import sql as pg_sql
from receiver.store.postgres.group_commit import IN_FLIGHT, PgGroupCommit
from receiver.store.postgres.migrations import migrate
from receiver.store.postgres.pool import PgPool, affected

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry
    from receiver.store.connector import Step
    from receiver.store.postgres.durability import Durability
    from receiver.store.postgres.pool import Conn

T = TypeVar("T")
DURABILITY_RECHECK_SECONDS = 30.0


class PostgresStore(SQLEngine):
    """PostgreSQL, for several replicas of one service sharing one database (the engine over
    ``PostgresConnector``)."""

    connector: PostgresConnector

    def __init__(self, url: str, **options: Any) -> None:
        """``options``: ``PostgresConnector``'s (pool sizes, timeout, synchronous replication)."""
        super().__init__(PostgresConnector(url, **options))

    def __repr__(self) -> str:
        return f"PostgresStore({self.connector.display_url!r})"

    @property
    def batching(self) -> PgGroupCommit:
        """Ingests are stored a batch at a time (``receiver.store.postgres.group_commit``)."""
        return self.connector.batching


class PostgresConnector(Connector):
    """One PostgreSQL database through an asyncpg pool."""

    dialect = pg_sql.DIALECT

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        require_synchronous_replication: bool = False,
    ) -> None:
        self._db = PgPool(url, min_size=min_size, max_size=max_size, timeout=timeout)
        self._require_sync = require_synchronous_replication
        self._durability: Durability | None = None
        self._durability_at = 0.0
        self._sql = self.dialect.sql
        self.batching = PgGroupCommit(self._db, in_flight=min(IN_FLIGHT, max_size))

    @property
    def display_url(self) -> str:
        return self._db.display_url

    def __repr__(self) -> str:
        return f"PostgresConnector({self._db.display_url!r})"

    async def open(self) -> None:
        await self._db.open(self._setup)
        self.batching.start()

    async def _setup(self, conn: Conn) -> None:
        await migrate(conn)
        self._durability = await durability.read(conn)
        self._durability_at = time.monotonic()
        durability.report(self._durability, require_synchronous=self._require_sync)

    async def durability(self) -> dict[str, object] | None:
        # Read again now and then: after a failover the server and its standbys have changed.
        if time.monotonic() - self._durability_at > DURABILITY_RECHECK_SECONDS:
            found = await self._db.transaction(durability.read)
            if found != self._durability:
                durability.report(found, require_synchronous=False)
            self._durability, self._durability_at = found, time.monotonic()
        return None if self._durability is None else self._durability.as_json()

    async def close(self) -> None:
        await self.batching.stop()
        await self._db.close()

    async def ping(self) -> None:
        await self._db.fetch("SELECT 1")

    async def read(
        self, query: str, params: Sequence[Any] = (), *, in_commit_order: bool = False
    ) -> list[Any]:
        if not in_commit_order:
            return await self._db.fetch(self._sql(query), *params)

        async def ordered(conn: Conn) -> list[Any]:
            await conn.execute(pg_sql.LOCK_COMPLETIONS)  # none in flight below what we read
            return list(await conn.fetch(self._sql(query), *params))

        return await self._db.transaction(ordered)

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        return await self._db.execute(self._sql(query), *params)

    async def write(self, program: Callable[..., Generator[Step, Any, T]], *args: Any) -> T:
        async def run(conn: Conn) -> T:
            steps = program(*args)
            answer: Any = None
            try:
                while True:
                    answer = await self._step(conn, steps.send(answer))
            except StopIteration as done:
                result: T = done.value
                return result

        return await self._db.transaction(run)

    async def _step(self, conn: Conn, step: Step) -> Any:
        query, params, want = self._sql(step.query), step.params, step.want
        if want == "many":
            await conn.executemany(query, params)
            return None
        if want == "count":
            return affected(await conn.execute(query, *params))
        if want == "rows":
            return await conn.fetch(query, *params)
        if want == "row":
            return await conn.fetchrow(query, *params)
        if want == "value":
            return await conn.fetchval(query, *params)
        await conn.execute(query, *params)
        return None

    async def ingest(
        self, event: Event, handlers: Sequence[str], resolve: bool, audit: AuditEntry | None
    ) -> IngestResult:
        if audit is not None:  # an admin call's: its own transaction, with its audit row
            return await self.batching.ingest_alone(event, handlers, resolve, audit)
        return await self.batching.ingest(event, handlers, resolve)
