"""The nats handler against this machine's NATS JetStream: acks, de-duplication, streams,
outages and restarts."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from handlers.base import load_handler
from handlers.nats import NatsHandler, subject_matches
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

nats = require_module("nats", "nats")
NotFoundError = require_module("nats.js.errors", "nats").NotFoundError
NATS_URL = "nats://127.0.0.1:4222"


class Names:
    """A subject and a stream of this test's own."""

    def __init__(self) -> None:
        token = uuid.uuid4().hex[:12]
        self.subject = f"jobhook.test.{token}.completions"
        self.stream = f"JOBHOOK_TEST_{token}"


@pytest.fixture
async def names() -> AsyncIterator[Names]:
    """Unique names; the stream (whoever created it) is deleted afterwards."""
    require_service("NATS", "127.0.0.1", 4222)
    created = Names()
    yield created
    nc = await nats.connect(NATS_URL)
    try:
        await nc.jetstream().delete_stream(created.stream)
    except NotFoundError:
        pass
    finally:
        await nc.close()


async def _jetstream(action: Callable[[Any], Any]) -> Any:
    """Run ``action(jetstream_manager)`` on a fresh connection of the test's own."""
    nc = await nats.connect(NATS_URL)
    try:
        return await action(nc.jetstream())
    finally:
        await nc.close()


async def _messages(stream: str) -> list[Any]:
    async def read(js: Any) -> list[Any]:
        state = (await js.stream_info(stream)).state
        return [await js.get_msg(stream, seq) for seq in range(state.first_seq, state.last_seq + 1)]

    result: list[Any] = await _jetstream(read)
    return result


