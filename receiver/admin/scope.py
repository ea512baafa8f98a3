"""What a token limited to some sources (``sources = [...]`` on a ``[[server.tokens]]`` entry)
may see and act on.

The routes ask here, once per call, and hand the limit to the store, which applies it in the
SQL of each read (``JobFilter.sources`` and the ``sources`` argument of the stats, the stream,
the charts and the dead letters): nothing is filtered after it is read, so pages, counts and
cursors stay right. Another source's job answers exactly as a missing job does, so a limited
token cannot probe which jobs exist; an action that names another source is refused with 403
naming the sources the token may use.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from receiver.errors import RejectedError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from starlette.requests import Request

    from receiver.admin.tokens import Principal
    from receiver.store.rows import JobFilter


class SourceForbiddenError(RejectedError):
    """The call names a source its token is not limited to (403)."""

    status_code = 403


def _principal(request: Request) -> Principal | None:
    who: Principal | None = getattr(request.state, "principal", None)
    return who


def sources_of(request: Request) -> tuple[str, ...] | None:
    """The sources the caller's token is limited to; None for a token of every source."""
    who = _principal(request)
    return None if who is None else who.sources


def sees(request: Request, source: str) -> bool:
    """Whether the caller may see ``source``'s jobs (and act on them, as its role allows)."""
    sources = sources_of(request)
    return sources is None or source in sources


def visible(request: Request, names: Iterable[str]) -> list[str]:
    """Of ``names`` (sources), the ones the caller sees, in order."""
    return [name for name in names if sees(request, name)]


def limited(request: Request, where: JobFilter) -> JobFilter:
    """``where`` narrowed to the caller's sources (unchanged for a token of every source)."""
    sources = sources_of(request)
    return where if sources is None else dataclasses.replace(where, sources=sources)


def may_use(request: Request, source: str | None) -> None:
    """A call that names ``source`` to act on (a job to track, a bulk filter): 403 naming the
    sources the token may use when it is another one. None (no source named) passes: the
    store's reads narrow it to the token's sources."""
    sources = sources_of(request)
    if source is None or sources is None or source in sources:
        return
    who = _principal(request)
    name = who.name if who is not None else ""
    raise SourceForbiddenError(
        "forbidden",
        f"token {name!r} may use only the sources {', '.join(sources)}; {source!r} is not one",
    )
