"""What a backend gives the store's engine: a connector, and the dialect its SQL is spoken in.

The engine (``receiver.store.engine``) holds the store's logic once, for every backend: which
statements a call runs, in what order, and what it makes of their rows. A backend's connector
only moves statements and rows: it opens and migrates its database, runs a read, runs one
statement as its own transaction, runs a write *program* as one transaction, and stores
webhooks through its own commit path (the hot path, where each backend batches its own way).

A program is a generator function of module level (``receiver.store.programs``): it yields
``Step``s and is sent each step's answer, so one algorithm drives a ``sqlite3`` connection in
SQLite's writer (synchronously, even in another process) and an asyncpg connection in a
PostgreSQL transaction (awaiting each step). Statements are the shared text
(``receiver.store.sql`` and the modules beside it, ``?`` placeholders); a connector's dialect
turns that text into its own once (``Dialect.sql``, cached), and keeps its own text for the
few statements where the two databases need different SQL, not only different words.
"""

from __future__ import annotations

import abc
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry

T = TypeVar("T")
Want = Literal["none", "count", "rows", "row", "value", "many"]


class Step(NamedTuple):
    """One statement of a program and what the program wants back: ``none``; ``count`` (rows
    changed); ``rows``; ``row`` (the first, or None); ``value`` (the first row's first column,
    or None); ``many`` (``params`` is a list of parameter rows, run once each, answer None)."""

    query: str
    params: Sequence[Any] = ()
    want: Want = "none"


OWN = "own: "


def own(name: str) -> str:
    """The name of a statement each dialect writes itself (``Dialect.own``): the shared SQL
    uses it where it would use the statement."""
    return OWN + name


_PG_ONLY = re.compile(r"/\*pg: (.*?) \*/", re.DOTALL)


class Dialect:
    """How one database speaks the shared SQL.

    Shared statements use ``?`` placeholders, ``greatest(a, b)`` for the larger of two values,
    and mark PostgreSQL's row locks as comments (``/*pg: FOR UPDATE OF d SKIP LOCKED */``),
    which SQLite (one writer, no row locks) leaves as they are. ``own`` maps a shared
    statement to this database's text where they differ in more than words (the claims, whose
    locking and planner hints differ), with the parameters in the same order.
    """

    name = "sql"
    bucket = "CAST({} / ? AS INTEGER)"
    """A time bucket's number: ``bucket.format(column)`` with the width as its parameter."""

    def __init__(self, own: Mapping[str, str] | None = None) -> None:
        self.own = dict(own or {})
        self.sql = functools.lru_cache(maxsize=512)(self._translate)

    def _translate(self, query: str) -> str:
        if query.startswith(OWN):
            return self.own[query]  # a KeyError here is a dialect without its own statement
        return self.translate(query)

    def translate(self, query: str) -> str:
        """The shared ``query`` in this dialect."""
        return query


class SQLiteDialect(Dialect):
    name = "sqlite"

    def translate(self, query: str) -> str:
        return query.replace("greatest(", "max(")


class PostgresDialect(Dialect):
    name = "postgresql"
    bucket = "floor({} / ?)"
    """PostgreSQL's CAST rounds, so floor."""

    def __init__(self, own: Mapping[str, str] | None = None, *, metadata: tuple[str, str]):
        super().__init__(own)
        self._metadata = metadata

    def translate(self, query: str) -> str:
        query = _PG_ONLY.sub(r"\1", query.replace(*self._metadata))
        return numbered(query)


_PLACEHOLDER = re.compile(r"\?")


def numbered(query: str) -> str:
    """``query`` with each ``?`` placeholder replaced by ``$1``, ``$2``, ... in order."""
    count = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(count)}", query)


@dataclass(frozen=True, slots=True)
class WalStats:
    """What a SQLite store's checkpoint thread counted since the store opened
    (``receiver.store.sqlite.checkpoint``), read at scrape time: its passes, the restarts of
    the write-ahead log, and the holds on the writers that each restart takes."""

    checkpoints: int
    """Passes that copied frames of the WAL back into the database file."""
    checkpoint_frames: int
    """Frames those passes copied."""
    checkpoint_seconds: float
    """Time spent in passes, those that found nothing to copy included."""
    restarts: int
    """Held passes that copied the whole WAL, so that the next write starts it over."""
    hold_bounds: tuple[float, ...]
    """The upper bounds, in seconds, of the holds' histogram buckets."""
    hold_buckets: tuple[int, ...]
    """Holds in each bucket (not cumulative), and last those above every bound."""
    hold_seconds: float
    """The holds' total time: from asking for the writes to be held to letting them go."""
    hold_frames: int
    """Frames the passes made under a hold copied: the work the waiting writes wait for."""
    hold_timeouts: int
    """Holds that gave up: the batch in flight did not commit in time (or the store closed)."""
    wal_frames: int
    """Frames in the WAL at the last pass."""
    wal_bytes: int
    """The WAL file's size: the longest it has been, since SQLite reuses it without
    truncating it."""


class Connector(abc.ABC):
    """One backend's database, as the engine uses it. Every method raises
    StoreUnavailableError when the database cannot read or commit."""

    dialect: Dialect

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish queued writes and disconnect."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailableError unless the database answers and can commit."""

    async def durability(self) -> dict[str, object] | None:
        """How durable a commit is beyond this server, or None where there is nothing to add."""
        return None

    def wal_stats(self) -> WalStats | None:
        """The checkpoint thread's figures (a SQLite store's), or None where there is none.
        Cheap and synchronous: read at every scrape of the metrics."""
        return None

    @abc.abstractmethod
    async def read(
        self, query: str, params: Sequence[Any] = (), *, in_commit_order: bool = False
    ) -> list[Any]:
        """The rows of one shared read statement. ``in_commit_order``: no row is read while a
        row of a lower id may still commit (the event stream resumes after the last id)."""

    @abc.abstractmethod
    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """One shared statement as one transaction; how many rows it changed."""

    @abc.abstractmethod
    async def write(self, program: Callable[..., Generator[Step, Any, T]], *args: Any) -> T:
        """``program(*args)`` as one transaction; what it returns once that commits.
        ``program`` is a module-level generator function of picklable arguments."""

    @abc.abstractmethod
    async def ingest(
        self, event: Event, handlers: Sequence[str], resolve: bool, audit: AuditEntry | None
    ) -> IngestResult:
        """Store one webhook's event through the backend's own commit path (``Engine.ingest``;
        with ``audit``, an admin call's, its finished audit row in the same transaction)."""
