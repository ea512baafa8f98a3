"""The rabbitmq handler against this machine's RabbitMQ: confirms, persistence, routing,
declarations, outages and restarts."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from handlers.base import load_handler
from handlers.rabbitmq import RabbitMQHandler
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

    from aio_pika.abc import AbstractIncomingMessage

    from receiver.completion import Completion

aio_pika = require_module("aio_pika", "rabbitmq")
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"


class Names:
    """A queue and an exchange of this test's own."""

    def __init__(self) -> None:
        token = uuid.uuid4().hex[:12]
        self.queue = f"jobhook-test-{token}"
        self.exchange = f"jobhook-test-{token}"


@pytest.fixture
async def names() -> AsyncIterator[Names]:
    """Unique names; the queue and exchange (if declared) are deleted afterwards."""
    require_service("RabbitMQ", "127.0.0.1", 5672)
    created = Names()
    yield created
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(created.queue)
        await channel.exchange_delete(created.exchange)


async def _drain(queue: str) -> list[AbstractIncomingMessage]:
    """Every message in ``queue`` (taken off it), read on a fresh connection."""
    connection = await aio_pika.connect(AMQP_URL)
    messages = []
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        while (message := await declared.get(no_ack=True, fail=False)) is not None:
            messages.append(message)
    return messages


async def _declare_exchange(name: str) -> None:
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        await channel.declare_exchange(name, aio_pika.ExchangeType.DIRECT)


@pytest.mark.rabbitmq
async def test_published_completion_is_confirmed_persistent_json_with_its_message_id(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    completion = make_completion("job-7")
    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=names.queue)
    await handler.start()
    try:
        await handler.handle(completion)
    finally:
        await handler.close()
    (message,) = await _drain(names.queue)
    assert message.body == completion.to_json()
    assert message.message_id == "reducto:job-7:succeeded"
    assert message.content_type == "application/json"
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.app_id == "jobhook"
    assert json.loads(message.body)["metadata"] == {"customer": "acme", "pages": 3}


@pytest.mark.rabbitmq
async def test_the_queue_is_declared_durable_and_bound_to_the_exchange(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    await _declare_exchange(names.exchange)
    handler = RabbitMQHandler(
        name="events", url=AMQP_URL, exchange=names.exchange, routing_key="done", queue=names.queue
    )
    await handler.start()
    try:
        await handler.handle(make_completion("job-1"))
    finally:
        await handler.close()
    (message,) = await _drain(names.queue)
    assert (message.exchange, message.routing_key) == (names.exchange, "done")
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed, match="durable"):
            await channel.declare_queue(names.queue, durable=False)


