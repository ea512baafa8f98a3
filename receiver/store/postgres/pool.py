"""The PostgreSQL store's connections: an asyncpg pool whose failures all become one error.

Every asyncpg, socket or timeout failure is translated here, once, into StoreUnavailableError
(a webhook answers 503, ``/readyz`` too). A transaction that PostgreSQL rolls back to break a
deadlock or a serialization conflict is run again a few times first.

A connection goes back to the pool without asyncpg's reset query (``pg_advisory_unlock_all();
CLOSE ALL; UNLISTEN *; RESET ALL``, a round trip and four statements the server runs after
every transaction and read): the store keeps no state in a session (no ``SET``, ``LISTEN``,
cursor or session-level advisory lock; tests/store/test_pg_session.py checks its SQL), and a
transaction left open is still rolled back on release. One statement runs without ``BEGIN``
and ``COMMIT`` around it: PostgreSQL makes it a transaction of its own and answers only once it
has committed.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]
import structlog

from receiver.errors import StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")
Conn = Any
"""An ``asyncpg.Connection`` (asyncpg ships no type information)."""

log = structlog.get_logger(__name__)
# InternalClientError: what asyncpg raises on a connection the server has just terminated.
FAILURES = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)
TX_ATTEMPTS = 3

# PostgreSQL's text and jsonb cannot hold U+0000, which JSON (and so a webhook's metadata, or a
# provider's error text) may carry; refusing the write would answer 503 for ever and the sender
# would give up on the job. Such characters are stored as U+FFFD instead: the one place where
# the PostgreSQL store does not read back exactly what it was given (SQLite does).
REPLACEMENT = "\ufffd"
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def text_without_nul(value: str) -> str:
    return value.replace("\x00", REPLACEMENT) if "\x00" in value else value


def json_without_nul(value: str) -> str:
    """JSON text with every ``\\u0000`` escape (not an escaped backslash before ``u0000``)
    turned into ``\\ufffd``; a raw NUL cannot occur in JSON text."""
    return _JSON_NUL.sub(r"\1\\ufffd", value) if "\\u0000" in value else value


async def _keep_session(conn: Conn) -> None:
    """The pool's reset of a released connection: none beyond asyncpg's own rollback of a
    transaction left open (the module's docstring says why)."""


async def _init_connection(conn: Conn) -> None:
    await conn.set_type_codec(
        "text", schema="pg_catalog", encoder=text_without_nul, decoder=str, format="text"
    )
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=json_without_nul, decoder=str, format="text"
    )


def redact(url: str) -> str:
    """``url`` without its password (in the netloc or a query parameter), for logs and reprs."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    query = [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, True)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="*")))


def affected(status: str) -> int:
    """The row count of a command status such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])


class PgPool:
    """Pooled connections to one database: transactions and reads, failures translated."""

    def __init__(self, url: str, *, min_size: int, max_size: int, timeout: float) -> None:
        self._url = url
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._pool: Any = None

    def __repr__(self) -> str:
        return f"PgPool({self.display_url!r})"

    @property
    def display_url(self) -> str:
        """The database URL without its password."""
        return redact(self._url)

    async def open(self, setup: Callable[[Conn], Awaitable[None]]) -> None:
        """Connect, then run ``setup`` (the migrations) on one connection."""
        try:
            self._pool = await asyncpg.create_pool(
                self._url,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._timeout,
                command_timeout=30.0,
                init=_init_connection,
                reset=_keep_session,
            )
            async with self._pool.acquire(timeout=self._timeout) as conn:
                await setup(conn)
        except FAILURES as exc:
            await self.close()
            raise StoreUnavailableError(
                f"cannot open PostgreSQL store {redact(self._url)}: {_describe(exc)}"
            ) from exc
        except BaseException:  # setup refused the server (ConfigError): no pool left open
            await self.close()
            raise

    async def close(self) -> None:
        """Close every connection; ones still busy after the timeout are cut."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), self._timeout)
        except TimeoutError:
            pool.terminate()
        except FAILURES as exc:
            log.warning("store_close_failed", error=_describe(exc))

    def _opened(self) -> Any:
        if self._pool is None:
            raise StoreUnavailableError("the store is not open")
        return self._pool

    async def transaction(
        self, fn: Callable[[Conn], Awaitable[T]], *, one_statement: bool = False
    ) -> T:
        """Run ``fn`` in one transaction on one connection; a deadlock victim runs again.
        With ``one_statement`` (``fn`` sends exactly one), no ``BEGIN`` and ``COMMIT`` round
        trips: the statement is its own transaction, and its answer comes after its commit."""
        pool = self._opened()
        for attempt in range(1, TX_ATTEMPTS + 1):
            try:
                async with pool.acquire(timeout=self._timeout) as conn:
                    if one_statement:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except asyncpg.TransactionRollbackError as exc:
                if attempt == TX_ATTEMPTS:
                    raise _unavailable("transaction", exc) from exc
                log.warning("store_transaction_retry", attempt=attempt, error=_describe(exc))
            except FAILURES as exc:
                raise _unavailable("transaction", exc) from exc
        raise AssertionError("unreachable")

    async def execute(self, query: str, *args: Any) -> int:
        """Run one statement in its own transaction; return how many rows it changed."""

        async def op(conn: Conn) -> int:
            return affected(await conn.execute(query, *args))

        return await self.transaction(op, one_statement=True)

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        """The rows of one read."""
        try:
            return list(await self._opened().fetch(query, *args, timeout=self._timeout))
        except FAILURES as exc:
            raise _unavailable("read", exc) from exc


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _unavailable(what: str, exc: BaseException) -> StoreUnavailableError:
    log.error("store_failed", operation=what, error=_describe(exc))
    return StoreUnavailableError(f"PostgreSQL {what} failed: {_describe(exc)}")
