"""Stores: SQLite (embedded default) and PostgreSQL (several replicas), chosen by ``store.url``."""

from __future__ import annotations

import importlib
from pathlib import Path

from receiver.errors import ConfigError
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
