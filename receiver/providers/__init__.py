"""Provider adapters, by the name used in ``sources.*.provider``: the built-ins and the loader.

``provider`` is a built-in name (``PROVIDERS``), an entry point in the group
``jobhook.providers``, or ``"package.module:attr"``; whichever it is must be a subclass of
``Provider`` (the contract, in ``receiver.providers.base``). ``provider_class`` finds it with an
exact error, as the handler loader does for ``[[handlers]]``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from receiver.errors import ProviderLoadError
from receiver.importer import import_from_string
from receiver.providers.azure import AzureDocIntel
from receiver.providers.base import JobStatus, ListedJob, Provider, ResultRef
from receiver.providers.docextract import DocExtract
from receiver.providers.docling import Docling
from receiver.providers.docurift import DocuRift
from receiver.providers.generic import Generic
from receiver.providers.google import GoogleDocAI
from receiver.providers.knowhere import Knowhere
from receiver.providers.landingai import LandingAI
from receiver.providers.llamaparse import LlamaParse
from receiver.providers.mistral import MistralBatch
from receiver.providers.reducto import Reducto
from receiver.providers.textract import Textract
from receiver.providers.unstructured import Unstructured

if TYPE_CHECKING:
    from pydantic import BaseModel

ENTRY_POINT_GROUP = "jobhook.providers"
PROVIDERS: dict[str, type[Provider]] = {
    cls.name: cls
    for cls in (
        Reducto,
        DocuRift,
        Knowhere,
        DocExtract,
        Generic,
        AzureDocIntel,
        GoogleDocAI,
        Textract,
        Docling,
        Unstructured,
        LandingAI,
        MistralBatch,
        LlamaParse,
    )
}
"""The built-in providers, by name; third-party ones are found by ``provider_class``."""

__all__ = [
    "ENTRY_POINT_GROUP",
    "PROVIDERS",
    "JobStatus",
    "ListedJob",
    "Provider",
    "ResultRef",
    "get_provider",
    "provider_class",
]


def provider_class(name: str) -> type[Provider]:
    """The adapter class ``name`` selects; ProviderLoadError saying exactly why there is none."""
    if name in PROVIDERS:
        return PROVIDERS[name]
    if ":" in name:
        try:
            found = import_from_string(name, ProviderLoadError)
        except ProviderLoadError as exc:
            raise ProviderLoadError(f"provider {name!r}: {exc}") from exc
    else:
        points = entry_points(group=ENTRY_POINT_GROUP, name=name)
        if not points:
            raise ProviderLoadError(
                f"unknown provider {name!r}: not built in ({', '.join(sorted(PROVIDERS))}), "
                f"not an entry point in {ENTRY_POINT_GROUP!r}, not 'package.module:attr'"
            )
        point = next(iter(points))
        try:
            found = point.load()
        except Exception as exc:
            raise ProviderLoadError(
                f"provider entry point {name!r} ({point.value}) failed to load: {_describe(exc)}"
            ) from exc
    if not isinstance(found, type) or not issubclass(found, Provider):
        raise ProviderLoadError(
            f"provider {name!r} is {_kind(found)}, not a subclass of "
            "receiver.providers.base.Provider"
        )
    if not isinstance(getattr(found, "name", None), str) or not found.name:
        raise ProviderLoadError(f"provider {name!r} ({found.__qualname__}) sets no name")
    return found


def get_provider(
    name: str, table: BaseModel | None = None, *, api_version: str | None = None
) -> Provider:
    """The adapter for ``name``, given its source's sub-table (an instance of the provider's
    ``table_model``) and ``api_version`` (one of its ``api_versions``).

    ProviderLoadError when no such provider exists; ConfigError when a provider that needs a
    table has none.
    """
    return provider_class(name).from_settings(table, api_version=api_version)


def _kind(value: object) -> str:
    return (
        f"the class {value.__qualname__}"
        if isinstance(value, type)
        else f"a {type(value).__name__}"
    )


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
