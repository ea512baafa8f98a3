"""What a provider adapter knows: its webhook body, its status words, its job API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from receiver.errors import PayloadError
from receiver.models import Event, Progress, State

if TYPE_CHECKING:
    from collections.abc import Mapping

    from receiver.models import Via

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ResultRef:
    """Where a finished job's result is: inline JSON, or a (presigned) URL to download."""

    inline: Any = None
    url: str | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The provider's job API answer, translated."""

    state: State
    provider_status: str
    result: ResultRef | None = None
    error: str | None = None
    progress: Progress | None = None


class Provider:
    """Base adapter: subclasses set the class attributes and override the parsers."""

    name: ClassVar[str]
    status_words: ClassVar[Mapping[str, State]]
    webhook_has_result: ClassVar[bool] = False
    auth_header: ClassVar[str] = "Authorization"
    auth_scheme: ClassVar[str] = "Bearer "

    def canonical(self, word: str, *, source: str, job_id: str) -> State:
        """Map a status word; an unknown word is kept, treated as queued and logged."""
        state = self.status_words.get(word)
        if state is None:
            log.warning("unknown_status_word", source=source, job_id=job_id, status=word)
            return State.QUEUED
        return state

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        """Translate a verified webhook body into an event; PayloadError when it has no job."""
        raise NotImplementedError

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {self.auth_header: f"{self.auth_scheme}{api_key}"}

    def job_path(self, job_id: str) -> str:
        """The job endpoint's path relative to ``api_base_url``."""
        raise NotImplementedError

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        """Translate the job endpoint's JSON answer."""
        raise NotImplementedError


def require_str(body: Any, key: str) -> str:
    """``body[key]`` as a non-empty string, or a PayloadError naming the key."""
    if not isinstance(body, dict):
        raise PayloadError("invalid_payload", "the body is not a JSON object")
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError("invalid_payload", f"field {key!r} is missing or not a string")
    return value


def optional_dict(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}
