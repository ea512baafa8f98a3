"""The floor of durable intake on this stack: what the ingest target asks for, and nothing else.

``python -m bench.floor PORT DB`` serves a Starlette endpoint on jobhook's server stack that
verifies the Svix signature (the svix library), parses the JSON and inserts one row keyed by
(source, message id) into SQLite (WAL, synchronous=FULL), group-committed by one writer
thread, before its 2xx: a duplicate message id changes nothing. No job state, no completion
queue, no metrics, no log line. Where this floor sits against the bare endpoint shows what
"verification and a durable, de-duplicated write" costs here before any feature. (Its
statements run on the writer thread: tried on the loop's thread, as jobhook runs its own, this
floor was slower.)
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import sys
import threading
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from svix.webhooks import Webhook

from bench.bare import ready, serve
from bench.procs import SECRET

if TYPE_CHECKING:
    from starlette.requests import Request

Pending = list[tuple[tuple[str, str], asyncio.Future[bool]]]


class Floor:
    """One connection and one writer thread: each batch is one transaction and one fsync."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS deliveries "
            "(source TEXT, message_id TEXT, PRIMARY KEY (source, message_id))"
        )
        self.webhook = Webhook(SECRET)
        self.queue: queue.SimpleQueue[Pending] = queue.SimpleQueue()
        self.pending: Pending = []
        self.loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._writer, daemon=True).start()

    def _writer(self) -> None:
        while True:
            batch = self.queue.get()
            while not self.queue.empty():  # whatever else queued meanwhile joins this batch
                batch += self.queue.get_nowait()
            self.db.execute("BEGIN IMMEDIATE")
            inserted = [
                bool(
                    self.db.execute(
                        "INSERT INTO deliveries VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1",
                        key,
                    ).fetchall()
                )
                for key, _ in batch
            ]
            self.db.execute("COMMIT")
            assert self.loop is not None
            self.loop.call_soon_threadsafe(_settle, batch, inserted)

    def _flush(self) -> None:
        batch, self.pending = self.pending, []
        self.queue.put(batch)

    async def accept(self, request: Request) -> JSONResponse:
        loop = self.loop = self.loop or asyncio.get_running_loop()
        body = await request.body()
        self.webhook.verify(body, request.headers)  # type: ignore[arg-type]
        payload: dict[str, Any] = json.loads(body)
        future: asyncio.Future[bool] = loop.create_future()
        if not self.pending:
            loop.call_soon(self._flush)  # what arrives in this pass of the loop: one hand-off
        self.pending.append(((request.path_params["source"], request.headers["svix-id"]), future))
        status = "accepted" if await future else "duplicate"
        return JSONResponse({"status": status, "job_id": payload["job_id"], "state": "succeeded"})


def _settle(batch: Pending, inserted: list[bool]) -> None:
    for (_, future), new in zip(batch, inserted, strict=True):
        future.set_result(new)


def main() -> None:
    floor = Floor(sys.argv[2])
    app = Starlette(
        routes=[
            Route("/webhooks/{source}", floor.accept, methods=["POST"]),
            Route("/readyz", ready, methods=["GET"]),
        ]
    )
    serve(app, int(sys.argv[1]))


if __name__ == "__main__":
    main()
