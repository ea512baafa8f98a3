"""Provider adapters, by the name used in ``sources.*.provider``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.providers.base import JobStatus, ListedJob, Provider, ResultRef
from receiver.providers.docextract import DocExtract
from receiver.providers.docurift import DocuRift
from receiver.providers.generic import Generic
from receiver.providers.knowhere import Knowhere
from receiver.providers.reducto import Reducto

if TYPE_CHECKING:
    from receiver.config.settings import SourceSettings

PROVIDERS: dict[str, type[Provider]] = {
    cls.name: cls for cls in (Reducto, DocuRift, Knowhere, DocExtract, Generic)
}

__all__ = ["PROVIDERS", "JobStatus", "ListedJob", "Provider", "ResultRef", "get_provider"]


def get_provider(name: str, settings: SourceSettings | None = None) -> Provider:
    """The adapter for ``name``, built from the source's settings (``generic`` needs them).

    KeyError when no such provider exists; ConfigError when ``generic`` has no table.
    """
    return PROVIDERS[name].from_settings(settings)
