"""Provider adapters, by the name used in ``sources.*.provider``."""

from __future__ import annotations

from receiver.providers.base import JobStatus, Provider, ResultRef
from receiver.providers.reducto import Reducto

PROVIDERS: dict[str, type[Provider]] = {
    Reducto.name: Reducto,
}

__all__ = ["PROVIDERS", "JobStatus", "Provider", "ResultRef", "get_provider"]


def get_provider(name: str) -> Provider:
    """The adapter for ``name``; KeyError when no such provider exists."""
    return PROVIDERS[name]()
