"""The audit trail: one row per admin call that changes something, and refused attempts
counted per client address, reason and hour.

An effect that is one store transaction (tracking a job, replaying one job's deliveries) writes
its row, finished (``done``), in that same transaction: the effect cannot stand without it. A
call that fails before or during its effect gets its row written whole afterwards, with that
outcome. An effect that spans many transactions or leaves the machine (bulk replay, reprocess)
has its row written before it (``outcome = 'started'``) and finished after it with the outcome
and how many jobs it touched. A refusal is an upsert on its aggregation key: a flood of them
from one address adds to one row's ``attempts`` instead of adding rows. Both backends run these
statements (PostgreSQL after ``numbered``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

REFUSAL_BUCKET_SECONDS = 3600
"""Refusals from one address for one reason are counted on one row per this many seconds."""
COLUMNS = (
    "id, at, last_at, token, role, action, target, source, job_id, jobs, outcome, ref, "
    "request_id, client, attempts"
)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """What an admin call is, as it starts (or as it is refused), or as it ended when it is
    written whole (``outcome`` and ``jobs`` then say how)."""

    at: float
    token: str
    role: str
    action: str
    target: str
    request_id: str
    client: str
    source: str | None = None
    job_id: str | None = None
    ref: str | None = None
    outcome: str = "started"
    jobs: int | None = None


def done(entry: AuditEntry, jobs: int) -> AuditEntry:
    """``entry`` as its effect's transaction writes it: ``ok``, having touched ``jobs``."""
    return dataclasses.replace(entry, outcome="ok", jobs=jobs)


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit record: an action (``attempts`` 1) or refusals aggregated (``attempts`` n,
    between ``at`` and ``last_at``)."""

    id: int
    at: float
    last_at: float
    token: str
    role: str
    action: str
    target: str
    source: str | None
    job_id: str | None
    jobs: int | None
    outcome: str
    ref: str | None
    request_id: str
    client: str
    attempts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "at": self.at, "last_at": self.last_at, "token": self.token,
            "role": self.role, "action": self.action, "target": self.target,
            "jobs": self.jobs, "outcome": self.outcome, "ref": self.ref,
            "request_id": self.request_id, "client": self.client, "attempts": self.attempts,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which audit rows ``GET /audit`` lists: every field optional, combined with AND."""

    token: str | None = None
    action: str | None = None
    after: float | None = None
    before: float | None = None
    sources: tuple[str, ...] | None = None
    """Only rows that name a job of these sources (a token limited to them reads these)."""


INSERT = """INSERT INTO audit (at, last_at, token, role, action, target, source, job_id,
    outcome, jobs, ref, request_id, client)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id"""
FINISH = """UPDATE audit SET outcome = ?, jobs = ?, ref = COALESCE(?, ref), last_at = ?
WHERE id = ?"""
REFUSED = """INSERT INTO audit (at, last_at, token, role, action, target, outcome, request_id,
    client, refusal)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (refusal) DO UPDATE SET attempts = audit.attempts + 1, last_at = excluded.last_at,
    request_id = excluded.request_id"""
PURGE = """DELETE FROM audit WHERE id IN (
    SELECT a.id FROM audit a
    WHERE a.last_at < ?
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.source = a.source AND j.job_id = a.job_id)
    ORDER BY a.id LIMIT ?)"""


def insert_params(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.at, entry.at, entry.token, entry.role, entry.action, entry.target,
            entry.source, entry.job_id, entry.outcome, entry.jobs, entry.ref, entry.request_id,
            entry.client)  # fmt: skip


def finish_params(
    audit_id: int, outcome: str, jobs: int | None, ref: str | None, now: float
) -> tuple[Any, ...]:
    return (outcome, jobs, ref, now, audit_id)


def refused_params(entry: AuditEntry, reason: str) -> tuple[Any, ...]:
    """The refusal's row; its key holds the hour, address, reason, token and action."""
    bucket = int(entry.at // REFUSAL_BUCKET_SECONDS)
    key = "\x1f".join((str(bucket), entry.client, reason, entry.token, entry.action))
    return (entry.at, entry.at, entry.token, entry.role, entry.action, entry.target, reason,
            entry.request_id, entry.client, key)  # fmt: skip


def list_query(f: AuditFilter, after_id: int | None, limit: int) -> tuple[str, list[Any]]:
    """Newest first, from before ``after_id`` (the previous page's last id) when given."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (
        ("token = ?", f.token),
        ("action = ?", f.action),
        ("last_at >= ?", f.after),
        ("at < ?", f.before),
        ("id < ?", after_id),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    if f.sources is not None:
        clauses.append(f"source IN ({','.join('?' * len(f.sources))})" if f.sources else "1 = 0")
        params += f.sources
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    return f"SELECT {COLUMNS} FROM audit {where} ORDER BY id DESC LIMIT ?", [*params, limit]  # noqa: S608


def row(values: Sequence[Any]) -> AuditRow:
    return AuditRow(*values)
