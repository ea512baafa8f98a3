"""Provider adapters, by the name used in ``sources.*.provider``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.providers.base import JobStatus, ListedJob, Provider, ResultRef
from receiver.providers.docextract import DocExtract
from receiver.providers.docurift import DocuRift
from receiver.providers.generic import Generic
from receiver.providers.knowhere import Knowhere
from receiver.providers.landingai import LandingAI
from receiver.providers.mapping import GenericSettings
from receiver.providers.mistral import MistralBatch
from receiver.providers.reducto import Reducto
from receiver.providers.unstructured import Unstructured

if TYPE_CHECKING:
    from pydantic import BaseModel

PROVIDERS: dict[str, type[Provider]] = {
    cls.name: cls
    for cls in (
        Reducto,
        DocuRift,
        Knowhere,
        DocExtract,
        Generic,
        Unstructured,
        LandingAI,
        MistralBatch,
    )
}

__all__ = [
    "PROVIDERS",
    "GenericSettings",
    "JobStatus",
    "ListedJob",
    "Provider",
    "ResultRef",
    "get_provider",
]


def get_provider(
    name: str,
    generic: GenericSettings | None = None,
    *,
    api_version: str | None = None,
    table: BaseModel | None = None,
) -> Provider:
    """The adapter for ``name``; ``generic`` needs its ``[sources.NAME.generic]`` table.

    ``api_version`` picks the API a provider with several speaks (Knowhere: ``v2`` or ``v1``).
    ``table`` is a cloud provider's own sub-table (``[sources.NAME.aws]``), parsed by its module.
    KeyError when no such provider exists; ConfigError when ``generic`` has no table.
    """
    return PROVIDERS[name].from_settings(generic, api_version=api_version, table=table)
