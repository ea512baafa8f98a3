"""The ``rabbitmq`` handler: publish each completion over AMQP 0-9-1 (extra ``jobhook[rabbitmq]``).

Messages are persistent, ``application/json``, with ``message_id`` set to the completion's
``delivery_id`` (the same on every retry and as the http handler's ``webhook-id``, so consumers
de-duplicate on it). They are published with publisher confirms and ``mandatory``: ``handle``
returns only once the broker has confirmed the message, and raises when it is nacked or cannot
be routed to any queue. With ``queue`` set, that queue is declared durable (and bound to
``exchange`` with ``routing_key``) whenever the handler connects. The connection is robust:
after a broker restart it reconnects and restores the channel and declarations in the
background. ``url`` has no default: the broker's credentials are always configured, never built
in.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog
from pydantic import Field, ValidationInfo, field_validator

from handlers import broker
from handlers.options import HandlerOptions, NonEmpty, Seconds, SecretText
from receiver import tracing
from receiver.errors import RetryableError
from receiver.pipeline.urlsafety import describe_url

if TYPE_CHECKING:
    from aio_pika.abc import AbstractExchange, AbstractRobustChannel, AbstractRobustConnection

    from receiver.completion import Completion
    from receiver.secret import Secret

log = structlog.get_logger("handlers.rabbitmq")

PORTS = {"amqp": 5672, "amqps": 5671}
SCHEMES = tuple(PORTS)
RECONNECT_INTERVAL_SECONDS = 1.0


class RabbitMQOptions(HandlerOptions):
    url: SecretText = Field(
        description="The broker's amqp:// or amqps:// URL, best as 'env:NAME' or 'file:PATH' "
        "(it carries the credentials)"
    )
    exchange: str = ""
    """The exchange to publish to; ``''`` is the default exchange."""
    queue: NonEmpty | None = None
    """A queue to declare durable (and bind to ``exchange``) on connecting."""
    routing_key: str | None = Field(None, validate_default=True)
    """Required unless ``queue`` is set (then it defaults to the queue's name)."""
    timeout: Seconds = 10.0

    @field_validator("url")
    @classmethod
    def _amqp_url(cls, url: Secret) -> Secret:
        parts = broker.parse_url(url.reveal(), "is not a valid URL")
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError("must be an amqp:// or amqps:// URL with a host")
        return url

    @field_validator("routing_key")
    @classmethod
    def _routes_to_the_queue(cls, routing_key: str | None, info: ValidationInfo) -> str:
        if "queue" not in info.data:  # refused: its own error suffices
            return routing_key or ""
        queue: str | None = info.data["queue"]
        if routing_key is None:
            if queue is None:
                raise ValueError("is required unless 'queue' is set")
            return queue
        if info.data.get("exchange") == "" and queue not in (None, routing_key):
            raise ValueError("with the default exchange, it must be the queue's name (or left out)")
        return routing_key


class RabbitMQHandler:
    """Publishes each completion to ``exchange`` with ``routing_key``, confirmed by the broker."""

    options_model = RabbitMQOptions

    def __init__(self, name: str, **options: Any) -> None:
        broker.require_extra("aio_pika", "rabbitmq", "aio-pika")
        self.name = name
        checked = RabbitMQOptions.parse(options)
        self.exchange, self.queue, self.timeout = checked.exchange, checked.queue, checked.timeout
        assert checked.routing_key is not None  # the model fills it in from ``queue``
        self.routing_key: str = checked.routing_key
        self._url = checked.url
        url = self._url.reveal()
        self.display_url = describe_url(url, PORTS[urlsplit(url).scheme], default_path="/")
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._exchange: AbstractExchange | None = None
        self._declared = False
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return (
            f"RabbitMQHandler(name={self.name!r}, url={self.display_url!r}, "
            f"exchange={self.exchange!r}, routing_key={self.routing_key!r}, queue={self.queue!r})"
        )

    async def start(self) -> None:
        """Connect (and declare ``queue``); if the broker is down, deliveries retry and connect."""
        try:
            await self._ready()
        except RetryableError as exc:
            log.warning("rabbitmq_unavailable", handler=self.name, error=str(exc))

    async def close(self) -> None:
        """Close the connection; a later ``handle`` opens a new one."""
        connection = self._connection
        self._connection, self._channel, self._exchange = None, None, None
        if connection is not None:
            await connection.close()

    async def handle(self, completion: Completion) -> None:
        """Publish and wait for the broker's confirm; RetryableError on anything else."""
        from aio_pika import DeliveryMode, Message
        from aio_pika.exceptions import CONNECTION_EXCEPTIONS, DeliveryError, PublishError

        exchange = await self._ready()
        target_name = self.routing_key if not self.exchange else self.exchange
        with tracing.span(f"publish {target_name}", kind="producer", attributes={
            "messaging.system": "rabbitmq", "messaging.operation.type": "send",
            "messaging.operation.name": "publish", "messaging.destination.name": target_name,
            "messaging.rabbitmq.destination.routing_key": self.routing_key,
            "messaging.message.id": completion.delivery_id,
        }):  # fmt: skip
            message = Message(
                completion.to_json(),
                content_type="application/json",
                delivery_mode=DeliveryMode.PERSISTENT,
                message_id=completion.delivery_id,
                app_id="jobhook",
                type="jobhook.completion",
                headers=dict[str, Any](tracing.headers())
                or None,  # traceparent/tracestate, when tracing
            )
            target = f"exchange {self.exchange or '(default)'!r}, routing key {self.routing_key!r}"
            try:
                # A robust channel waits for its reconnection: bounded here.
                async with asyncio.timeout(self.timeout):
                    await exchange.publish(
                        message, self.routing_key, mandatory=True, timeout=self.timeout
                    )
            except PublishError as exc:  # Basic.Return: no queue is bound for the routing key
                self._declared = False  # the queue may have been deleted: declare it again
                raise RetryableError(
                    f"RabbitMQ at {self.display_url} could not route the message ({target}): "
                    f"{exc.args[0] if exc.args else 'unroutable'}"
                ) from exc
            except DeliveryError as exc:  # Basic.Nack: the broker did not take responsibility
                raise RetryableError(
                    f"RabbitMQ at {self.display_url} refused the message ({target})"
                ) from exc
            except TimeoutError as exc:
                raise RetryableError(
                    f"RabbitMQ at {self.display_url} did not confirm the message ({target}) "
                    f"within {self.timeout}s"
                ) from exc
            except CONNECTION_EXCEPTIONS as exc:
                raise RetryableError(
                    f"publishing to RabbitMQ at {self.display_url} ({target}) failed: "
                    f"{self._describe(exc)}"
                ) from exc
        log.debug(
            "rabbitmq_published",
            handler=self.name,
            job_id=completion.job_id,
            exchange=self.exchange,
            routing_key=self.routing_key,
        )

    async def _ready(self) -> AbstractExchange:
        """The exchange to publish to, on a connection made now if there is none."""
        async with self._lock:
            if self._connection is None or self._connection.is_closed:
                self._connection, self._channel, self._exchange = None, None, None
                self._connection, self._channel, self._exchange = await self._connect()
                self._declared = False
            if self.queue is not None and not self._declared:
                assert self._channel is not None
                await self._declare(self._channel, self.queue)
                self._declared = True
            assert self._exchange is not None
            return self._exchange

    async def _connect(
        self,
    ) -> tuple[AbstractRobustConnection, AbstractRobustChannel, AbstractExchange]:
        import aio_pika
        from aio_pika.exceptions import CONNECTION_EXCEPTIONS

        try:
            # aio-pika bounds the connect (and its handshake) itself: cancelling it from outside
            # would leave its reconnection task running with no connection object to close.
            connection = await aio_pika.connect_robust(
                self._url.reveal(),
                timeout=self.timeout,
                reconnect_interval=RECONNECT_INTERVAL_SECONDS,
                client_properties={"connection_name": f"jobhook {self.name}"},
            )
        except (*CONNECTION_EXCEPTIONS, TimeoutError) as exc:
            raise RetryableError(
                f"connecting to RabbitMQ at {self.display_url} failed: {self._describe(exc)}"
            ) from exc
        try:
            async with asyncio.timeout(self.timeout):
                channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
                if self.exchange:
                    exchange = await channel.get_exchange(self.exchange, ensure=True)
                else:
                    exchange = channel.default_exchange
        except BaseException as exc:
            await connection.close()
            if isinstance(exc, (*CONNECTION_EXCEPTIONS, TimeoutError)):
                raise RetryableError(
                    f"connecting to RabbitMQ at {self.display_url} failed: {self._describe(exc)}"
                ) from exc
            raise
        log.info("rabbitmq_connected", handler=self.name, url=self.display_url)
        return connection, channel, exchange

    async def _declare(self, channel: AbstractRobustChannel, name: str) -> None:
        """Declare the queue durable and bind it; the robust channel redoes this on reconnect."""
        from aio_pika.exceptions import CONNECTION_EXCEPTIONS

        try:
            async with asyncio.timeout(self.timeout):
                queue = await channel.declare_queue(name, durable=True)
                if self.exchange:
                    await queue.bind(self.exchange, self.routing_key)
        except (*CONNECTION_EXCEPTIONS, TimeoutError) as exc:
            raise RetryableError(
                f"declaring queue {name!r} on RabbitMQ at {self.display_url} failed: "
                f"{self._describe(exc)}"
            ) from exc
        log.info(
            "rabbitmq_queue_declared",
            handler=self.name,
            queue=name,
            exchange=self.exchange,
            routing_key=self.routing_key,
        )

    def _describe(self, exc: BaseException) -> str:
        return broker.describe(exc, self.timeout, [self._url])
