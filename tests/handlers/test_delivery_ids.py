"""One completion, one id downstream: the http handler's ``webhook-id`` and each queue's message
id are ``Completion.delivery_id``, on this machine's real Redis, NATS and RabbitMQ."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from handlers.http import HttpHandler
from handlers.nats import NatsHandler
from handlers.rabbitmq import RabbitMQHandler
from handlers.redis import RedisHandler
from tests.services import require_module, require_service
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

    from receiver.completion import Completion

aioredis = require_module("redis.asyncio", "redis")
nats = require_module("nats", "nats")
aio_pika = require_module("aio_pika", "rabbitmq")
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
# An id each transport took as-is before, one only the queues took (spaces, non-ASCII, 201 to
# 255 bytes), and one none could (a line break, over 255 bytes).
JOB_IDS = ["job-7", "job with spaces", "jöb-ünicode", "j" * 230, "line\nbreak" * 30]


async def _http_id(completion: Completion) -> str:
    seen: list[str] = []

    async def hook(request: Request) -> Response:
        seen.append(request.headers["webhook-id"])
        return Response(status_code=204)

    async with live_server(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as url:
        handler = HttpHandler(name="notify", url=f"{url}/hook", secret=SECRET)
        try:
            await handler.handle(completion)
        finally:
            await handler.close()
    (webhook_id,) = seen
    return webhook_id


async def _redis_id(completion: Completion, token: str) -> str:
    stream = f"jobhook-test:{token}"
    handler = RedisHandler(name="events", stream=stream)
    client = aioredis.Redis(host="127.0.0.1", port=6379)
    try:
        await handler.handle(completion)
        ((_, fields),) = await client.xrange(stream)
    finally:
        await handler.close()
        await client.delete(stream)
        await client.aclose()
    return str(fields[b"id"].decode())


async def _nats_id(completion: Completion, token: str) -> str:
    stream = f"JOBHOOK_TEST_{token}"
    handler = NatsHandler(name="events", subject=f"jobhook.test.{token}", stream=stream)
    nc = await nats.connect("nats://127.0.0.1:4222")
    try:
        await handler.handle(completion)
        message = await nc.jetstream().get_msg(stream, 1)
    finally:
        await handler.close()
        await nc.jetstream().delete_stream(stream)
        await nc.close()
    return str(message.headers["Nats-Msg-Id"])


async def _rabbitmq_id(completion: Completion, token: str) -> str:
    queue = f"jobhook-test-{token}"
    handler = RabbitMQHandler(name="events", url=AMQP_URL, queue=queue)
    try:
        await handler.handle(completion)
    finally:
        await handler.close()
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        message = await (await channel.declare_queue(queue, passive=True)).get(no_ack=True)
        await channel.queue_delete(queue)
    return str(message.message_id)


@pytest.mark.redis
@pytest.mark.nats
@pytest.mark.rabbitmq
@pytest.mark.parametrize("job_id", JOB_IDS)
async def test_the_webhook_id_and_every_queue_message_id_are_one_id(
    job_id: str, make_completion: Callable[..., Completion]
) -> None:
    for name, port in (("Redis", 6379), ("NATS", 4222), ("RabbitMQ", 5672)):
        require_service(name, "127.0.0.1", port)
    completion = make_completion(job_id)
    token = uuid.uuid4().hex[:12]
    ids = {
        "http": await _http_id(completion),
        "redis": await _redis_id(completion, token),
        "nats": await _nats_id(completion, token),
        "rabbitmq": await _rabbitmq_id(completion, token),
    }
    assert ids == dict.fromkeys(ids, completion.delivery_id)
    if job_id == "job-7":
        assert completion.delivery_id == completion.message_id
    else:
        assert completion.delivery_id.startswith("jh_")
