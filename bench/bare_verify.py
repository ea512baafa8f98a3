"""The practical ceiling: bench.bare plus the svix verification every webhook needs.

``python -m bench.bare_verify PORT`` serves a bare Starlette endpoint (bench.bare's stack and
options) that reads the body, verifies its Svix signature with the svix library, as jobhook
does, and answers a small JSON; a bad signature gets a 401. Nothing is parsed or stored.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from svix.webhooks import Webhook, WebhookVerificationError

from bench.bare import ready, serve
from tests.support import SECRET

if TYPE_CHECKING:
    from starlette.requests import Request

WEBHOOK = Webhook(SECRET)


async def accept(request: Request) -> JSONResponse:
    body = await request.body()
    try:
        WEBHOOK.verify(body, request.headers)  # type: ignore[arg-type]
    except WebhookVerificationError:
        return JSONResponse({"error": "bad signature"}, status_code=401)
    return JSONResponse({"status": "accepted", "job_id": "bare", "state": "succeeded"})


app = Starlette(
    routes=[
        Route("/webhooks/{source}", accept, methods=["POST"]),
        Route("/readyz", ready, methods=["GET"]),
    ]
)


def main() -> None:
    serve(app, int(sys.argv[1]))


if __name__ == "__main__":
    main()
