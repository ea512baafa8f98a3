"""``POST /webhooks/{source}`` through a real uvicorn server and a real SQLite file."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.errors import RejectedError
from receiver.intake.webhooks import BodyDeadlines, read_body
from receiver.service.app import create_app
from tests.support import OLD_SECRET, SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from receiver.config.settings import Settings


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        yield c


def _db(settings: Settings) -> sqlite3.Connection:
    return sqlite3.connect(settings.store.url.removeprefix("sqlite:///"))


def _count(settings: Settings, table: str) -> int:
    with _db(settings) as db:
        (n,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(n)


async def test_signed_webhook_is_accepted_then_duplicate(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    body = reducto_body("job-1")
    first = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    again = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    assert first.status_code == 200
    assert first.json() == {"status": "accepted", "job_id": "job-1", "state": "succeeded"}
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert _count(settings, "deliveries") == 1


@pytest.mark.parametrize(
    ("mutate", "status", "reason"),
    [
        (lambda h: h.pop("svix-signature"), 400, "missing_headers"),
        (lambda h: h.update({"svix-signature": "garbage"}), 400, "malformed_signature"),
        (lambda h: h.update({"svix-signature": "v1,@@@"}), 400, "malformed_signature"),
        (lambda h: h.update({"svix-timestamp": "1600000000"}), 401, "stale_timestamp"),
        (lambda h: h.update({"svix-id": "msg_other"}), 401, "bad_signature"),
    ],
    ids=["missing", "garbage", "bad-base64", "stale", "tampered-id"],
)
async def test_verification_failures_are_4xx_and_store_nothing(
    client: httpx.AsyncClient, settings: Settings, mutate: object, status: int, reason: str
) -> None:
    body = reducto_body("job-x")
    headers = signed_headers(body)
    mutate(headers)  # type: ignore[operator]
    response = await client.post("/webhooks/reducto", content=body, headers=headers)
    assert (response.status_code, response.json()["error"]) == (status, reason)
    assert _count(settings, "deliveries") == 0
    assert _count(settings, "jobs") == 0


async def test_tampered_body_is_401(client: httpx.AsyncClient, settings: Settings) -> None:
    headers = signed_headers(reducto_body("job-1"))
    response = await client.post(
        "/webhooks/reducto", content=reducto_body("job-2"), headers=headers
    )
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert _count(settings, "jobs") == 0


async def test_non_utf8_body_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/webhooks/reducto", content=b"\xff\xfe", headers=signed_headers("x")
    )
    assert (response.status_code, response.json()["error"]) == (400, "body_not_utf8")


async def test_invalid_json_with_valid_signature_is_400(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    body = b"{not json"
    response = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    assert (response.status_code, response.json()["error"]) == (400, "invalid_json")
    assert _count(settings, "deliveries") == 0


async def test_verified_body_without_job_id_is_400(client: httpx.AsyncClient) -> None:
    body = b'{"status": "Completed"}'
    response = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    assert (response.status_code, response.json()["error"]) == (400, "invalid_payload")


async def test_unknown_source_is_404(client: httpx.AsyncClient) -> None:
    body = reducto_body()
    response = await client.post("/webhooks/nope", content=body, headers=signed_headers(body))
    assert (response.status_code, response.json()["error"]) == (404, "unknown_source")


async def test_declared_oversized_body_is_413_before_reading(client: httpx.AsyncClient) -> None:
    body = b"x" * 2_000_000
    response = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    assert (response.status_code, response.json()["error"]) == (413, "body_too_large")


async def test_streamed_oversized_body_without_length_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b"x" * 65536

    response = await client.post("/webhooks/reducto", content=chunks(), headers=signed_headers("x"))
    assert (response.status_code, response.json()["error"]) == (413, "body_too_large")


async def test_webhook_header_family_is_accepted(client: httpx.AsyncClient) -> None:
    body = reducto_body("job-w")
    response = await client.post(
        "/webhooks/reducto", content=body, headers=signed_headers(body, family="webhook")
    )
    assert response.json()["status"] == "accepted"


async def test_fifty_concurrent_deliveries_of_one_message_accept_exactly_once(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    body = reducto_body("job-storm")
    responses = await asyncio.gather(
        *(
            client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
            for _ in range(50)
        )
    )
    statuses = sorted(r.json()["status"] for r in responses)
    assert statuses.count("accepted") == 1
    assert statuses.count("duplicate") == 49
    assert _count(settings, "completions") == 1


async def test_two_message_ids_for_one_completion_record_one_completion(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    body = reducto_body("job-twice")
    for msg_id in ("msg_a", "msg_b"):
        response = await client.post(
            "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=msg_id)
        )
        assert response.json()["status"] == "accepted"
    assert _count(settings, "deliveries") == 2
    assert _count(settings, "completions") == 1
    assert _count(settings, "dispatches") == 1


async def test_state_never_moves_backward(client: httpx.AsyncClient, settings: Settings) -> None:
    sequence = [("m1", "Pending"), ("m2", "Completed"), ("m3", "InProgress"), ("m4", "Pending")]
    for msg_id, status in sequence:
        body = reducto_body("job-fwd", status=status)
        await client.post(
            "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=msg_id)
        )
    with _db(settings) as db:
        row = db.execute("SELECT state, provider_status FROM jobs WHERE job_id = 'job-fwd'")
        assert row.fetchone() == ("succeeded", "Completed")


async def test_secret_rotation_accepts_old_and_new(tmp_path: object) -> None:
    from pathlib import Path

    from receiver.config.load import load_settings

    base = Path(str(tmp_path))
    config = base / "c.toml"
    config.write_text(
        f'data_dir = "{base}"\n[sources.reducto]\nprovider = "reducto"\n'
        f'secrets = ["{SECRET}", "env:OLD"]\n'
    )
    settings = load_settings(config, environ={"OLD": OLD_SECRET})
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        for n, secret in enumerate((SECRET, OLD_SECRET)):
            body = reducto_body(f"job-{n}")
            headers = signed_headers(body, secret=secret, msg_id=f"m{n}")
            assert (
                await c.post("/webhooks/reducto", content=body, headers=headers)
            ).status_code == 200


async def test_restart_keeps_dedupe_state(settings: Settings) -> None:
    body = reducto_body("job-r")
    for expected in ("accepted", "duplicate"):
        async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
            response = await c.post("/webhooks/reducto", content=body, headers=signed_headers(body))
            assert response.json()["status"] == expected


async def test_store_that_cannot_commit_answers_503_and_acknowledges_nothing(
    settings: Settings,
) -> None:
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        assert (await c.get("/readyz")).status_code == 200
        blocker = sqlite3.connect(settings.store.url.removeprefix("sqlite:///"), timeout=0)
        blocker.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
        try:
            body = reducto_body("job-503")
            response = await c.post(
                "/webhooks/reducto", content=body, headers=signed_headers(body), timeout=30
            )
        finally:
            blocker.rollback()
            blocker.close()
        assert response.status_code == 503
        assert response.headers["retry-after"]
        retry = await c.post("/webhooks/reducto", content=body, headers=signed_headers(body))
        assert retry.json()["status"] == "accepted"


async def test_health_endpoints(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready"}


async def test_many_webhooks_on_a_locked_store_all_get_503_promptly(settings: Settings) -> None:
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        blocker = sqlite3.connect(settings.store.url.removeprefix("sqlite:///"), timeout=0)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            bodies = [reducto_body(f"job-lock-{n}") for n in range(20)]
            # A batch that cannot begin fails as a whole: 20 webhooks wait one busy timeout,
            # not twenty of them in a row (which would exceed the client's timeout).
            responses = await asyncio.gather(
                *(
                    c.post("/webhooks/reducto", content=b,
                           headers=signed_headers(b, msg_id=f"m{n}"), timeout=20)
                    for n, b in enumerate(bodies)
                )
            )  # fmt: skip
        finally:
            blocker.rollback()
            blocker.close()
    assert {r.status_code for r in responses} == {503}
    assert _count(settings, "deliveries") == 0


async def test_client_gone_before_its_body_arrives_stores_nothing(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Headers promise a body that never comes: the endpoint answers nothing and stores
    nothing, and the server goes on serving."""
    body = reducto_body("job-gone")
    async with live_server(create_app(settings)) as url:
        host, port = url.removeprefix("http://").split(":")
        _reader, writer = await asyncio.open_connection(host, int(port))
        head = "".join(f"{k}: {v}\r\n" for k, v in signed_headers(body).items())
        writer.write(
            f"POST /webhooks/reducto HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
            f"{head}\r\n".encode()
            + body[:10]
        )
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
        await writer.wait_closed()
        async with httpx.AsyncClient(base_url=url) as c:
            assert (await c.get("/healthz")).status_code == 200
            metrics = (await c.get("/metrics")).text
    assert _count(settings, "deliveries") == 0
    # Not counted as a webhook of any outcome: no rejection (as if the partial body were the
    # whole one), no failure.
    assert "jobhook_webhooks_total{" not in metrics
    # Nor an error: the client left, nothing failed ("Exception in ASGI application" before).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_the_webhook_fast_path_answers_as_starlettes_routing_does(
    settings: Settings,
) -> None:
    """App answers ``POST /webhooks/{source}`` ahead of Starlette's middleware and router; with
    the fast path off (``app.webhook = None``) the same requests go through them instead. Both
    must answer every kind of request the same way."""
    app = create_app(settings)
    too_big = b"x" * (settings.server.max_body_bytes + 1)

    def cases(n: int) -> list[tuple[str, str, bytes, dict[str, str]]]:
        body = reducto_body(f"job-{n}")
        signed = signed_headers(body, msg_id=f"msg_{n}")
        return [
            ("POST", "/webhooks/reducto", body, signed),  # accepted
            ("POST", "/webhooks/reducto", body, signed),  # duplicate
            ("POST", "/webhooks/reducto", body, {**signed, "svix-id": "msg_x"}),  # 401
            ("POST", "/webhooks/reducto", body, {}),  # 400
            ("POST", "/webhooks/reducto", too_big, signed),  # 413
            ("POST", "/webhooks/nope", body, signed),  # unknown source: 404
            ("POST", "/webhooks/reducto/", body, signed),  # not the route's path
            ("POST", "/webhooks/", body, signed),
            ("GET", "/webhooks/reducto", b"", {}),  # 405
        ]

    def seen(response: httpx.Response) -> tuple[object, ...]:
        text = response.text.replace("job-1", "job-N").replace("job-2", "job-N")
        kept = ("content-type", "content-length", "retry-after", "location", "allow")
        return response.status_code, text, {k: response.headers.get(k) for k in kept}

    endpoint = app.webhook
    assert endpoint is not None
    answers: dict[str, list[tuple[object, ...]]] = {}
    unavailable: dict[str, tuple[object, ...]] = {}
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        for n, mode in ((1, "fast"), (2, "routed")):
            app.webhook = endpoint if mode == "fast" else None
            answers[mode] = [
                seen(await client.request(method, path, content=body, headers=headers))
                for method, path, body, headers in cases(n)
            ]
            # A retryable failure (503, Retry-After): the store is not attached yet.
            ingestor, endpoint.ingestor = endpoint.ingestor, None
            body = reducto_body(f"job-{n}b")
            headers = signed_headers(body, msg_id=f"msg_{n}b")
            unavailable[mode] = seen(
                await client.post("/webhooks/reducto", content=body, headers=headers)
            )
            endpoint.ingestor = ingestor
    assert answers["fast"] == answers["routed"]
    assert [a[0] for a in answers["fast"]] == [200, 200, 401, 400, 413, 404, 307, 404, 405]
    assert unavailable["fast"] == unavailable["routed"]
    assert unavailable["fast"][0] == 503


