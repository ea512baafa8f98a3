"""One circuit per handler, in the store so every replica sees the same one.

``closed``: deliveries are claimed as usual. ``circuit_failures`` consecutive failed attempts
open it: its dispatches are not claimed (so they spend no attempt) until ``retry_at``, the end
of the cool-down. Then one claimer turns it ``half_open`` and takes one due dispatch as the
probe, without counting an attempt; the probe's success closes the circuit, its failure opens it
for another cool-down. A probe whose replica died is retried when its lease (``retry_at``) ends.
Both backends run these statements (PostgreSQL after ``numbered``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import codec
from receiver.store.rows import CircuitRow

if TYPE_CHECKING:
    from collections.abc import Sequence

# handler, threshold, opened_at, retry_at, updated_at, threshold x3 (numbered() has no repeats)
FAILED = """
INSERT INTO circuits AS k (handler, state, failures, opened_at, retry_at, updated_at)
VALUES (?, CASE WHEN ? <= 1 THEN 'open' ELSE 'closed' END, 1, ?, ?, ?)
ON CONFLICT (handler) DO UPDATE SET
    failures = k.failures + 1,
    state = CASE WHEN k.state <> 'closed' OR k.failures + 1 >= ? THEN 'open' ELSE 'closed' END,
    opened_at = CASE WHEN k.state = 'closed' AND k.failures + 1 >= ?
                     THEN excluded.opened_at ELSE k.opened_at END,
    retry_at = CASE WHEN k.state <> 'closed' OR k.failures + 1 >= ?
                    THEN excluded.retry_at ELSE NULL END,
    updated_at = excluded.updated_at
RETURNING state
"""

SUCCEEDED = """
UPDATE circuits SET state = 'closed', failures = 0, opened_at = NULL, retry_at = NULL,
    updated_at = ?
WHERE handler = ? AND (state <> 'closed' OR failures > 0)
"""

# An operator replayed a delivery: an open circuit lets its probe through now, not at the end of
# its cool-down (a half-open one's probe is already out), and its held deliveries are due now so
# the probe has one to take (the circuit still lets only the probe through). now, handler, now,
# handler; then now, now, handler, now.
PROBE_DUE = """
UPDATE dispatches SET next_attempt_at = ?
WHERE handler = ? AND state = 'pending' AND next_attempt_at > ?
  AND EXISTS (SELECT 1 FROM circuits k WHERE k.handler = ? AND k.state = 'open')
"""
PROBE_NOW = """
UPDATE circuits SET retry_at = ?, updated_at = ?
WHERE handler = ? AND state = 'open' AND retry_at > ?
"""

LIST = "SELECT handler, state, failures, opened_at, retry_at FROM circuits ORDER BY handler"

# The cool-down (or a dead probe's lease) is over: this claimer probes. Row locks make one win.
TAKE_PROBES = """
UPDATE circuits SET state = 'half_open', retry_at = ?, updated_at = ?
WHERE state <> 'closed' AND retry_at <= ?
RETURNING handler
"""

# The probe: one due dispatch of the handler, claimed without spending an attempt.
CLAIM_PROBE = f"""
UPDATE dispatches SET state = 'running', lease_owner = ?, lease_until = ?, updated_at = ?
WHERE id IN (
    SELECT d.id FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready' AND d.handler = ?
      AND ((d.state = 'pending' AND d.next_attempt_at <= ?)
           OR (d.state = 'running' AND d.lease_until < ?))
    ORDER BY d.next_attempt_at LIMIT 1 /*pg: FOR UPDATE OF d SKIP LOCKED */)
RETURNING {codec.DISPATCH_COLUMNS}
"""  # noqa: S608

# Nothing to probe with yet: open again until the handler's earliest due dispatch.
NO_PROBE = """
UPDATE circuits SET state = 'open', retry_at = coalesce((
    SELECT min(d.next_attempt_at) FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE d.handler = ? AND c.phase = 'ready' AND d.state = 'pending'), ?)
WHERE handler = ? AND state = 'half_open'
"""


def failed_params(handler: str, threshold: int, cooldown: float, now: float) -> tuple[Any, ...]:
    return (handler, threshold, now, now + cooldown, now, threshold, threshold, threshold)


def circuit_row(r: Sequence[Any]) -> CircuitRow:
    return CircuitRow(r[0], r[1], r[2], r[3], r[4])
