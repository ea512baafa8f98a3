"""jobhook served as shipped but for one thing, for ``bench.sides`` to measure beside it.

``python -m bench.variant log-off CONFIG``: no per-webhook log line (``webhook_accepted``,
``webhook_duplicate``...; every other line as usual).
``python -m bench.variant log-direct CONFIG``: the per-webhook line with the same fields, written
straight to the log's sink as one JSON line, without structlog's processor chain.
``python -m bench.variant granian CONFIG PORT``: jobhook's app served by granian (one worker,
uvloop, HTTP/1) instead of uvicorn; ``granian-bare PORT``: the bare Starlette endpoint on it.
``python -m bench.variant two-writes CONFIG``: jobhook on uvicorn's stock httptools protocol,
each answer's head and body in a write of its own (as before ``receiver.service.onewrite``);
``one-write-bare PORT``: the bare Starlette endpoint on jobhook's one-write protocol.
None of these is how jobhook runs: they are run-time patches, measured and reported.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import orjson

from receiver.intake import webhooks
from receiver.ops.log import SINK, UTCStamper


class WebhookLine:
    """``receiver.intake.webhooks.log`` with its per-webhook ``info`` lines dropped (``direct``
    false) or written straight to the sink; every other call goes to structlog."""

    def __init__(self, inner: Any, *, direct: bool) -> None:
        self._inner = inner
        self._direct = direct
        self._stamp = UTCStamper()

    def info(self, event: str, **fields: Any) -> None:
        if not event.startswith("webhook_"):
            self._inner.info(event, **fields)
        elif self._direct:
            line = {"event": event, **fields, "level": "info"}
            SINK.line(orjson.dumps(self._stamp(None, "info", line)).decode())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def granian_app() -> Any:
    """The granian worker's app factory: jobhook's app as ``jobhook serve`` builds it."""
    import os

    from receiver.ops.log import configure_logging
    from receiver.service.app import create_app
    from receiver.service.preflight import preflight

    checked = preflight(Path(os.environ["BENCH_CONFIG"]))
    configure_logging(checked.settings.log.level, checked.settings.log.format, batch=True)
    app = create_app(checked.settings, sources=checked.sources, handlers=checked.handlers)
    gc.collect()
    gc.freeze()
    return app


def _granian(target: str, port: int, *, factory: bool = False) -> None:
    """Serve ``target`` with granian (installed by hand: ``uv pip install granian==2.8.7``; it
    is not one of jobhook's dependencies)."""
    import importlib

    granian = importlib.import_module("granian")
    constants = importlib.import_module("granian.constants")
    granian.Granian(target, address="127.0.0.1", port=port, interface=constants.Interfaces.ASGI,
                    workers=1, loop=constants.Loops.uvloop, http=constants.HTTPModes.http1,
                    log_enabled=False, factory=factory).serve()  # fmt: skip


def main() -> None:
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "granian-bare":
        _granian("bench.bare:app", int(rest[0]))
    elif mode == "granian":
        import os

        os.environ["BENCH_CONFIG"] = rest[0]
        _granian("bench.variant:granian_app", int(rest[1]), factory=True)
    elif mode == "one-write-bare":
        from bench import bare
        from receiver.service.onewrite import OneWriteProtocol

        bare.OPTIONS["http"] = OneWriteProtocol
        bare.serve(bare.app, int(rest[0]))
    elif mode == "two-writes":
        from receiver.service import serve

        serve.http_protocol = lambda: "httptools"  # type: ignore[attr-defined]  # uvicorn's own
        serve.run(Path(rest[0]))
    elif mode in ("log-off", "log-direct"):
        from receiver.service.serve import run

        webhooks.log = WebhookLine(webhooks.log, direct=mode == "log-direct")
        run(Path(rest[0]))
    else:
        raise SystemExit(f"bench.variant: unknown mode {mode!r}")


if __name__ == "__main__":
    main()
