"""The circuit methods of each store (``receiver.store.circuits`` has their statements)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import circuits, records
from receiver.store.pg_sql import numbered

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from receiver.store.pg_pool import Conn, PgPool
    from receiver.store.rows import CircuitRow, DispatchRow

_FAILED = numbered(circuits.FAILED)
_SUCCEEDED = numbered(circuits.SUCCEEDED)
_TAKE_PROBES = numbered(circuits.TAKE_PROBES)
_CLAIM_PROBE = numbered(
    circuits.CLAIM_PROBE.replace("LIMIT 1)", "LIMIT 1 FOR UPDATE OF d SKIP LOCKED)")
)
_NO_PROBE = numbered(circuits.NO_PROBE)
_PROBE_NOW = numbered(circuits.PROBE_NOW)
_PROBE_DUE = numbered(circuits.PROBE_DUE)


class SQLiteCircuits:
    """Circuits through the SQLite store's writer and reader."""

    if TYPE_CHECKING:

        async def _write_sync(self, fn: Callable[..., Any], *args: Any) -> Any: ...

        async def _read(self, query: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        params = circuits.failed_params(handler, threshold, cooldown, now)
        state: str = await self._write_sync(circuits.failed_sync, params)
        return state

    async def circuit_succeeded(self, handler: str, now: float) -> None:
        await self._write_sync(_execute, circuits.SUCCEEDED, (now, handler))

    async def circuit_probe_now(self, handler: str, now: float) -> None:
        await self._write_sync(circuits.probe_now_sync, handler, now)

    async def circuits(self) -> list[CircuitRow]:
        return [circuits.circuit_row(r) for r in await self._read(circuits.LIST)]


def _execute(db: Any, query: str, params: Sequence[Any]) -> None:
    db.execute(query, params)


class PostgresCircuits:
    """Circuits in the shared PostgreSQL store: every replica sees the same one."""

    _db: PgPool

    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        params = circuits.failed_params(handler, threshold, cooldown, now)
        rows = await self._db.transaction(lambda conn: conn.fetch(_FAILED, *params))
        state: str = rows[0][0]
        return state

    async def circuit_succeeded(self, handler: str, now: float) -> None:
        await self._db.execute(_SUCCEEDED, now, handler)

    async def circuit_probe_now(self, handler: str, now: float) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(_PROBE_DUE, now, handler, now, handler)
            await conn.execute(_PROBE_NOW, now, now, handler, now)

        await self._db.transaction(op)

    async def circuits(self) -> list[CircuitRow]:
        return [circuits.circuit_row(r) for r in await self._db.fetch(circuits.LIST)]


async def pg_probes(
    conn: Conn, owner: str, until: float, now: float, busy: Collection[str] = ()
) -> list[DispatchRow]:
    """Take the probes that are due, inside the claim's transaction; a ``busy`` handler's
    probe waits, its circuit open, until the handler has a free slot."""
    claimed: list[DispatchRow] = []
    for (handler,) in await conn.fetch(_TAKE_PROBES, until, now, now):
        row = None
        if handler not in busy:
            row = await conn.fetchrow(_CLAIM_PROBE, owner, until, now, handler, now, now)
        if row is None:
            await conn.execute(_NO_PROBE, handler, now, handler)
        else:
            claimed.append(records.dispatch_row(row))
    return claimed
