"""Whether PostgreSQL's commit is as durable as jobhook's 2xx promises.

jobhook answers 2xx once PostgreSQL says COMMIT. With asynchronous streaming replication a
failover to a standby can drop commits the old primary had already acknowledged; with
``synchronous_commit = off`` or ``fsync = off`` a crash of the server alone can. The check reads
the session's settings and ``pg_stat_replication`` at startup: the finding is logged (a warning
when acknowledged commits are at risk), shown in ``/readyz``, and with
``[store] require_synchronous_replication = true`` a risky setup refuses to start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from receiver.store.postgres.pool import Conn

log = structlog.get_logger(__name__)

# Commits wait for the standbys named in synchronous_standby_names to flush (on) or apply
# (remote_apply) them; remote_write waits only until a standby has them in memory.
_WAITS_FOR_FLUSH = ("on", "remote_apply")

SETTINGS = """
SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
       current_setting('fsync')
"""
# Visible to any role (the details of each row need pg_read_all_stats; the count does not).
STANDBYS = "SELECT count(*) FROM pg_stat_replication"


@dataclass(frozen=True, slots=True)
class Durability:
    """What a 2xx rests on: ``synchronous``, ``asynchronous``, ``single`` server, ``unknown``."""

    mode: str
    synchronous_commit: str
    synchronous_standby_names: str
    standbys: int | None
    """Standbys streaming from this server, as pg_stat_replication shows them (None: unread)."""
    risk: str | None
    """Why acknowledged commits may be lost, or None."""

    def as_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "synchronous_commit": self.synchronous_commit,
            "synchronous_standby_names": self.synchronous_standby_names,
            "standbys": self.standbys,
            "risk": self.risk,
        }


def assess(commit: str, names: str, fsync: str, standbys: int | None) -> Durability:
    """The finding for these settings and this many visible standbys."""
    if fsync != "on":
        mode, risk = "unknown", "fsync is off: a crash of the server can lose acknowledged commits"
    elif commit == "off":
        mode, risk = (
            "unknown",
            "synchronous_commit is off: commits are acknowledged before they are on disk",
        )
    elif names.strip() and commit in _WAITS_FOR_FLUSH:
        mode, risk = "synchronous", None
    elif names.strip() and commit == "remote_write":
        mode, risk = (
            "synchronous",
            "synchronous_commit is remote_write: a standby may hold an acknowledged commit "
            "only in memory; use on or remote_apply",
        )
    elif standbys:
        mode, risk = (
            "asynchronous",
            f"{standbys} standby(s) replicate asynchronously (synchronous_standby_names is "
            "empty or synchronous_commit is local): a failover can lose acknowledged commits",
        )
    elif standbys == 0:
        mode, risk = "single", None
    else:
        mode, risk = "unknown", None
    return Durability(mode, commit, names, standbys, risk)


async def read(conn: Conn) -> Durability:
    """The finding for the server ``conn`` is connected to."""
    commit, names, fsync = (str(v) for v in await conn.fetchrow(SETTINGS))
    standbys: int | None
    try:
        standbys = int(await conn.fetchval(STANDBYS))
    except Exception as exc:  # a managed service may hide the view: say so, keep going
        log.warning("store_replication_unreadable", error=str(exc) or type(exc).__name__)
        standbys = None
    return assess(commit, names, fsync, standbys)


def report(found: Durability, *, require_synchronous: bool) -> None:
    """Log the finding (a warning when commits are at risk); with ``require_synchronous``,
    refuse anything but synchronous replication that waits for a flush."""
    fields: dict[str, Any] = found.as_json()
    if found.risk is not None:
        log.warning("store_durability_at_risk", **fields)
    elif found.mode == "single":
        # A managed service may replicate below PostgreSQL (storage level), invisible here.
        log.info("store_durability", **fields, note="no standby visible in pg_stat_replication")
    else:
        log.info("store_durability", **fields)
    if require_synchronous and (found.mode != "synchronous" or found.risk is not None):
        raise ConfigError(
            "store.require_synchronous_replication: the PostgreSQL server does not make commits "
            "wait for a synchronous standby (set synchronous_standby_names and "
            "synchronous_commit = on or remote_apply); found: "
            f"mode={found.mode}, synchronous_commit={found.synchronous_commit}, "
            f"standbys={found.standbys}" + (f"; {found.risk}" if found.risk else "")
        )
