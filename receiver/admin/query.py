"""How callers say which jobs they want: filters, periods and the opaque paging cursor.

HTTP query parameters and CLI options both end up here, so both accept the same words:
``source``, ``state``, ``created_after`` / ``created_before`` (ISO 8601, UTC when no offset is
given, or Unix seconds), ``metadata=key=value`` as on the command line, ``key:value`` read the
same (repeatable; every pair must match, values compare as text; the first ``=`` or ``:``
ends the key), ``min_confidence``, ``error_code`` (a normalised code: the job's failure or
any of its dispatches' last one), ``field`` with ``max_confidence`` (jobs whose extracted field
is at most that confident; ``field`` alone: jobs that have the field) and ``limit`` (1-500) with
``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from receiver import jsontext
from receiver.errors import RejectedError
from receiver.models import State
from receiver.store.rows import JobFilter

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.store.rows import JobKey

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
PERIODS = {"24h": 24 * 3600.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}
MAX_KEY = 256
MAX_CODE = 100
MAX_FIELD = 200


class QueryError(RejectedError):
    """A filter, period or cursor that cannot be understood (400)."""


def parse_time(name: str, text: str) -> float:
    """ISO 8601 (naive means UTC) or Unix seconds, as Unix seconds."""
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise QueryError("invalid_query", f"{name} must be a finite number")
        return number
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError("invalid_query", f"{name} is not ISO 8601 or Unix seconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_state(text: str) -> str:
    if text not in {s.value for s in State}:
        raise QueryError("invalid_query", f"state must be one of {', '.join(s for s in State)}")
    return text


def split_metadata(pair: str) -> tuple[str, str, str]:
    """(key, separator, value) of a metadata filter: the key ends at the first ``=`` or ``:``
    (``=`` is the CLI's and the documented form; ``:`` is still read)."""
    cut = min((i for i in (pair.find("="), pair.find(":")) if i >= 0), default=-1)
    if cut < 0:
        return pair, "", ""
    return pair[:cut], pair[cut], pair[cut + 1 :]


def parse_metadata(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``key=value`` pairs (``key:value`` too); the key must not be empty."""
    parsed: list[tuple[str, str]] = []
    for pair in pairs:
        key, found, value = split_metadata(pair)
        if not found or not key or len(key) > MAX_KEY:
            raise QueryError("invalid_query", "metadata filters look like key=value")
        parsed.append((key, value))
    return tuple(parsed)


def parse_confidence(text: str, name: str = "min_confidence") -> float:
    try:
        value = float(text)
    except ValueError:
        raise QueryError("invalid_query", f"{name} must be a number") from None
    if not math.isfinite(value):
        raise QueryError("invalid_query", f"{name} must be a finite number")
    return value


def parse_field(text: str) -> str:
    """An extracted field's name, as the provider spells it (at most 200 characters)."""
    if len(text) > MAX_FIELD or not text.isprintable():
        raise QueryError("invalid_query", f"field must be printable, at most {MAX_FIELD}")
    return text


def parse_code(text: str) -> str:
    """An error code: a provider's (DOCUMENT_CORRUPT) or jobhook's (http_5xx), at most 100."""
    if len(text) > MAX_CODE or not text.isprintable():
        raise QueryError("invalid_query", f"error_code must be printable, at most {MAX_CODE}")
    return text


def parse_limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        raise QueryError("invalid_query", f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def parse_period(text: str | None) -> tuple[str, float]:
    """A stats period name and its length in seconds (24h by default)."""
    name = text or "24h"
    if name not in PERIODS:
        raise QueryError("invalid_query", f"period must be one of {', '.join(PERIODS)}")
    return name, PERIODS[name]


def build_filter(
    *,
    source: str | None = None,
    state: str | None = None,
    created_after: str | None = None,
    created_before: str | None = None,
    metadata: Sequence[str] = (),
    min_confidence: str | None = None,
    error_code: str | None = None,
    field: str | None = None,
    max_confidence: str | None = None,
) -> JobFilter:
    """A JobFilter from text, as it comes from a query string or the command line."""
    if max_confidence and not field:
        raise QueryError("invalid_query", "max_confidence needs field (the field to compare)")
    return JobFilter(
        source=source or None,
        state=parse_state(state) if state else None,
        created_after=parse_time("created_after", created_after) if created_after else None,
        created_before=parse_time("created_before", created_before) if created_before else None,
        metadata=parse_metadata(metadata),
        min_confidence=parse_confidence(min_confidence) if min_confidence else None,
        error_code=parse_code(error_code) if error_code else None,
        field=parse_field(field) if field else None,
        max_confidence=(
            parse_confidence(max_confidence, "max_confidence") if max_confidence else None
        ),
    )


def encode_cursor(key: JobKey) -> str:
    """The opaque cursor for the page after ``key``."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> JobKey:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        created_at, source, job_id = jsontext.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise QueryError("invalid_query", "cursor is not one this service gave out") from None
    if (
        not isinstance(created_at, int | float)
        or isinstance(created_at, bool)
        or not isinstance(source, str)
        or not isinstance(job_id, str)
    ):
        raise QueryError("invalid_query", "cursor is not one this service gave out")
    return (float(created_at), source, job_id)
