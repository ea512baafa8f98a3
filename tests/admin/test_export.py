"""``GET /jobs/export``: CSV and JSON Lines, streamed across pages, parsed back."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.admin.export import CSV_COLUMNS, PAGE
from receiver.models import State
from receiver.service.app import create_app
from receiver.store import Resolution
from receiver.store.sqlite.store import SQLiteStore
from tests.adminsupport import AUTH, admin_settings, record
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from receiver.config.settings import Settings

JOBS = PAGE * 2 + 3  # three pages, the last one short


@pytest.fixture
async def settings(tmp_path: Path) -> Settings:
    """A store holding JOBS jobs (every seventh failed, odd ones for "acme") and one result."""
    settings = admin_settings(tmp_path)
    store = SQLiteStore(Path(settings.store.url.removeprefix("sqlite:///")))
    await store.open()
    try:
        await asyncio.gather(*(
            record(store, f"job-{n:04d}", State.FAILED if n % 7 == 0 else State.SUCCEEDED,
                   customer="acme" if n % 2 else "zen", n=n)
            for n in range(JOBS)
        ))  # fmt: skip
        await record(store, "extracted", resolve=True, customer="docs")
        data = json.dumps({"extracted_data": {"total": 1280.0}, "confidence": {"total": 0.91}})
        path = settings.results.dir / "reducto" / "extracted.result"
        path.parent.mkdir(parents=True)
        path.write_text(data)
        for row in await store.claim_completions("t", 10, 60, 4e9):
            digest = hashlib.sha256(data.encode()).hexdigest()
            resolution = Resolution(str(path), digest, len(data), confidence=0.91)
            await store.resolve_completion(row.id, "t", resolution)
    finally:
        await store.close()
    return settings


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
        yield c


async def test_csv_export_has_every_job_once_across_pages(client: httpx.AsyncClient) -> None:
    response = await client.get("/jobs/export", params={"format": "csv"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert 'filename="jobs.csv"' in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == JOBS + 1
    assert len({r["job_id"] for r in rows}) == JOBS + 1
    by_id = {r["job_id"]: r for r in rows}
    assert by_id["job-0007"]["state"] == "failed"
    assert json.loads(by_id["job-0003"]["metadata"]) == {"customer": "acme", "n": 3}
    assert by_id["extracted"]["confidence"] == "0.91"
    assert by_id["job-0003"]["confidence"] == ""


async def test_jsonl_export_applies_the_list_filters(client: httpx.AsyncClient) -> None:
    params = [("format", "jsonl"), ("state", "failed"), ("metadata", "customer:acme")]
    response = await client.get("/jobs/export", params=params)
    docs = [json.loads(line) for line in response.text.splitlines()]
    expected = {f"job-{n:04d}" for n in range(JOBS) if n % 7 == 0 and n % 2}
    assert {d["job_id"] for d in docs} == expected
    assert len(docs) == len(expected)
    assert all(d["state"] == "failed" and d["metadata"]["customer"] == "acme" for d in docs)


async def test_jsonl_export_can_carry_the_extracted_result(client: httpx.AsyncClient) -> None:
    params = {"format": "jsonl", "min_confidence": "0.9", "include_result": "true"}
    response = await client.get("/jobs/export", params=params)
    (doc,) = [json.loads(line) for line in response.text.splitlines()]
    assert doc["job_id"] == "extracted"
    assert doc["confidence"] == 0.91
    assert doc["result_data"]["extracted_data"] == {"total": 1280.0}
    assert doc["result"]["available"] is True
    plain = await client.get("/jobs/export", params={"min_confidence": "0.9"})
    assert "result_data" not in json.loads(plain.text)


@pytest.mark.parametrize(
    "params", [{"format": "xml"}, {"include_result": "maybe"}, {"state": "nope"}]
)
async def test_export_refuses_bad_parameters(
    client: httpx.AsyncClient, params: dict[str, str]
) -> None:
    response = await client.get("/jobs/export", params=params)
    assert (response.status_code, response.json()["error"]) == (400, "invalid_query")
