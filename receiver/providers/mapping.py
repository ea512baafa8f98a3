"""The generic provider's table: JSON pointers and status words that map any JSON API.

``[sources.NAME.generic]`` is validated here, by the adapter that reads it, so configuration
depends on providers and never the other way round.
"""

from __future__ import annotations

import string
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from receiver.models import State
from receiver.providers.pointer import Pointer


def _check_pointer(text: str) -> str:
    Pointer.parse(text)
    return text


JsonPointer = Annotated[str, AfterValidator(_check_pointer)]
_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"


class GenericSettings(BaseModel):
    """``[sources.NAME.generic]``: how the generic provider reads any JSON API (RFC 6901)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    webhook_job_id: JsonPointer
    webhook_status: JsonPointer
    webhook_metadata: JsonPointer | None = None
    webhook_error: JsonPointer | None = None
    webhook_has_result: bool = False
    job_path: str = "/v1/jobs/{job_id}"
    job_status: JsonPointer
    result: JsonPointer | None = None
    result_url: JsonPointer | None = None
    result_sha256: JsonPointer | None = None
    error: JsonPointer | None = None
    progress_done: JsonPointer | None = None
    progress_total: JsonPointer | None = None
    retry_after: JsonPointer | None = None
    auth_header: str = Field("Authorization", pattern=_HEADER_NAME)
    auth_scheme: str = "Bearer"
    status_words: dict[str, State]

    @field_validator("job_path")
    @classmethod
    def _one_job_id_field(cls, path: str) -> str:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(path) if f is not None]
        except ValueError as exc:
            raise ValueError(f"is not a valid template: {exc}") from None
        if not path.startswith("/") or fields != ["job_id"]:
            raise ValueError("must start with '/' and contain '{job_id}' once, and no other field")
        return path

    @field_validator("status_words")
    @classmethod
    def _some_terminal_word(cls, words: dict[str, State]) -> dict[str, State]:
        if not any(state.terminal for state in words.values()):
            raise ValueError("needs at least one word for a terminal state, or no job ever ends")
        return words