@pytest.mark.rabbitmq
async def test_an_unroutable_message_raises_instead_of_vanishing(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = RabbitMQHandler(name="events", url=AMQP_URL, routing_key=names.queue)  # no such queue
    try:
        with pytest.raises(RetryableError, match=r"could not route the message .*: NO_ROUTE"):
            await handler.handle(make_completion())
    finally:
        await handler.close()


@pytest.mark.rabbitmq
async def test_a_queue_deleted_behind_its_back_is_declared_again_on_the_next_attempt(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=names.queue)
    try:
        await handler.handle(make_completion("job-1"))
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            await (await connection.channel()).queue_delete(names.queue)
        with pytest.raises(RetryableError, match="NO_ROUTE"):
            await handler.handle(make_completion("job-2"))
        await handler.handle(make_completion("job-2"))
    finally:
        await handler.close()
    assert [m.message_id for m in await _drain(names.queue)] == ["reducto:job-2:succeeded"]


@pytest.mark.rabbitmq
async def test_a_missing_exchange_raises_naming_it(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = RabbitMQHandler(
        name="events", url=AMQP_URL, exchange=names.exchange, routing_key="done"
    )
    try:
        with pytest.raises(RetryableError, match=f"no exchange '{names.exchange}'"):
            await handler.handle(make_completion())
    finally:
        await handler.close()


async def test_unreachable_broker_raises_a_retryable_error(
    make_completion: Callable[..., Completion],
) -> None:
    port = free_port()
    url = f"amqp://guest:guest@127.0.0.1:{port}/"
    handler = RabbitMQHandler(name="events", url=url, routing_key="done", timeout=1)
    await handler.start()  # logs that RabbitMQ is unavailable; does not raise
    try:
        expected = rf"connecting to RabbitMQ at amqp://127\.0\.0\.1:{port}/ failed: AMQPConnection"
        with pytest.raises(RetryableError, match=expected):
            await handler.handle(make_completion())
    finally:
        await handler.close()


async def _publish_until_confirmed(
    handler: RabbitMQHandler, completion: Completion, seconds: float
) -> list[str]:
    """Retry as the dispatcher would; return the errors seen before it worked."""
    errors: list[str] = []
    async with asyncio.timeout(seconds):
        while True:
            try:
                await handler.handle(completion)
                return errors
            except RetryableError as exc:
                errors.append(str(exc))
                await asyncio.sleep(0.2)


@pytest.mark.rabbitmq
async def test_publishes_again_after_a_rabbitmq_restart_and_the_queue_keeps_its_messages(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=names.queue, timeout=1)
    await handler.start()
    try:
        await handler.handle(make_completion("before"))
        async with stopped("rabbitmq"):
            with pytest.raises(RetryableError):
                await handler.handle(make_completion("during"))
        await _publish_until_confirmed(handler, make_completion("after"), 30)
    finally:
        await handler.close()
    assert [m.message_id for m in await _drain(names.queue)] == [
        "reducto:before:succeeded",
        "reducto:after:succeeded",
    ]


@pytest.mark.rabbitmq
async def test_dispatcher_retries_while_rabbitmq_is_down_and_delivers_once_it_is_back(
    tmp_path: Path, names: Names
) -> None:
    app = handler_app(
        tmp_path, f'type = "rabbitmq"\nurl = "{AMQP_URL}"\nqueue = "{names.queue}"\ntimeout = 1'
    )
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    async with live_server(app) as url:
        async with stopped("rabbitmq"):
            await send_webhook(url, job_id)
            failing = await wait_for_dispatch(app, job_id, lambda d: d.attempts >= 2)
            assert failing.last_error is not None
            assert "RabbitMQ at amqp://127.0.0.1:5672/" in failing.last_error
        done = await wait_for_dispatch(app, job_id, lambda d: d.state == "succeeded", 30)
    (message,) = await _drain(names.queue)
    assert message.message_id == f"reducto:{job_id}:succeeded"
    document = json.loads(message.body)
    assert (document["job_id"], document["state"]) == (job_id, "succeeded")
    assert document["metadata"] == {"customer": "acme"}
    assert done.attempts >= 3


@pytest.mark.rabbitmq
async def test_the_url_password_is_in_no_log_line_error_or_repr(
    tmp_path: Path,
    names: Names,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    json_logs: None,
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    monkeypatch.setenv("QUEUE_TEST_AMQP_URL", f"amqp://guest:{password}@127.0.0.1:5672/")
    app = handler_app(
        tmp_path, f'type = "rabbitmq"\nqueue = "{names.queue}"\nurl = "env:QUEUE_TEST_AMQP_URL"'
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
    assert "ACCESS_REFUSED" in retries[0]["error"]
    assert any(e["event"] == "rabbitmq_unavailable" for e in events)
    for text in (
        out,
        err,
        repr(handler),
        failing.last_error or "",
        repr(app.state.runtime.settings),
    ):
        assert password not in text


@pytest.mark.rabbitmq
async def test_an_id_too_long_for_amqp_travels_as_a_stable_hash(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    completion = make_completion("j" * 300)
    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=names.queue)
    try:
        await handler.handle(completion)
        await handler.handle(completion)
    finally:
        await handler.close()
    ids = [m.message_id for m in await _drain(names.queue)]
    assert ids == [completion.delivery_id] * 2
    assert ids[0] is not None
    assert ids[0].startswith("jh_")
    assert len(ids[0]) == 43


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"routing_key": "k", "url": None}, "url: must be a string: a literal, 'env:NAME'"),
        ({}, "routing_key: is required unless 'queue' is set"),
        ({"queue": ""}, "queue: String should have at least 1 character"),
        ({"queue": "q", "routing_key": "k"}, "routing_key: with the default exchange, it must"),
        ({"exchange": None, "routing_key": "k"}, "exchange: must be a valid string"),
        ({"routing_key": "k", "timeout": 0}, "timeout: must be a positive number"),
        ({"routing_key": "k", "url": "http://u:hunter2@h/"}, "must be an amqp:// or amqps://"),
        ({"routing_key": "k", "url": "amqp://u:hunter2@h:port/"}, "url: is not a valid URL"),
        ({"routing_key": "k", "url": "env:QUEUE_TEST_UNSET"}, "QUEUE_TEST_UNSET is not set"),
    ],
)
def test_invalid_options_are_refused_without_echoing_the_url(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        RabbitMQHandler(name="events", **{"url": AMQP_URL, **options})
    assert "hunter2" not in str(info.value)


def test_a_missing_url_fails_loading_with_the_handler_and_option_named() -> None:
    settings = HandlerSettings(name="events", type="rabbitmq", queue="q")
    with pytest.raises(
        HandlerLoadError, match=r"handler 'events' \(rabbitmq\): url: required, and missing; add it"
    ):
        load_handler(settings)


def test_without_the_rabbitmq_extra_loading_names_the_handler_and_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in [m for m in sys.modules if m == "aio_pika" or m.startswith("aio_pika.")]:
        monkeypatch.setitem(sys.modules, module, None)
    settings = HandlerSettings(name="events", type="rabbitmq", queue="q")
    expected = r"handler 'events' \(rabbitmq\): .*install jobhook\[rabbitmq\]"
    with pytest.raises(HandlerLoadError, match=expected):
        load_handler(settings)


def test_repr_shows_where_it_publishes_without_credentials() -> None:
    handler = RabbitMQHandler(name="events", url="amqps://app:hunter2@mq/prod", queue="jobs")
    assert repr(handler) == (
        "RabbitMQHandler(name='events', url='amqps://mq:5671/prod', exchange='', "
        "routing_key='jobs', queue='jobs')"
    )


@pytest.mark.rabbitmq
@pytest.mark.usefixtures("tracer")
async def test_with_tracing_on_the_message_carries_a_traceparent_header(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    from receiver import tracing

    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=names.queue)
    try:
        with tracing.span("jobhook.deliver events"):
            ids = tracing.current_ids()
            await handler.handle(make_completion("job-t"))
    finally:
        await handler.close()
    (message,) = await _drain(names.queue)
    assert ids is not None
    traceparent = message.headers["traceparent"]
    assert isinstance(traceparent, str)
    assert tracing.trace_id(traceparent) == ids[0]
