"""structlog setup: JSON lines when not on a terminal, and a last guard against secrets."""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import structlog

from receiver import jsontext, tracing

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable, Iterator

_SENSITIVE = ("secret", "token", "password", "api_key", "authorization", "signature")


class LineSink:
    """Writes log lines to whatever ``sys.stderr`` is now (replaced or captured streams work).

    Once ``batch_in(loop)`` is called, lines logged on that loop's thread are collected and
    written together at the end of the loop's current pass: one write for all the webhooks a
    commit answers, instead of one per line (each write also hands the GIL to a waiting thread).
    Lines from other threads are written at once, after whatever is pending, so order holds.
    """

    def __init__(self) -> None:
        self.batching = False
        """Whether ``batch_in`` takes effect: ``jobhook serve`` turns it on, tests leave it off."""
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    def batch_in(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Batch the lines of ``loop``'s thread (the caller's), or stop batching (None)."""
        with self._lock:
            self._write_pending()
            if loop is None or self.batching:
                self._loop = loop
                self._thread = threading.get_ident() if loop is not None else None

    @contextlib.contextmanager
    def batching_in(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """``batch_in(loop)`` for the block, then write what is pending and stop batching."""
        self.batch_in(loop)
        try:
            yield
        finally:
            self.batch_in(None)

    def line(self, text: str) -> None:
        with self._lock:
            if self._thread is not None and threading.get_ident() == self._thread:
                assert self._loop is not None
                if self._pending or _scheduled(self._loop, self.flush):
                    self._pending.append(text + "\n")
                    return
            self._write_pending()
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def write(self, text: str) -> int:
        """For the standard library's StreamHandler."""
        with self._lock:
            self._write_pending()
            sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._write_pending()
            sys.stderr.flush()

    def _write_pending(self) -> None:
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            sys.stderr.write(text)


def _scheduled(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> bool:
    try:
        loop.call_soon(callback)
    except RuntimeError:  # the loop is closed: write at once
        return False
    return True


SINK = LineSink()
atexit.register(SINK.flush)


class _LineLogger:
    """structlog's final logger: hands each rendered line to the sink, at every level."""

    def msg(self, message: str) -> None:
        SINK.line(message)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _line_logger(*args: Any) -> _LineLogger:
    return _LineLogger()


@functools.lru_cache(maxsize=4096)
def _sensitive(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _SENSITIVE)


def _redact(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    for key in event_dict:
        if _sensitive(key):
            event_dict[key] = "**********"
    return event_dict


class UTCStamper:
    """structlog's ISO UTC ``timestamp`` (``2026-11-23T18:05:21.004217Z``), at a fifth the cost.

    The date and time of day are formatted once per second; only the microseconds change
    between lines. (structlog's own stamper builds an aware datetime for every line, and drops
    the fraction when it is zero: here it is always six digits, so lines sort as text.)
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._second: tuple[int, str] = (-1, "")

    def __call__(self, _: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        now = self._clock()
        second = int(now // 1)
        cached = self._second  # one tuple, swapped whole: safe from any thread
        if cached[0] != second:
            cached = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
            self._second = cached
        micros = int((now - second) * 1_000_000)
        event_dict["timestamp"] = f"{cached[1]}.{micros:06d}Z"
        return event_dict


def add_trace_ids(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """``trace_id`` and ``span_id`` of the span a line is logged in (installed with tracing)."""
    ids = tracing.current_ids()
    if ids is not None:
        event_dict["trace_id"], event_dict["span_id"] = ids
    return event_dict


def render_json(event_dict: dict[str, Any], **kw: Any) -> str:
    """A log line as JSON (``jsontext.dumps``: a third of ``json.dumps``' time per line)."""
    return jsontext.dumps(event_dict, kw.get("default"))


NOISY_LOGGERS = ("httpx", "httpcore", "aiosqlite", "asyncio", "urllib3")
"""Loggers kept at WARNING or above whatever level the service logs at (with the providers'
SDK loggers the caller names: ``configure_logging``'s ``quiet``)."""


def configure_logging(
    level: str = "info",
    fmt: str = "auto",
    *,
    batch: bool = False,
    trace_ids: bool = False,
    quiet: Iterable[str] = (),
) -> None:
    """Configure structlog and route the standard library's records through it.

    ``batch`` lets the service's event loop write its lines once per pass (``LineSink``);
    ``trace_ids`` adds the current span's ids to every line (only when tracing is on).
    """
    SINK.batching = batch
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        UTCStamper(),
        _redact,
    ]
    if trace_ids:
        shared.append(add_trace_ids)
    renderer: Any = (
        structlog.processors.JSONRenderer(render_json)
        if use_json
        else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_line_logger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(SINK)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processor=renderer)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # The libraries' own DEBUG/INFO lines hold request URLs and headers (a presigned URL, the
    # credential scope botocore signs with): jobhook's lines say what it did without them.
    for noisy in (*NOISY_LOGGERS, *quiet):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
