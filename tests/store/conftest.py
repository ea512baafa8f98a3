"""Every store the contract holds for: SQLite on a tmp file (writing in the service and in its
writer process), PostgreSQL on a fresh database."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.store.sqlite.store import OFFLOAD_AT, SQLiteStore
from tests.services import postgres_database

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.store import Store


@pytest.fixture(
    params=["sqlite", "sqlite-offloaded", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An opened store of each backend, closed after the test; SQLite both ways it writes:
    small batches in the service, and every batch in the writer process."""
    if request.param.startswith("sqlite"):
        offload_at = 1 if request.param == "sqlite-offloaded" else OFFLOAD_AT
        sqlite = SQLiteStore(tmp_path / "store.db", offload_at=offload_at)
        await sqlite.open()
        yield sqlite
        await sqlite.close()
        return
    from receiver.store.postgres.store import PostgresStore

    async with postgres_database() as url:
        postgres = PostgresStore(url)
        await postgres.open()
        yield postgres
        await postgres.close()
