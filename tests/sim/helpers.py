"""Helpers for the simulator's tests: fixture shapes and a recording webhook receiver."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import FIXTURES

API_KEY = "sim-key-0123456789abcdef"


def fixture(provider: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "providers" / f"{provider}.json").read_text())
    return data


def shape_of(value: Any) -> Any:
    """A body's structure: keys (in order) and JSON types, not values."""
    if isinstance(value, dict):
        return {key: shape_of(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape_of(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def auth(provider: str, key: str = API_KEY) -> dict[str, str]:
    if provider == "docurift":
        return {"X-API-Key": key}
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Recorder:
    """A webhook receiver that records every POST and answers from a script (then 204)."""

    script: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        async def receive(request: Request) -> Response:
            self.received.append(Received(dict(request.headers), await request.body(), time.time()))
            status = self.script.pop(0) if self.script else 204
            return Response(status_code=status)

        return Starlette(routes=[Route("/hook", receive, methods=["POST"])])


async def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    """Poll ``predicate()`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
