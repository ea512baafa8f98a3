"""A job's story for its page: everything the store knows happened to it, in time order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receiver.store.rows import AttemptRow, JobRow


@dataclass(frozen=True, slots=True)
class Step:
    """One line of the timeline: when (Unix seconds), what kind, what happened."""

    at: float | None
    kind: str
    title: str
    detail: str = ""
    status: str = ""
    """A word for the badge: ``ok``, ``bad``, ``wait`` or empty."""
    extra: str = ""
    retry_at: float | None = None
    """When a failed attempt is tried again."""


def build(detail: dict[str, Any], job: JobRow | None, attempts: list[AttemptRow]) -> list[Step]:
    """The timeline of ``detail`` (``GET /jobs/{source}/{job_id}``'s document) and its
    attempts, oldest first."""
    doc = detail["job"]
    steps = [Step(seconds(doc["created_at"]), "job", "Job known", "(first news of it)")]
    completion = detail["completion"]
    completed_at = seconds(completion["created_at"]) if completion else None
    for d in detail["deliveries"]:
        received = seconds(d["received_at"])
        repeat = completed_at is not None and received is not None and received > completed_at
        steps.append(
            Step(
                received,
                "webhook",
                "Webhook delivered",
                f"message {d['message_id']}: {d['provider_status']} ({d['state']})",
                "wait" if repeat else "ok",
                "after the completion: no new dispatch" if repeat else "",
            )
        )
    if job is not None and job.poll_attempts:
        steps.append(
            Step(
                job.last_news_at,
                "poll",
                "Poller checks",
                f"{job.poll_attempts} job API check(s) so far; last news at this time",
            )
        )
    if completion:
        steps += _completion_steps(completion)
    for a, n, probe in numbered(attempts):
        status = {"succeeded": "ok", "retry": "wait", "dead": "bad"}.get(a.outcome, "")
        text = a.outcome if a.error is None else f"{a.outcome}: {a.error}"
        title = f"Handler {a.handler}, attempt {n}" + (" (circuit probe)" if probe else "")
        steps.append(
            Step(a.ended_at, "attempt", title, text, status, a.error_code or "",
                 a.next_attempt_at if a.outcome == "retry" else None)
        )  # fmt: skip
    return sorted(steps, key=lambda s: (s.at is None, s.at or 0.0))


def numbered(attempts: list[AttemptRow]) -> list[tuple[AttemptRow, int, bool]]:
    """Each attempt with the number the page shows (1-based, counting every try, a circuit's
    probe included, from the delivery's start or its last replay) and whether it was a probe.

    The store's own count skips probes (they spend no attempt) and restarts at a replay, so a
    probe right after a replay is its attempt 0; the page counts tries instead. A replay only
    follows a delivery that ended (dead or succeeded); a probe repeats the previous count.
    """
    shown: list[tuple[AttemptRow, int, bool]] = []
    last: dict[str, tuple[AttemptRow, int]] = {}
    for a in attempts:
        before = last.get(a.handler)
        restart = before is None or before[0].outcome in ("dead", "succeeded")
        n = 1 if restart or before is None else before[1] + 1
        probe = a.attempt == 0 or (not restart and before is not None
                                   and a.attempt == before[0].attempt)  # fmt: skip
        shown.append((a, n, probe))
        last[a.handler] = (a, n)
    return shown


def tries(attempts: list[AttemptRow], handler: str, state: str) -> int:
    """How many tries the page counts for ``handler``'s delivery now (as ``numbered``): none
    yet when it is waiting again after a replay."""
    mine = [n for a, n, _ in numbered(attempts) if a.handler == handler]
    ended = [a for a in attempts if a.handler == handler]
    if not mine:
        return 0
    if state in ("pending", "running") and ended[-1].outcome in ("dead", "succeeded"):
        return 0
    return mine[-1]


def seconds(text: str | None) -> float | None:
    """An ISO 8601 time of the admin API's documents as Unix seconds."""
    return None if text is None else datetime.fromisoformat(text).timestamp()


def _completion_steps(c: dict[str, Any]) -> list[Step]:
    failed = c["state"] != "succeeded"
    at = seconds(c["created_at"])
    after = None if at is None else at + 1e-6  # the fetch follows the completion
    if c.get("resolved_at") is not None and c["phase"] != "resolving":
        after = seconds(c["resolved_at"])
    steps = [
        Step(at, "completion", "Completion recorded",
             f"{c['state']} ({c['provider_status']})", "bad" if failed else "ok")
    ]  # fmt: skip
    result = c["result"]
    if c["phase"] == "resolving":
        tries = f"{c['resolve_attempts']} attempt(s) so far"
        steps.append(Step(after, "fetch", "Confirming and fetching the result", tries, "wait",
                          c["error"] or ""))  # fmt: skip
    elif result is not None:
        size = f"{result['bytes']} bytes, sha256 {result['sha256']}"
        if c.get("resolve_seconds") is not None:
            size += f", in {c['resolve_seconds']:.3f} s"
        steps.append(Step(after, "fetch", "Result confirmed and fetched", size, "ok",
                          f"{c['resolve_attempts']} attempt(s)"))  # fmt: skip
    elif c["error"]:
        steps.append(Step(after, "fetch", "No result", c["error"], "bad"))
    return steps
