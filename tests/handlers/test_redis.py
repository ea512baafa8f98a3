"""The redis handler against this machine's Redis: XADD, MAXLEN ~, outages and restarts."""

from __future__ import annotations

import json
import sys
import uuid
from typing import TYPE_CHECKING

import pytest

from handlers.base import load_handler
from handlers.redis import RedisHandler
from receiver.config.settings import HandlerSettings
from receiver.errors import HandlerLoadError, RetryableError
from tests.services import (
    handler_app,
    require_module,
    require_service,
    send_webhook,
    stopped,
    wait_for_dispatch,
)
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from receiver.completion import Completion

aioredis = require_module("redis.asyncio", "redis")


@pytest.fixture
async def client() -> AsyncIterator[aioredis.Redis]:
    """A plain client on the machine's Redis, for reading what the handler wrote."""
    require_service("Redis", "127.0.0.1", 6379)
    redis = aioredis.Redis(host="127.0.0.1", port=6379)
    yield redis
    await redis.aclose()


@pytest.fixture
async def stream(client: aioredis.Redis) -> AsyncIterator[str]:
    """A stream key of this test's own, deleted afterwards."""
    key = f"jobhook-test:{uuid.uuid4().hex}"
    yield key
    await client.delete(key)


@pytest.mark.redis
async def test_published_completion_is_one_entry_with_its_json_and_message_id(
    client: aioredis.Redis, stream: str, make_completion: Callable[..., Completion]
) -> None:
    completion = make_completion("job-7")
    handler = RedisHandler(name="events", stream=stream)
    await handler.start()
    try:
        await handler.handle(completion)
    finally:
        await handler.close()
    ((_, fields),) = await client.xrange(stream)
    assert set(fields) == {b"id", b"completion"}
    assert fields[b"id"] == b"reducto:job-7:succeeded" == completion.message_id.encode()
    assert fields[b"completion"] == completion.to_json()
    assert json.loads(fields[b"completion"])["metadata"] == {"customer": "acme", "pages": 3}


@pytest.mark.redis
async def test_maxlen_trims_the_stream_approximately_keeping_the_newest(
    client: aioredis.Redis, stream: str, make_completion: Callable[..., Completion]
) -> None:
    handler = RedisHandler(name="events", stream=stream, maxlen=10)
    try:
        for n in range(300):
            await handler.handle(make_completion(f"job-{n}"))
    finally:
        await handler.close()
    length = await client.xlen(stream)
    # MAXLEN ~ trims whole radix-tree nodes (100 entries by default): never below maxlen.
    assert 10 <= length <= 110
    ((_, newest),) = await client.xrevrange(stream, count=1)
    assert newest[b"id"] == b"reducto:job-299:succeeded"


async def test_unreachable_redis_raises_a_retryable_error_naming_the_stream(
    make_completion: Callable[..., Completion],
) -> None:
    port = free_port()
    handler = RedisHandler(name="events", stream="s", url=f"redis://127.0.0.1:{port}/0")
    await handler.start()  # logs that Redis is unavailable; does not raise
    try:
        expected = rf"XADD to stream 's' on redis://127\.0\.0\.1:{port}/0 failed: ConnectionError"
        with pytest.raises(RetryableError, match=expected):
            await handler.handle(make_completion())
    finally:
        await handler.close()


@pytest.mark.redis
async def test_publishes_again_after_a_redis_restart(
    client: aioredis.Redis, stream: str, make_completion: Callable[..., Completion]
) -> None:
    handler = RedisHandler(name="events", stream=stream, timeout=1)
    await handler.start()
    try:
        await handler.handle(make_completion("before"))
        async with stopped("redis"):
            with pytest.raises(RetryableError, match="ConnectionError"):
                await handler.handle(make_completion("during"))
        # Its pooled connection died with the server: the same handler reconnects.
        await handler.handle(make_completion("after"))
    finally:
        await handler.close()
    entries = await client.xrange(stream)  # this Redis keeps nothing across a restart
    assert [fields[b"id"] for _, fields in entries] == [b"reducto:after:succeeded"]


