"""Per-field confidence end to end: the DocExtract (and Reducto) simulator, the real app on each
store, signed webhooks; then the stats' fields, the weak-field filter, the job's fields, the
export's columns, bulk replay's filter, the metric and the CLI.

Simulated jobs 0-2 extract ``total`` at 0.91, job 3 at 0.62 (under the source's 0.85 alert);
``invoice_number`` is 0.98 on every job.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import structlog
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.adminsupport import AUTH, TOKEN
from tests.services import postgres_database
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

API_KEY = "sim-key-123"
JOBS = 4


@pytest.fixture(autouse=True)
def logs_reset() -> Iterator[None]:
    """The CLI reading the store configures logging for the process: undo it afterwards."""
    yield
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'jobhook.db'}"
        return
    async with postgres_database() as url:
        yield url


def _config(tmp_path: Path, sim_url: str, store_url: str) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n[store]\nurl = "{store_url}"\n'
        f'[sources.docextract]\nprovider = "docextract"\nsecrets = ["{SECRET}"]\n'
        f'api_base_url = "{sim_url}"\napi_key = "{API_KEY}"\n'
        'confidence_alert = 0.85\nconfidence_fields = ["total"]\n'
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return config


async def _delivered(tmp_path: Path, job_ids: list[str]) -> None:
    for _ in range(400):  # at most ~20 s
        if all((tmp_path / "out" / "docextract" / f"{j}.json").exists() for j in job_ids):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the jobs were not delivered")


async def _completed(client: httpx.AsyncClient, job_ids: list[str]) -> None:
    for n, job_id in enumerate(job_ids):
        body = json.dumps({"event": "job.completed", "data": {"id": job_id, "status": "completed"}})
        headers = signed_headers(body, msg_id=f"msg_{n}")
        answer = await client.post("/webhooks/docextract", content=body, headers=headers)
        assert answer.json()["status"] == "accepted"


def _field(stats: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [f for f in stats["fields"] if (f["source"], f["field"]) == ("docextract", name)]
    return found


async def test_a_weak_docextract_field_is_shown_counted_found_and_exported(
    tmp_path: Path, store_url: str
) -> None:
    simulator = Simulator("docextract", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(simulator)) as sim_url:
        job_ids = simulator.create_jobs(JOBS)
        weak = job_ids[3]
        config = _config(tmp_path, sim_url, store_url)
        app = create_app(load_settings(config, environ={}))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
            await _completed(c, job_ids)
            await _delivered(tmp_path, job_ids)
            stats = (await c.get("/jobs/stats")).json()
            found = await c.get("/jobs", params={"field": "total", "max_confidence": "0.8"})
            detail = (await c.get(f"/jobs/docextract/{weak}")).json()
            exported = (await c.get("/jobs/export", params={"format": "csv"})).text
            picked = await c.get("/jobs/export", params={"format": "csv", "fields": "total"})
            replay = {"field": "total", "max_confidence": 0.8, "dispatch_state": "succeeded"}
            dry = (await c.post("/jobs/replay", json={**replay, "dry_run": True})).json()
            metrics = (await c.get("/metrics")).text
    mean = (3 * 0.91 + 0.62) / 4
    assert _field(stats, "total") == {
        "source": "docextract", "field": "total", "count": 4, "mean": round(mean, 4),
        "p10": 0.62, "below": 0.25, "threshold": 0.85,
    }  # fmt: skip
    assert _field(stats, "invoice_number")["below"] == 0.0
    assert stats["avg_confidence"] == pytest.approx(mean, abs=1e-4)  # jobs' lowest: the totals
    assert [j["job_id"] for j in found.json()["jobs"]] == [weak]
    assert detail["job"]["fields"] == {"invoice_number": 0.98, "total": 0.62}
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert list(rows[0])[-2:] == ["invoice_number", "total"]
    by_id = {row["job_id"]: row for row in rows}
    assert by_id[weak]["invoice_number"] == str(1000 + 3)
    assert float(by_id[weak]["total"]) > 1000
    assert picked.text.splitlines()[0].endswith(",metadata,total")
    assert dry == {"dry_run": True, "count": 1}
    assert 'jobhook_field_confidence_count{field="total",source="docextract"} 4.0' in metrics
    assert 'jobhook_field_confidence_bucket{field="total",le="0.7",source="docextract"} 1.0' in (
        metrics
    )
    assert 'jobhook_field_confidence_count{field="other",source="docextract"} 4.0' in metrics
    if store_url.startswith("sqlite"):
        await asyncio.to_thread(_cli_reads_the_same, config, weak)


def _cli_reads_the_same(config: Path, weak: str) -> None:
    """``jobhook jobs`` reading the store directly answers as the API did."""
    env = {"JOBHOOK_CONFIG": str(config), "JOBHOOK_URL": None, "JOBHOOK_ADMIN_TOKEN": None}

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["jobs", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    page = json.loads(run("ls", "--field", "total", "--max-confidence", "0.8", "--json"))
    assert [j["job_id"] for j in page["jobs"]] == [weak]
    stats = json.loads(run("stats", "--json"))
    assert _field(stats, "total")["below"] == 0.25
    assert "field confidence" in run("stats")
    shown = run("show", "docextract", weak)
    assert "total" in shown
    assert "0.62" in shown
    header = run("export", "--fields", "total,invoice_number").splitlines()[0]
    assert header.endswith(",metadata,total,invoice_number")
    refused = CliRunner().invoke(main, ["jobs", "ls", "--max-confidence", "0.8"], env=env)
    assert refused.exit_code == 2
    assert "max_confidence needs field" in refused.output


async def test_reducto_block_words_become_weak_block_types_end_to_end(tmp_path: Path) -> None:
    simulator = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(simulator)) as sim_url:
        job_ids = simulator.create_jobs(JOBS, result="inline")
        config = tmp_path / "jobhook.toml"
        config.write_text(
            f'data_dir = "{tmp_path / "data"}"\n[server]\nadmin_token = "{TOKEN}"\n'
            f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n'
            f'api_base_url = "{sim_url}"\napi_key = "{API_KEY}"\n'
            f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
        )
        app = create_app(load_settings(config, environ={}))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
            for n, job_id in enumerate(job_ids):
                body = reducto_body(job_id)
                answer = await c.post(
                    "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=f"m{n}")
                )
                assert answer.json()["status"] == "accepted"
            for _ in range(400):
                if all((tmp_path / "out" / "reducto" / f"{j}.json").exists() for j in job_ids):
                    break
                await asyncio.sleep(0.05)
            detail = (await c.get(f"/jobs/reducto/{job_ids[3]}")).json()
            weak = await c.get("/jobs", params={"field": "Table", "max_confidence": "0.8"})
            stats = (await c.get("/jobs/stats")).json()
    assert detail["job"]["fields"] == {"Table": 0.5, "Text": 0.95}  # "low", "high"
    assert detail["job"]["confidence"] == 0.5  # the least confident block type
    assert [j["job_id"] for j in weak.json()["jobs"]] == [job_ids[3]]
    (table,) = [f for f in stats["fields"] if f["field"] == "Table"]
    assert (table["count"], table["below"], table["threshold"]) == (4, 0.25, 0.8)


async def test_fields_are_read_from_a_fetched_json_result_and_not_from_a_zip(
    tmp_path: Path,
) -> None:
    found = {}
    for provider in ("reducto", "knowhere"):
        simulator = Simulator(provider, api_key=API_KEY, duration=0.0)
        async with live_server(build_app(simulator)) as sim_url:
            (job_id,) = simulator.create_jobs(1, result="url", result_bytes=64 * 1024)
            config = tmp_path / f"{provider}.toml"
            config.write_text(
                f'data_dir = "{tmp_path / provider}"\n[server]\nadmin_token = "{TOKEN}"\n'
                '[results]\nallowed_hosts = ["127.0.0.1"]\nallow_http = true\n'
                f'allow_private_networks = true\n[sources.{provider}]\nprovider = "{provider}"\n'
                f'secrets = ["{SECRET}"]\napi_base_url = "{sim_url}"\napi_key = "{API_KEY}"\n'
                f"[sources.{provider}.poll]\ngrace_seconds = 0\ninitial_delay = 0.1\n"
            )
            app = create_app(load_settings(config, environ={}))
            async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
                tracked = await c.post("/jobs", json={"source": provider, "job_id": job_id})
                assert tracked.status_code == 200
                for _ in range(400):  # polled, confirmed, fetched: at most ~20 s
                    detail = (await c.get(f"/jobs/{provider}/{job_id}")).json()
                    if (detail["completion"] or {}).get("phase") == "ready":
                        break
                    await asyncio.sleep(0.05)
                found[provider] = detail
    reducto, knowhere = found["reducto"], found["knowhere"]
    assert reducto["completion"]["result"]["bytes"] == 64 * 1024
    assert reducto["job"]["fields"] == {"Text": 0.95}  # every block of the blob is "high"
    assert knowhere["completion"]["result"] is not None
    assert knowhere["job"]["fields"] == {}  # a ZIP has no fields
