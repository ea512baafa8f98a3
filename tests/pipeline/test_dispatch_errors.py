"""A failed attempt is recorded with its normalised code and a bounded message; a completion
whose result cannot be had records jobhook's own code and where it arose."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from receiver.config.settings import HandlerSettings
from receiver.errors import DeliveryError, ProviderError
from receiver.models import ResultRef
from receiver.pipeline.dispatcher import Dispatcher
from receiver.pipeline.resolver import Resolver
from receiver.store.rows import JobFilter
from receiver.store.sqlite.store import SQLiteStore
from tests.store.test_contract import SOURCE, complete

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.completion import Completion
    from receiver.store import CompletionRow


class Failing:
    name = "hook"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def handle(self, completion: Completion) -> None:
        raise self.exc


class NeverConfirms(Resolver):
    async def resolve(self, completion: CompletionRow, ref: ResultRef | None) -> None:  # type: ignore[override]
        raise ProviderError("job-1 is still 'InProgress' in the job API")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    yield store
    await store.close()


async def settle(dispatcher: Dispatcher) -> None:
    await dispatcher.run_once()
    async with asyncio.timeout(5):
        while dispatcher.in_flight:
            await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (DeliveryError("POST h answered 503: 'body'", code="http_5xx", summary="POST h: 503"),
         "http_5xx", "POST h: 503"),
        (ValueError("see https://h.example/x?token=s3cret"), "handler_exception",
         "ValueError: see https://h.example/x"),
    ],
)  # fmt: skip
async def test_a_failed_attempt_records_its_code_and_a_safe_message(
    store: SQLiteStore, tmp_path: Path, exc: Exception, code: str, message: str
) -> None:
    await complete(store, "job-1", "hook")
    dispatcher = Dispatcher(
        store,
        {"hook": Failing(exc)},
        {"hook": HandlerSettings(name="hook", type="test", max_attempts=1)},
        Resolver({}, None, tmp_path),
    )
    await settle(dispatcher)
    (row,) = await store.dispatches_for(SOURCE, "job-1")
    assert (row.state, row.error_code, row.last_error) == ("dead", code, message)


async def test_a_completion_the_job_api_never_confirms_is_a_confirm_timeout(
    store: SQLiteStore, tmp_path: Path
) -> None:
    await complete(store, "job-1", "hook", resolve=True)
    dispatcher = Dispatcher(
        store, {}, {}, NeverConfirms({}, None, tmp_path), max_resolve_attempts=0
    )
    await settle(dispatcher)
    (listing,) = await store.list_jobs(JobFilter(), limit=1)
    assert (listing.failure_code, listing.failure_where) == ("confirm_timeout", "provider")