async def test_a_lone_surrogate_escape_is_refused_and_a_pair_accepted(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    """JSON can escape a lone UTF-16 surrogate, which no stored text can hold: 400, nothing
    stored (it was a 5xx, sent again by the provider forever). A pair is one character."""
    lone = '{"status": "Completed", "job_id": "job-\\ud800", "metadata": {}}'
    pair = '{"status": "Completed", "job_id": "job-\\ud83d\\ude00", "metadata": {"k": "\\uDC00x"}}'
    pair_only = '{"status": "Completed", "job_id": "job-\\ud83d\\ude00", "metadata": {}}'
    refused = await client.post(
        "/webhooks/reducto", content=lone, headers=signed_headers(lone, msg_id="msg_lone")
    )
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_json")
    assert "surrogate" in refused.json()["detail"]
    also = await client.post(
        "/webhooks/reducto", content=pair, headers=signed_headers(pair, msg_id="msg_low")
    )
    assert (also.status_code, also.json()["error"]) == (400, "invalid_json")  # a lone low half
    accepted = await client.post(
        "/webhooks/reducto", content=pair_only, headers=signed_headers(pair_only, msg_id="msg_ok")
    )
    assert accepted.status_code == 200
    assert accepted.json()["job_id"] == "job-\U0001f600"
    assert _count(settings, "deliveries") == 1


async def test_json_nested_deeper_than_the_parser_goes_is_refused_with_400(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    """json.loads gives up on deep nesting with a RecursionError, not a ValueError: a signed
    body nested 100,000 deep (200 KB, under the body cap) was a 5xx, sent again and again."""
    deep = '{"status": "Completed", "job_id": "job-deep", "metadata": {"k": %s}}' % (
        "[" * 100_000 + "]" * 100_000
    )
    refused = await client.post(
        "/webhooks/reducto", content=deep, headers=signed_headers(deep, msg_id="msg_deep")
    )
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_json")
    assert "nested" in refused.json()["detail"]
    assert _count(settings, "deliveries") == 0


async def test_a_body_that_does_not_arrive_in_time_is_cut_off_with_408(
    settings: Settings,
) -> None:
    """Headers and part of the body, then nothing: 408 once body_timeout_seconds (here 0.4 s)
    and at most a quarter of it more have passed, and nothing is stored."""
    slow = settings.model_copy(
        update={"server": settings.server.model_copy(update={"body_timeout_seconds": 0.4})}
    )
    body = reducto_body("job-slow")
    async with live_server(create_app(slow)) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = "".join(f"{k}: {v}\r\n" for k, v in signed_headers(body).items())
        started = time.monotonic()
        writer.write(
            f"POST /webhooks/reducto HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
            f"{head}\r\n".encode()
            + body[:10]
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(4096), 5)
        elapsed = time.monotonic() - started
        writer.close()
        await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:60]
    assert b"body_timeout" in answer
    assert 0.4 <= elapsed < 0.4 + 0.1 + 0.25, elapsed
    assert _count(slow, "deliveries") == 0


async def test_body_deadlines_cut_off_only_the_late_and_leave_other_cancels_alone() -> None:
    deadlines = BodyDeadlines(0.2)
    never = asyncio.Event()

    async def trickle() -> dict[str, object]:
        await never.wait()
        return {"type": "http.request", "body": b"", "more_body": False}

    async def prompt() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    late = asyncio.create_task(read_body(trickle, {}, 100, deadlines))
    on_time = asyncio.create_task(read_body(prompt, {}, 100, deadlines))
    cancelled = asyncio.create_task(read_body(trickle, {}, 100, deadlines))
    await asyncio.sleep(0.05)
    cancelled.cancel()  # a client that went away: cancelled, not 408
    with pytest.raises(RejectedError) as refused:
        await late
    assert refused.value.status_code == 408
    assert await on_time == b"{}"
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not deadlines.expired
    await asyncio.sleep(deadlines.tick * 2)
    assert deadlines._timer is None  # nothing left to watch: the timer stops ticking