@pytest.mark.nats
async def test_published_completion_is_acked_with_its_json_and_msg_id_header(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    completion = make_completion("job-7")
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    await handler.start()
    try:
        await handler.handle(completion)
    finally:
        await handler.close()
    (message,) = await _messages(names.stream)
    assert message.subject == names.subject
    assert message.data == completion.to_json()
    assert message.headers["Nats-Msg-Id"] == "reducto:job-7:succeeded"
    assert json.loads(message.data)["metadata"] == {"customer": "acme", "pages": 3}


@pytest.mark.nats
async def test_a_retried_completion_is_dropped_by_jetstreams_duplicate_window(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    try:
        for job_id in ("job-1", "job-1", "job-2", "job-1"):
            await handler.handle(make_completion(job_id))
    finally:
        await handler.close()
    messages = await _messages(names.stream)
    assert [m.headers["Nats-Msg-Id"] for m in messages] == [
        "reducto:job-1:succeeded",
        "reducto:job-2:succeeded",
    ]


@pytest.mark.nats
async def test_start_creates_the_stream_for_the_subject(names: Names) -> None:
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    await handler.start()
    await handler.close()
    info = await _jetstream(lambda js: js.stream_info(names.stream))
    assert info.config.subjects == [names.subject]


@pytest.mark.nats
async def test_start_adds_the_subject_to_an_existing_stream_without_it(names: Names) -> None:
    other = names.subject.replace("completions", "other")
    await _jetstream(lambda js: js.add_stream(name=names.stream, subjects=[other]))
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    await handler.start()
    await handler.close()
    info = await _jetstream(lambda js: js.stream_info(names.stream))
    assert info.config.subjects == [other, names.subject]


@pytest.mark.nats
async def test_start_leaves_a_stream_whose_wildcard_covers_the_subject_alone(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    wildcard = names.subject.rsplit(".", 1)[0] + ".>"
    await _jetstream(lambda js: js.add_stream(name=names.stream, subjects=[wildcard]))
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    await handler.start()
    try:
        await handler.handle(make_completion())
    finally:
        await handler.close()
    info = await _jetstream(lambda js: js.stream_info(names.stream))
    assert info.config.subjects == [wildcard]
    assert info.state.messages == 1


@pytest.mark.nats
async def test_a_subject_no_stream_takes_raises_instead_of_being_lost(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = NatsHandler(name="events", subject=names.subject, timeout=2)
    try:
        with pytest.raises(RetryableError, match="no JetStream stream takes subject"):
            await handler.handle(make_completion())
    finally:
        await handler.close()


async def test_unreachable_nats_raises_a_retryable_error_after_the_timeout(
    make_completion: Callable[..., Completion],
) -> None:
    port = free_port()
    handler = NatsHandler(
        name="events", subject="a.b", servers=f"nats://127.0.0.1:{port}", timeout=0.5
    )
    await handler.start()  # logs that NATS is unavailable; does not raise
    try:
        expected = rf"connecting to NATS at nats://127\.0\.0\.1:{port} failed: ConnectionRefused"
        with pytest.raises(RetryableError, match=expected):
            await handler.handle(make_completion())
    finally:
        await handler.close()


async def _publish_until_accepted(
    handler: NatsHandler, completion: Completion, seconds: float
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


@pytest.mark.nats
async def test_publishes_again_after_a_nats_restart_and_the_stream_keeps_its_messages(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream, timeout=1)
    await handler.start()
    try:
        await handler.handle(make_completion("before"))
        async with stopped("nats"):
            # The port is closed; wait (bounded) until the client has seen its connection end.
            async with asyncio.timeout(10):
                while handler._nc is not None and handler._nc.is_connected:
                    await asyncio.sleep(0.01)
            with pytest.raises(RetryableError, match="not connected"):
                await handler.handle(make_completion("during"))
        errors = await _publish_until_accepted(handler, make_completion("after"), 20)
    finally:
        await handler.close()
    assert all("not connected" in e or "timed out" in e or "nats: timeout" in e for e in errors)
    messages = await _messages(names.stream)
    assert [m.headers["Nats-Msg-Id"] for m in messages] == [
        "reducto:before:succeeded",
        "reducto:after:succeeded",
    ]


@pytest.mark.nats
async def test_dispatcher_retries_while_nats_is_down_and_delivers_once_it_is_back(
    tmp_path: Path, names: Names
) -> None:
    app = handler_app(
        tmp_path,
        f'type = "nats"\nsubject = "{names.subject}"\nstream = "{names.stream}"\ntimeout = 1',
    )
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    async with live_server(app) as url:
        async with stopped("nats"):
            await send_webhook(url, job_id)
            failing = await wait_for_dispatch(app, job_id, lambda d: d.attempts >= 2)
            assert failing.last_error is not None
            assert "not connected" in failing.last_error
        done = await wait_for_dispatch(app, job_id, lambda d: d.state == "succeeded", 30)
    (message,) = await _messages(names.stream)
    assert message.headers["Nats-Msg-Id"] == f"reducto:{job_id}:succeeded"
    document = json.loads(message.data)
    assert (document["job_id"], document["state"]) == (job_id, "succeeded")
    assert document["metadata"] == {"customer": "acme"}
    assert done.attempts >= 3


@pytest.mark.nats
async def test_server_credentials_are_in_no_log_line_error_or_repr(
    tmp_path: Path,
    names: Names,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    json_logs: None,
    make_completion: Callable[..., Completion],
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    # This server has no authorization: it accepts the credentials, so the whole path runs.
    monkeypatch.setenv("QUEUE_TEST_NATS_URL", f"nats://jobhook:{password}@127.0.0.1:4222")
    app = handler_app(
        tmp_path,
        f'type = "nats"\nsubject = "{names.subject}"\nstream = "{names.stream}"\n'
        'servers = ["env:QUEUE_TEST_NATS_URL"]',
    )
    job_id = f"job-{uuid.uuid4().hex[:8]}"
    async with live_server(app) as url:
        handler = app.state.runtime.handlers["queue"]
        await send_webhook(url, job_id)
        await wait_for_dispatch(app, job_id, lambda d: d.state == "succeeded")
    down_url = f"nats://jobhook:{password}@127.0.0.1:{free_port()}"
    down = NatsHandler(name="down", subject="a.b", servers=down_url, timeout=0.5)
    with pytest.raises(RetryableError) as failure:
        await down.handle(make_completion())
    await down.close()
    out, err = capfd.readouterr()
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "nats_connected" for e in events)
    assert any(e["event"] == "nats_error" for e in events)
    assert any(e["event"] == "dispatch_succeeded" for e in events)
    for text in (out, err, repr(handler), repr(down), str(failure.value)):
        assert password not in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subject": ""}, "subject: must be a non-empty string"),
        ({"subject": "a.*"}, "without spaces or wildcards"),
        ({"subject": "a..b"}, "without spaces or wildcards"),
        ({"subject": "a b"}, "without spaces or wildcards"),
        ({"subject": "a", "stream": "a.b"}, "stream: must be a stream name"),
        ({"subject": "a", "timeout": -1}, "timeout: must be a positive number"),
        ({"subject": "a", "servers": []}, "servers: must be a URL or a list"),
        ({"subject": "a", "servers": "http://u:hunter2@h:1"}, "must be nats://, tls://"),
        ({"subject": "a", "servers": "nats://u:hunter2@h:port"}, "servers: has an invalid URL"),
        ({"subject": "a", "servers": ["env:QUEUE_TEST_UNSET"]}, "QUEUE_TEST_UNSET is not set"),
    ],
)
def test_invalid_options_are_refused_without_echoing_the_servers(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        NatsHandler(name="events", **options)
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("pattern", "subject", "covered"),
    [
        ("a.b.c", "a.b.c", True),
        ("a.*.c", "a.b.c", True),
        ("a.>", "a.b.c", True),
        (">", "a", True),
        ("a.>", "a", False),
        ("a.*", "a.b.c", False),
        ("a.b", "a.b.c", False),
        ("a.b.c.d", "a.b.c", False),
    ],
)
def test_subject_matches_follows_nats_wildcards(pattern: str, subject: str, covered: bool) -> None:
    assert subject_matches(pattern, subject) is covered


def test_without_the_nats_extra_loading_names_the_handler_and_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in [m for m in sys.modules if m == "nats" or m.startswith("nats.")]:
        monkeypatch.setitem(sys.modules, module, None)
    settings = HandlerSettings(name="events", type="nats", subject="a.b")
    expected = r"handler 'events' \(nats\): .*install jobhook\[nats\]"
    with pytest.raises(HandlerLoadError, match=expected):
        load_handler(settings)


def test_repr_lists_the_servers_without_credentials() -> None:
    servers = ["nats://u:hunter2@n1:4222", "tls://n2"]
    handler = NatsHandler(name="events", subject="a.b", servers=servers)
    assert repr(handler) == (
        "NatsHandler(name='events', servers=['nats://n1:4222', 'tls://n2:4222'], "
        "subject='a.b', stream=None)"
    )


@pytest.mark.nats
@pytest.mark.usefixtures("tracer")
async def test_with_tracing_on_the_message_carries_a_traceparent_header(
    names: Names, make_completion: Callable[..., Completion]
) -> None:
    from receiver import tracing

    handler = NatsHandler(name="events", subject=names.subject, stream=names.stream)
    try:
        with tracing.span("jobhook.deliver events"):
            ids = tracing.current_ids()
            await handler.handle(make_completion("job-t"))
    finally:
        await handler.close()
    (message,) = await _messages(names.stream)
    assert ids is not None
    assert tracing.trace_id(message.headers["traceparent"]) == ids[0]
    assert message.headers["Nats-Msg-Id"] == "reducto:job-t:succeeded"
