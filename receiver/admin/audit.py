"""Recording admin calls in the audit trail, and ``GET /audit`` to read it.

A call whose effect is one store transaction (``IN_EFFECT``: tracking a job, replaying one
job's deliveries) hands its row to the store method that makes the effect (``pending``), which
writes it finished in that transaction, so the effect cannot stand without its row; when the
call ends without that (refused before its effect, or the effect failed and was rolled back),
its row is written here, whole, with that outcome. Any other action's row is written before
the call does anything (a store that cannot write it refuses the call with 503: no effect goes
unrecorded) and finished after it with the outcome, the jobs it touched and its ``replay_id`` /
``reprocess_id``. Refusals (401, 403) are counted per address, reason and hour, without the
presented secret; a store that cannot count one still refuses the request.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

import structlog
from starlette.responses import JSONResponse

from receiver import jsontext
from receiver.admin import query as jobquery
from receiver.admin import scope
from receiver.errors import JobhookError, RejectedError
from receiver.store.audit import AuditEntry, AuditFilter

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.admin.tokens import Principal, Proxies
    from receiver.store import Store

log = structlog.get_logger("receiver.admin")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
MAX_TARGET = 2000
PAGE = 100
IN_EFFECT = frozenset({"track_job", "replay_job", "console_replay"})
"""Actions whose effect is one store transaction, which writes their row."""


def request_id(request: Request) -> str:
    """The caller's ``X-Request-Id`` when it is a plain token, else one made for this call."""
    found: str | None = getattr(request.state, "request_id", None)
    if found is None:
        given = request.headers.get("x-request-id", "")
        found = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        request.state.request_id = found
    return found


def client_of(request: Request) -> str:
    """The client's address, after the trusted-proxy rule."""
    proxies: Proxies | None = getattr(request.app.state, "proxies", None)
    if proxies is None:
        return request.client.host if request.client else "unknown"
    return proxies.client(request)


def call_id(request: Request) -> str:
    """The id a bulk call reports under (``replay_id``, ``reprocess_id``), known before the
    call runs so its audit row is keyed by it from the start."""
    found: str | None = getattr(request.state, "call_id", None)
    if found is None:
        found = request.state.call_id = uuid.uuid4().hex[:16]
    return found


def touched(request: Request, jobs: int) -> None:
    """How many jobs the call changed, for its audit row."""
    request.state.audit_jobs = jobs


def _store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def _text(value: str, limit: int = MAX_TARGET) -> str:
    """Storable text: a lone surrogate (JSON "\\ud800") escaped, at most ``limit`` characters."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def _entry(request: Request, who: Principal | None, action: str, target: str) -> AuditEntry:
    source = job_id = None
    if "job_id" in request.path_params:
        source, job_id = request.path_params["source"], request.path_params["job_id"]
    elif target.count("/") == 1 and not target.startswith("{"):
        source, _, job_id = target.partition("/")
    return AuditEntry(
        at=time.time(),
        token=who.name if who is not None else "",
        role=who.role.label if who is not None else "",
        action=action,
        target=_text(target),
        request_id=request_id(request),
        client=client_of(request),
        source=_text(source, 256) if source is not None else None,
        job_id=_text(job_id, 256) if job_id is not None else None,
        ref=getattr(request.state, "call_id", None),
    )


async def refused(request: Request, who: Principal | None, action: str, reason: str) -> None:
    """Count a refused call (``unauthorized`` or ``forbidden``) and its metric."""
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.admin_refused.labels(reason).inc()
    store = getattr(request.app.state, "store", None)
    if store is None:
        return
    outcome = "forbidden" if reason == "forbidden" else "unauthorized"
    try:
        await store.audit_refused(_entry(request, who, action, request.url.path), outcome)
    except JobhookError as exc:  # the refusal stands; only its record is missing
        log.error("audit_refusal_lost", action=action, error=str(exc))


def pending(request: Request) -> AuditEntry | None:
    """The row an ``IN_EFFECT`` call's store transaction is to write (None outside one)."""
    entry: AuditEntry | None = getattr(request.state, "audit_entry", None)
    return entry


def recorded(request: Request) -> None:
    """The store committed the effect, and with it the call's row: nothing is left to write."""
    request.state.audit_recorded = True


