"""Stores: SQLite (embedded default) and PostgreSQL (several replicas), chosen by ``store.url``."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from receiver.store.base import Engine, Reads, Store
    from receiver.store.rows import CompletionRow, DispatchRow, JobRow, Resolution

__all__ = [
    "CompletionRow",
    "DispatchRow",
    "Engine",
    "JobRow",
    "Reads",
    "Resolution",
    "Store",
    "open_store",
]

_CONTRACT = {
    "Engine": "receiver.store.base",
    "Reads": "receiver.store.base",
    "Store": "receiver.store.base",
    "CompletionRow": "receiver.store.rows",
    "DispatchRow": "receiver.store.rows",
    "JobRow": "receiver.store.rows",
    "Resolution": "receiver.store.rows",
}


if not TYPE_CHECKING:
    # Hidden from mypy: a module-level __getattr__ would make every unknown name imported from
    # this package Any; mypy reads the names above, under TYPE_CHECKING, instead.
    def __getattr__(name: str) -> object:
        """The contract's names, imported at their first use (PEP 562). The SQLite writer process
        imports this package before anything is sent to it, and its operations (which load
        ``rows``, not ``base``) only with the first batch: idle, it stays smaller, which counts
        in the service's idle RSS; once it has written, it still leaves ``base`` out."""
        module = _CONTRACT.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def open_store(url: str, *, require_synchronous_replication: bool = False) -> Store:
    """Build (not yet open) the store that ``url`` names; PostgreSQL refuses to open without
    a synchronous standby when ``require_synchronous_replication``."""
    if url.startswith("sqlite:///"):
        from receiver.store.sqlite.store import SQLiteStore

        return SQLiteStore(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        try:
            module = importlib.import_module("receiver.store.postgres.store")
        except ImportError as exc:
            raise ConfigError(
                "store.url is PostgreSQL but the 'postgres' extra is not installed "
                "(uv sync --extra postgres)"
            ) from exc
        store: Store = module.PostgresStore(
            url, require_synchronous_replication=require_synchronous_replication
        )
        return store
    raise ConfigError("store.url must start with sqlite:/// or postgresql://")
