"""The console's guard over a real server and SQLite file: login, session cookie, CSRF,
security headers, escaping and no secret in any page."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.admin.tokens import Keyring, Principal, Role
from receiver.console.session import COOKIE, Sessions
from receiver.secret import Secret
from receiver.service.app import create_app
from tests.adminsupport import TOKEN, admin_settings, deliver
from tests.console.support import PAGES, XSS, csrf_of, log_in
from tests.support import SECRET, live_server

ADMIN = Principal("admin", Role.ADMIN)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "job-1", **XSS)
        yield c


async def test_without_an_admin_token_there_is_no_console(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path, token=None))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        for path in ("/ui/", "/ui/login", "/ui/jobs"):
            assert (await c.get(path)).status_code == 404, path


@pytest.mark.parametrize("cookie", [None, "", "v1.9999999999.abc.0000", "garbage"])
async def test_every_page_and_asset_redirects_to_login_without_a_valid_session(
    client: httpx.AsyncClient, cookie: str | None
) -> None:
    if cookie is not None:
        client.cookies.set(COOKIE, cookie, path="/ui")
    for path in PAGES:
        response = await client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/ui/login?next="), path
    for path in ("/ui/jobs/reducto/job-1/replay", "/ui/dead/replay", "/ui/logout"):
        response = await client.post(path, data={"csrf": "x"})
        assert response.status_code == 303, path


async def test_a_wrong_token_is_refused_and_sets_no_cookie(client: httpx.AsyncClient) -> None:
    response = await log_in(client, TOKEN + "x")
    assert response.status_code == 401
    assert "not one of this service&#39;s tokens" in response.text
    assert COOKIE not in response.cookies
    assert (await client.get("/ui/jobs")).status_code == 303


async def test_login_sets_a_strict_httponly_expiring_cookie_without_the_token(
    client: httpx.AsyncClient,
) -> None:
    response = await log_in(client)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/jobs"
    header = response.headers["set-cookie"]
    assert "HttpOnly" in header
    assert "SameSite=strict" in header or "SameSite=Strict" in header
    assert "Max-Age=43200" in header
    assert "Secure" not in header  # plain http on loopback; https gets Secure
    assert TOKEN not in header
    assert (await client.get("/ui/jobs")).status_code == 200


def _sessions(secret: str) -> Sessions:
    return Sessions(Keyring([(ADMIN, [Secret(secret)])]))


def test_a_cookie_is_accepted_by_a_replica_with_the_same_token_only() -> None:
    one, two, other = _sessions(TOKEN), _sessions(TOKEN), _sessions("t2")
    cookie = one.new_cookie(ADMIN)
    assert two.check(cookie) is not None
    assert other.check(cookie) is None
    assert one.check(one.new_cookie(ADMIN, now=time.time() - 13 * 3600)) is None  # expired
    tampered = cookie.replace("v2.", "v2.9", 1)
    assert one.check(tampered) is None


async def test_login_only_redirects_inside_the_console(client: httpx.AsyncClient) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/ui//evil.example", "/jobs"):
        response = await client.post("/ui/login", data={"token": TOKEN, "next": target})
        assert response.headers["location"] == "/ui/", target


async def test_every_page_has_the_security_headers(client: httpx.AsyncClient) -> None:
    await log_in(client)
    for path in [*PAGES, "/ui/login"]:
        response = await client.get(path)
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp, path
        assert "unsafe-inline" not in csp, path
        assert "frame-ancestors 'none'" in csp, path
        assert response.headers["x-frame-options"] == "DENY", path
        assert response.headers["x-content-type-options"] == "nosniff", path


async def test_state_changing_forms_need_the_sessions_csrf_token(
    client: httpx.AsyncClient,
) -> None:
    await log_in(client)
    for path in ("/ui/jobs/reducto/job-1/replay", "/ui/dead/replay", "/ui/logout"):
        assert (await client.post(path)).status_code == 403, path
        assert (await client.post(path, data={"csrf": "0" * 32})).status_code == 403, path
    assert (await client.get("/ui/jobs")).status_code == 200  # still logged in
    token = csrf_of((await client.get("/ui/jobs")).text)
    response = await client.post("/ui/jobs/reducto/job-1/replay", data={"csrf": token})
    assert response.status_code == 303
    assert "done=replayed" in response.headers["location"]


async def test_logout_ends_the_session(client: httpx.AsyncClient) -> None:
    await log_in(client)
    token = csrf_of((await client.get("/ui/jobs")).text)
    response = await client.post("/ui/logout", data={"csrf": token})
    assert response.status_code == 303
    assert (await client.get("/ui/jobs")).status_code == 303


async def test_provider_data_is_escaped_on_every_page(client: httpx.AsyncClient) -> None:
    await log_in(client)
    for path in PAGES[:6]:
        html = (await client.get(path, follow_redirects=True)).text
        assert "<script>alert" not in html, path
        assert "<img src=x" not in html, path
        assert 'href="javascript:' not in html, path
    job = (await client.get("/ui/jobs/reducto/job-1")).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in job
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in job


async def test_no_secret_appears_in_any_page(client: httpx.AsyncClient) -> None:
    await log_in(client)
    secret_text = SECRET.removeprefix("whsec_")
    for path in [*PAGES, "/ui/login", "/ui/overview?period=7d", "/ui/jobs?state=failed"]:
        text = (await client.get(path, follow_redirects=True)).text
        assert TOKEN not in text, path
        assert secret_text not in text, path


async def test_a_notice_comes_from_a_fixed_list_not_from_the_url(
    client: httpx.AsyncClient,
) -> None:
    await log_in(client)
    html = (await client.get("/ui/jobs?done=Your+session+expired,+go+to+evil")).text
    assert "evil" not in html.split("</header>")[1].split("<form")[0]
