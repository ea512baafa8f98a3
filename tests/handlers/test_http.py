"""The http handler against a real loopback server that verifies Standard Webhooks signatures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from svix.webhooks import Webhook, WebhookVerificationError

from handlers.http import HttpHandler
from receiver.errors import DeliveryError, RetryableError
from receiver.secret import Secret
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from starlette.requests import Request

    from receiver.completion import Completion


@dataclass
class Receiver:
    """A downstream service: fails the first ``failures`` requests with 500, then accepts."""

    secret: str | None = SECRET
    failures: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        verified = None
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        self.seen.append({"body": body, "headers": headers, "verified": verified})
        if len(self.seen) <= self.failures:
            return PlainTextResponse("database is down " + "x" * 5000, status_code=500)
        return Response(status_code=204)

    async def slow(self, request: Request) -> Response:
        await self.release.wait()
        return Response(status_code=200)

    async def busy(self, request: Request) -> Response:
        return PlainTextResponse("slow down", status_code=429, headers={"retry-after": "7"})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hook", self.hook, methods=["POST"]),
                                 Route("/slow", self.slow, methods=["POST"]),
                                 Route("/busy", self.busy, methods=["POST"])])  # fmt: skip


async def test_fails_twice_with_500_then_succeeds_signed_with_a_stable_webhook_id(
    make_completion: Callable[..., Completion], result_file: Path
) -> None:
    receiver = Receiver(failures=2)
    completion = make_completion("job-42", result=result_file)
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=SECRET)
        await handler.start()
        try:
            for _ in range(2):
                with pytest.raises(RetryableError, match=r"answered 500: 'database is down x+'"):
                    await handler.handle(completion)
            await handler.handle(completion)
        finally:
            await handler.close()

    assert len(receiver.seen) == 3
    assert all(seen["verified"] for seen in receiver.seen)
    assert {seen["headers"]["webhook-id"] for seen in receiver.seen} == {completion.message_id}
    for seen in receiver.seen:
        assert seen["headers"]["content-type"] == "application/json"
        assert json.loads(seen["body"]) == completion.to_dict()


async def test_the_error_message_carries_a_short_excerpt_and_never_the_secret(
    make_completion: Callable[..., Completion],
) -> None:
    receiver = Receiver(failures=1)
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=SECRET)
        with pytest.raises(RetryableError) as caught:
            await handler.handle(make_completion())  # no start(): the client is made lazily
        await handler.close()

    message = str(caught.value)
    assert "500" in message
    assert len(message) < 800
    assert SECRET.removeprefix("whsec_") not in message
    assert SECRET.removeprefix("whsec_") not in repr(handler)
    assert isinstance(caught.value, DeliveryError)
    assert caught.value.code == "http_5xx"
    assert caught.value.summary.endswith("answered 500")  # the answer's body is left out


async def test_a_timeout_raises(make_completion: Callable[..., Completion]) -> None:
    receiver = Receiver()
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/slow", timeout=0.3)
        try:
            with pytest.raises(RetryableError, match=r"timed out after 0.3s"):
                await handler.handle(make_completion())
        finally:
            receiver.release.set()
            await handler.close()


async def test_a_refused_connection_raises(make_completion: Callable[..., Completion]) -> None:
    handler = HttpHandler(name="notify", url=f"http://127.0.0.1:{free_port()}/hook")
    with pytest.raises(DeliveryError, match="ConnectError") as caught:
        await handler.handle(make_completion())
    await handler.close()
    assert caught.value.code == "connect_error"


async def test_429_passes_retry_after_on(make_completion: Callable[..., Completion]) -> None:
    async with live_server(Receiver().app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/busy")
        with pytest.raises(RetryableError, match="answered 429") as caught:
            await handler.handle(make_completion())
        await handler.close()
    assert caught.value.retry_after == 7.0


async def test_without_a_secret_no_signature_headers_are_sent(
    make_completion: Callable[..., Completion],
) -> None:
    receiver = Receiver(secret=None)
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook")
        await handler.handle(make_completion())
        await handler.close()
    headers = receiver.seen[0]["headers"]
    assert not {"webhook-id", "webhook-timestamp", "webhook-signature"} & set(headers)


async def test_configured_headers_are_sent_but_cannot_replace_the_signature(
    make_completion: Callable[..., Completion], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOWNSTREAM_TOKEN", "tok-123")
    receiver = Receiver()
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=SECRET, headers={
            "Authorization": "env:DOWNSTREAM_TOKEN", "X-Team": "ops",
            "Webhook-Signature": "v1,forged", "Content-Type": "text/plain",
        })  # fmt: skip
        await handler.handle(make_completion())
        await handler.close()
    seen = receiver.seen[0]
    assert seen["headers"]["authorization"] == "tok-123"
    assert seen["headers"]["x-team"] == "ops"
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["verified"] is True
    assert "tok-123" not in repr(handler)


@pytest.mark.parametrize("job_id", ["job with spaces", "jöb-ünicode", "line\nbreak", "x" * 400])
async def test_ids_unfit_for_a_header_get_a_stable_signed_stand_in(
    job_id: str, make_completion: Callable[..., Completion]
) -> None:
    receiver = Receiver()
    completion = make_completion(job_id)
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=Secret(SECRET))
        await handler.handle(completion)
        await handler.handle(completion)
        await handler.close()
    ids = {seen["headers"]["webhook-id"] for seen in receiver.seen}
    assert len(ids) == 1
    assert ids.pop().startswith("jh_")
    assert all(seen["verified"] for seen in receiver.seen)
    assert json.loads(receiver.seen[0]["body"])["job_id"] == job_id


async def test_close_then_handle_opens_a_new_client(
    make_completion: Callable[..., Completion],
) -> None:
    receiver = Receiver()
    async with live_server(receiver.app()) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=SECRET)
        await handler.start()
        await handler.close()
        await handler.handle(make_completion())
        await handler.close()
    assert len(receiver.seen) == 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [("ftp://example.com/x", "http:// or https://"), ("example.com/hook", "http:// or https://"),
     ("http:///nohost", "http:// or https://"), ("http://[::1/", "valid URL"),
     ("http://exa mple.com/", "valid URL"), ("http://example.com:99999/", "valid URL")],
)  # fmt: skip
def test_a_bad_url_is_refused_at_construction(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        HttpHandler(name="notify", url=url)


@pytest.mark.parametrize(
    ("secret", "reason"),
    [("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "starting with 'whsec_'"),
     ("whsec_not base64!!", "not a whsec_ base64 secret"),
     ("whsec_c2hvcnQ=", "too short"),
     ("env:JOBHOOK_TEST_UNSET_SECRET", "JOBHOOK_TEST_UNSET_SECRET is not set"),
     ("", "empty")],
)  # fmt: skip
def test_a_bad_secret_is_refused_at_construction_without_echoing_it(
    secret: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        HttpHandler(name="notify", url="https://example.com/hook", secret=secret)
    if len(secret) > 8 and not secret.startswith("env:"):
        assert secret.removeprefix("whsec_") not in str(caught.value)


def test_a_secret_from_a_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    handler = HttpHandler(name="notify", url="https://example.com/hook", secret=f"file:{path}")
    assert "signed=True" in repr(handler)


@pytest.mark.parametrize("timeout", [0, -1, "10", True])
def test_a_bad_timeout_is_refused_at_construction(timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout: "):
        HttpHandler(name="notify", url="https://example.com/hook", timeout=timeout)


def test_the_repr_hides_credentials_in_the_url() -> None:
    handler = HttpHandler(name="notify", url="https://user:pw@example.com/hook?token=abc")
    assert "pw" not in repr(handler)
    assert "abc" not in repr(handler)
    assert "https://example.com/hook" in repr(handler)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [({"bad name": "x"}, "invalid header name"), ({"x-a": "one\r\nx-b: two"}, "line break"),
     ({"x-a": 1}, "must be strings"), ({"x-a": "env:JOBHOOK_TEST_UNSET"}, "is not set")],
)  # fmt: skip
def test_bad_headers_are_refused_at_construction(headers: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        HttpHandler(name="notify", url="https://example.com/hook", headers=headers)
