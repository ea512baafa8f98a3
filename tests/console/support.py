"""Helpers of the console tests: a logged-in client, the CSRF token of a page, the payloads."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tests.adminsupport import TOKEN

if TYPE_CHECKING:
    import httpx

# Provider data an attacker controls: each must show as text, never run or link.
XSS = {
    "script": "<script>alert(1)</script>",
    "attr": '"><img src=x onerror=alert(1)>',
    "url": "javascript:alert(1)",
}
PAGES = ["/ui/", "/ui/jobs", "/ui/jobs/reducto/job-1", "/ui/dead", "/ui/overview", "/ui/live",
         "/ui/static/console.css", "/ui/static/console.js", "/ui/nowhere"]  # fmt: skip


async def log_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    return await client.post("/ui/login", data={"token": token, "next": "/ui/jobs"})


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, "the page has no CSRF token"
    return found.group(1)
