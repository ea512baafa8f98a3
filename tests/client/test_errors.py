"""Each answer the admin API refuses with is one error of the client's tree, with the API's
code and message; transport trouble is TransportError; the token is never shown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from receiver.client import (
    ApiError,
    BadRequest,
    JobhookError,
    NotFound,
    ProtocolError,
    TransportError,
    Unauthorized,
)
from receiver.service.app import create_app
from tests.adminsupport import TOKEN, admin_settings
from tests.client.helpers import Both
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

# One service for the module: nothing here changes its state.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    settings = admin_settings(tmp_path_factory.mktemp("service"))
    async with live_server(create_app(settings)) as url:
        yield url


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    param: str = request.param
    return param


async def _raised(both: Both, method: str, *args: Any, **kwargs: Any) -> JobhookError:
    try:
        await getattr(both, method)(*args, **kwargs)
    except JobhookError as exc:
        return exc
    finally:
        await both.close()
    raise AssertionError(f"{method} raised nothing")


@pytest.mark.parametrize(
    ("call", "kind_of", "status", "code", "message"),
    [
        (("get", "reducto", "nope"), NotFound, 404, "unknown_job",
         "no job 'nope' of source 'reducto'"),
        (("track", "nowhere", "j"), NotFound, 404, "unknown_source", "no source named 'nowhere'"),
        (("track", "reducto", "j", {"pages": 0}), BadRequest, 400, "invalid_body",
         "pages: Input should be greater than or equal to 1"),
        (("page", {"state": "done"}), BadRequest, 400, "invalid_query",
         "state must be one of queued, running, succeeded, partial, failed, cancelled, expired"),
        (("stats", "1y"), BadRequest, 400, "invalid_query", "period must be one of 24h, 7d, 30d"),
        (("reprocess", "reducto", "j"), BadRequest, 422, "not_reprocessable", None),
    ],
    ids=["unknown-job", "unknown-source", "bad-body", "bad-filter", "bad-period",
         "not-reprocessable"],
)  # fmt: skip
async def test_an_api_refusal_is_its_error_with_the_apis_code_and_message(
    service: str, kind: str, call: tuple[Any, ...], kind_of: type[ApiError], status: int,
    code: str, message: str | None,
) -> None:  # fmt: skip
    method, *args = call
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    exc = await _raised(Both(kind, service), method, *args, **kwargs)
    assert type(exc) is kind_of
    assert isinstance(exc, ApiError)
    assert (exc.status, exc.code) == (status, code)
    if message is not None:
        assert exc.message == message
    assert str(exc) == f"{exc.message} ({status} {code})"


async def test_a_wrong_token_is_unauthorized_and_never_shown(service: str, kind: str) -> None:
    wrong = "not-the-token-8f2e"
    both = Both(kind, service, token=wrong)
    assert wrong not in repr(both.client)
    assert wrong not in str(both.client)
    assert wrong not in repr(vars(both.client))
    exc = await _raised(both, "get", "reducto", "j")
    assert isinstance(exc, Unauthorized)
    assert (exc.status, exc.code, exc.message) == (401, "unauthorized",
                                                  "a valid bearer token is required")  # fmt: skip
    for shown in (str(exc), repr(exc), repr(exc.args), str(exc.__cause__)):
        assert wrong not in shown
        assert TOKEN not in shown


async def test_no_token_says_how_to_give_one(service: str, kind: str) -> None:
    exc = await _raised(Both(kind, service, token=None), "stats")
    assert isinstance(exc, Unauthorized)
    assert exc.message == "no admin token given (pass token= or set JOBHOOK_ADMIN_TOKEN)"


async def test_a_service_without_the_admin_api_is_not_found_without_a_code(
    tmp_path: Path, kind: str
) -> None:
    async with live_server(create_app(admin_settings(tmp_path, token=None))) as url:
        exc = await _raised(Both(kind, url), "get", "reducto", "j")
    assert isinstance(exc, NotFound)
    assert (exc.status, exc.code) == (404, "")
    assert "no admin API there" in exc.message


async def test_nobody_listening_is_a_transport_error_naming_the_url(kind: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    exc = await _raised(Both(kind, url, token="t0ken-never-shown"), "stats")
    assert isinstance(exc, TransportError)
    assert (exc.url, exc.reason) == (url, "ConnectError")
    assert str(exc) == f"cannot reach {url} (ConnectError)"
    assert "t0ken-never-shown" not in repr(exc)


async def test_a_server_that_is_not_jobhook_is_a_protocol_error(kind: str) -> None:
    async def page(request: object) -> HTMLResponse:
        return HTMLResponse("<h1>hello</h1>")

    app = Starlette(routes=[Route("/jobs/stats", page)])
    async with live_server(app) as url:
        exc = await _raised(Both(kind, url), "stats")
    assert isinstance(exc, ProtocolError)
