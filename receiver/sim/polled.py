"""What the polled platforms' simulators share (Unstructured, LandingAI, Mistral): the key check,
a per-minute budget answered 429 with ``Retry-After``, the request log and the clock."""

from __future__ import annotations

import collections
import email.parser
import email.policy
import hmac
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from receiver.sim.clouds import CloudOptions

OUTCOME_WORDS = ("corrupt", "torn", "stop", "expired", "large")
"""Words in a document's name (or a line's ``custom_id``) that pick its simulated outcome."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One request the simulator answered: when (its clock), what, and how."""

    at: float
    method: str
    path: str
    status: int


@dataclass
class PolledSim:
    """The state every polled simulator keeps; subclasses add their routes and jobs."""

    api_key: str
    duration: float = 2.0
    """Seconds a job runs (queued for the first tenth)."""
    requests_per_minute: float = 600.0
    rate_window: float = 60.0
    """The budget's window in seconds: ``requests_per_minute`` requests in any such window."""
    retention: float = 86_400.0
    """Seconds a finished job's result is kept, then answered as gone."""
    public_url: str = "http://127.0.0.1:9100"
    clock: Callable[[], float] = time.time
    hits: list[Hit] = field(default_factory=list)
    _window: collections.deque[float] = field(default_factory=collections.deque)

    def hits_to(self, suffix: str, method: str = "GET") -> list[Hit]:
        """The requests whose path ends with ``suffix``, in order."""
        return [h for h in self.hits if h.method == method and h.path.endswith(suffix)]

    def gate(self, request: Request, presented: str | None) -> Response | None:
        """401 for a wrong key, 429 over the per-minute budget; None when the request may go."""
        if presented is None or not hmac.compare_digest(presented.encode(), self.api_key.encode()):
            return self.refuse(request, 401, {"detail": "Invalid API key"})
        now = self.clock()
        while self._window and self._window[0] <= now - self.rate_window:
            self._window.popleft()
        if len(self._window) >= self.requests_per_minute:
            wait = max(1, math.ceil(self._window[0] + self.rate_window - now))
            return self.refuse(request, 429, {"detail": "Too many requests"},
                               headers={"Retry-After": str(wait)})  # fmt: skip
        self._window.append(now)
        return None

    def refuse(
        self,
        request: Request,
        status: int,
        body: object,
        headers: dict[str, str] | None = None,
    ) -> Response:
        return self.answer(request, JSONResponse(body, status_code=status, headers=headers))

    def answer(self, request: Request, response: Response) -> Response:
        self.hits.append(Hit(self.clock(), request.method, request.url.path, response.status_code))
        return response

    def phase(self, started: float) -> str:
        """``queued``, ``running`` or ``done`` for a job started at ``started``."""
        elapsed = self.clock() - started
        if elapsed >= self.duration:
            return "done"
        return "queued" if elapsed < self.duration / 10 else "running"

    def gone(self, finished: float) -> bool:
        """Whether a result finished at ``finished`` is past its retention."""
        return self.clock() - finished > self.retention


@dataclass(frozen=True, slots=True)
class Part:
    """One field of a multipart form: its name, its file name (None for a plain field), bytes."""

    name: str
    filename: str | None
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def form_parts(request: Request) -> list[Part] | None:
    """The fields of a ``multipart/form-data`` body (read with the standard library's MIME
    parser); None when the body is not one."""
    content_type = request.headers.get("content-type", "")
    body = await request.body()
    if not content_type.lower().startswith("multipart/form-data"):
        return None
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        return None
    parts = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        filename = part.get_filename()
        parts.append(Part(name, filename, payload if isinstance(payload, bytes) else b""))
    return parts


def outcome(name: str) -> str | None:
    """The outcome word a document's name asks for, if any."""
    lowered = name.lower()
    return next((word for word in OUTCOME_WORDS if word in lowered), None)


def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:] if value[:7].lower() == "bearer " else None


def require_key(options: CloudOptions, provider: str) -> None:
    if not options.api_key:
        raise ConfigError(
            f"simulator: --provider {provider} needs --api-key or JOBHOOK_SIM_API_KEY "
            "(clients must send it)"
        )