class _Ended:
    """How an audited call ended: ``failed`` until its answer (or its refusal) says more."""

    outcome = "failed"

    async def call(self, call: Any) -> Any:
        try:
            response = await call()
        except RejectedError as exc:
            self.outcome = _outcome(exc.status_code)
            raise
        self.outcome = _outcome(getattr(response, "status_code", 200))
        return response


def _outcome(status: int) -> str:
    if status == 403:
        return "forbidden"
    return "ok" if status < 400 else "rejected" if status < 500 else "failed"


async def run_audited(request: Request, who: Principal, action: str, target: str, call: Any) -> Any:
    """``await call()`` between its audit row's start and finish, or for an ``IN_EFFECT``
    action with its row written by its effect's transaction (``_run_in_effect``)."""
    store = _store(request)
    if action in IN_EFFECT:
        return await _run_in_effect(request, _entry(request, who, action, target), call)
    audit_id = await store.audit_start(_entry(request, who, action, target))
    request.state.audit_id = audit_id
    ended = _Ended()
    try:
        return await ended.call(call)
    finally:
        outcome = ended.outcome
        jobs = getattr(request.state, "audit_jobs", None)
        ref = getattr(request.state, "call_id", None)
        try:
            await store.audit_finish(audit_id, outcome, jobs=jobs, ref=ref, now=time.time())
        except JobhookError as exc:  # the row stays "started": its effect is still recorded
            log.error("audit_finish_lost", audit_id=audit_id, error=str(exc))


async def _run_in_effect(request: Request, entry: AuditEntry, call: Any) -> Any:
    """``await call()``, whose store transaction writes ``entry`` (``pending``, ``recorded``);
    if it ends without that, the row is written now with the outcome it had."""
    request.state.audit_entry = entry
    ended = _Ended()
    try:
        return await ended.call(call)
    finally:
        if not getattr(request.state, "audit_recorded", False):
            jobs = getattr(request.state, "audit_jobs", None)
            row = dataclasses.replace(entry, outcome=ended.outcome, jobs=jobs)
            try:
                await _store(request).audit_start(row)
            except JobhookError as exc:  # nothing stands unrecorded: the effect did not commit
                log.error(
                    "audit_row_lost", action=entry.action, outcome=ended.outcome, error=str(exc)
                )


async def target_of(request: Request) -> str | None:
    """What an admin POST acts on, from its path or body; None for a dry run (it changes
    nothing, so it is not recorded)."""
    if "job_id" in request.path_params:
        return f"{request.path_params['source']}/{request.path_params['job_id']}"
    body = await request.body()
    try:
        data = jsontext.loads(body) if body.strip() else {}
    except ValueError:
        return "(invalid body)"
    if not isinstance(data, dict):
        return "(invalid body)"
    if data.get("dry_run") is True:
        return None
    for key in ("replay_id", "reprocess_id"):
        if isinstance(data.get(key), str) and _REQUEST_ID.match(data[key]):
            request.state.call_id = data[key]
    if request.url.path in ("/jobs/replay", "/jobs/reprocess"):
        call_id(request)  # known before the call runs: its row is keyed by it from the start
    if request.url.path == "/jobs":
        return f"{data.get('source', '')}/{data.get('job_id', '')}"
    kept = {k: v for k, v in data.items() if k not in ("cursor", "replay_id", "reprocess_id")}
    return jsontext.dumps(kept) if kept else "{}"


async def list_audit(request: Request) -> JSONResponse:
    """``GET /audit``: filters ``token``, ``action``, ``after``, ``before``; ``cursor`` pages."""
    q = request.query_params
    after = jobquery.parse_time("after", q["after"]) if q.get("after") else None
    before = jobquery.parse_time("before", q["before"]) if q.get("before") else None
    limit = jobquery.parse_limit(q.get("limit"))
    cursor = q.get("cursor")
    if cursor is not None and not (cursor.isdigit() and len(cursor) < 20):
        raise jobquery.QueryError("invalid_query", "cursor is not one this service gave out")
    f = AuditFilter(token=q.get("token") or None, action=q.get("action") or None,
                    after=after, before=before, sources=scope.sources_of(request))  # fmt: skip
    rows = await _store(request).audit_rows(
        f, after_id=int(cursor) if cursor else None, limit=limit
    )
    following = str(rows[-1].id) if len(rows) == limit else None
    return JSONResponse({"entries": [r.to_json() for r in rows], "next_cursor": following})
