"""The audit trail's page, for admin tokens: who did what, when, from where, and the refused
attempts, newest first, filtered and paged like ``GET /audit``."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.responses import PlainTextResponse

from receiver.admin import audit, scope
from receiver.admin.tokens import Role
from receiver.console import web
from receiver.store.audit import AuditFilter

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

PAGE_SIZE = 100


@web.guarded
async def audit_page(request: Request) -> Response:
    who = request.state.principal
    if not who.may(Role.ADMIN):
        await audit.refused(request, who, "console_audit", "forbidden")
        return PlainTextResponse("the audit trail needs a token with the 'admin' role", 403)
    q = request.query_params
    token, action = q.get("token", "").strip(), q.get("action", "").strip()
    cursor = q.get("cursor", "")
    after_id = int(cursor) if cursor.isdigit() and len(cursor) < 20 else None
    f = AuditFilter(token=token or None, action=action or None, sources=scope.sources_of(request))
    rows = await request.app.state.store.audit_rows(f, after_id=after_id, limit=PAGE_SIZE)
    older = None
    if len(rows) == PAGE_SIZE:
        kept = [(k, v) for k, v in (("token", token), ("action", action)) if v]
        older = urlencode([*kept, ("cursor", str(rows[-1].id))])
    return web.render(request, "audit.html", rows=rows, token=token, action=action, older=older)