@pytest.mark.redis
async def test_dispatcher_retries_while_redis_is_down_and_delivers_once_it_is_back(
    tmp_path: Path, client: aioredis.Redis, stream: str
) -> None:
    app = handler_app(tmp_path, f'type = "redis"\nstream = "{stream}"\ntimeout = 1')
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    async with live_server(app) as url:
        async with stopped("redis"):
            await send_webhook(url, job_id)
            failing = await wait_for_dispatch(app, job_id, lambda d: d.attempts >= 2)
            assert failing.last_error is not None
            assert "ConnectionError" in failing.last_error
        done = await wait_for_dispatch(app, job_id, lambda d: d.state == "succeeded")
    ((_, fields),) = await client.xrange(stream)
    assert fields[b"id"] == f"reducto:{job_id}:succeeded".encode()
    document = json.loads(fields[b"completion"])
    assert document["job_id"] == job_id
    assert document["state"] == "succeeded"
    assert document["metadata"] == {"customer": "acme"}
    assert done.attempts >= 3


@pytest.mark.redis
async def test_the_url_password_is_in_no_log_line_error_or_repr(
    tmp_path: Path,
    client: aioredis.Redis,
    stream: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    json_logs: None,
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    monkeypatch.setenv("QUEUE_TEST_REDIS_URL", f"redis://jobhook:{password}@127.0.0.1:6379/0")
    app = handler_app(
        tmp_path, f'type = "redis"\nstream = "{stream}"\nurl = "env:QUEUE_TEST_REDIS_URL"'
    )
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    async with live_server(app) as url:
        handler = app.state.runtime.handlers["queue"]
        await send_webhook(url, job_id)
        failing = await wait_for_dispatch(app, job_id, lambda d: d.attempts >= 2)
    out, err = capfd.readouterr()
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    retries = [e for e in events if e["event"] == "dispatch_retry"]
    assert retries
    assert "AuthenticationError" in retries[0]["error"]
    assert "redis://127.0.0.1:6379/0" in retries[0]["error"]
    assert any(e["event"] == "redis_unavailable" for e in events)
    for text in (
        out,
        err,
        repr(handler),
        failing.last_error or "",
        repr(app.state.runtime.settings),
    ):
        assert password not in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stream": ""}, "stream: String should have at least 1 character"),
        ({"stream": "s", "maxlen": 0}, "maxlen: must be greater than or equal to 1"),
        ({"stream": "s", "maxlen": "100"}, "maxlen: must be a valid integer"),
        ({"stream": "s", "timeout": 0}, "timeout: must be a positive number"),
        ({"stream": "s", "url": "http://u:hunter2@host/"}, "must be a redis://, rediss://"),
        ({"stream": "s", "url": "redis://u:hunter2@host:port/"}, "url: is not a valid URL"),
        ({"stream": "s", "url": "env:QUEUE_TEST_UNSET"}, "QUEUE_TEST_UNSET is not set"),
    ],
)
def test_invalid_options_are_refused_without_echoing_the_url(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        RedisHandler(name="events", **options)
    assert "hunter2" not in str(info.value)


def test_without_the_redis_extra_loading_names_the_handler_and_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in [m for m in sys.modules if m == "redis" or m.startswith("redis.")]:
        monkeypatch.setitem(sys.modules, module, None)
    settings = HandlerSettings(name="events", type="redis", stream="s")
    expected = r"handler 'events' \(redis\): .*install jobhook\[redis\]"
    with pytest.raises(HandlerLoadError, match=expected):
        load_handler(settings)


async def test_repr_shows_where_it_publishes_without_credentials() -> None:
    handler = RedisHandler(name="events", stream="s", url="rediss://user:hunter2@cache:6380/2")
    assert repr(handler) == (
        "RedisHandler(name='events', url='rediss://cache:6380/2', stream='s', maxlen=None)"
    )


@pytest.mark.redis
@pytest.mark.usefixtures("tracer")
async def test_with_tracing_on_the_entry_carries_the_traceparent_of_its_producer_span(
    client: aioredis.Redis, stream: str, make_completion: Callable[..., Completion]
) -> None:
    from receiver import tracing

    handler = RedisHandler(name="events", stream=stream)
    try:
        with tracing.span("jobhook.deliver events"):
            ids = tracing.current_ids()
            await handler.handle(make_completion("job-t"))
    finally:
        await handler.close()
    ((_, fields),) = await client.xrange(stream)  # as a consumer reads it
    assert ids is not None
    assert set(fields) == {b"id", b"completion", b"traceparent"}
    assert tracing.trace_id(fields[b"traceparent"].decode()) == ids[0]
    assert fields[b"traceparent"].decode().split("-")[2] != ids[1]  # the producer span's own
