"""The Mistral simulator's batch job list, as ``mistralai``'s ``batch.jobs.list`` asks for it and
reads it (its own models parse every answer)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json

import pytest
from mistralai.client import Mistral
from mistralai.client import errors as mistral_errors

from receiver.sim.mistral import MistralSim
from tests.support import live_server

KEY = "platform-sim-key-0123456789"


def _sim() -> MistralSim:
    """A simulator whose clock moves one second a reading, so every job has its own
    ``created_at`` and the order is known."""
    ticks = itertools.count(1_800_000_000)
    return MistralSim(api_key=KEY, duration=3600.0, clock=lambda: float(next(ticks)))


def _submit(client: Mistral, custom_id: str, **options: object) -> str:
    line = {"custom_id": custom_id, "body": {"document": {
        "type": "document_url", "document_url": f"https://d.example/{custom_id}.pdf"}}}  # fmt: skip
    uploaded = client.files.upload(
        file={"file_name": f"{custom_id}.jsonl", "content": json.dumps(line).encode() + b"\n"},
        purpose="batch",
    )
    job = client.batch.jobs.create(endpoint="/v1/ocr", input_files=[uploaded.id], **options)  # type: ignore[arg-type]
    return job.id


async def test_the_sdk_lists_batch_jobs_newest_first_in_pages() -> None:
    def run(url: str) -> None:
        with Mistral(api_key=KEY, server_url=url) as client:
            ids = [_submit(client, f"doc-{n}", model="mistral-ocr-latest") for n in range(3)]
            listed = client.batch.jobs.list()
            assert (listed.object, listed.total) == ("list", 3)
            assert [job.id for job in listed.data or []] == ids[::-1]
            assert {job.status for job in listed.data or []} == {"QUEUED"}
            second = client.batch.jobs.list(page=1, page_size=2)
            assert (second.total, [job.id for job in second.data or []]) == (3, [ids[0]])
            oldest = client.batch.jobs.list(order_by="created", page_size=1)
            assert [job.id for job in oldest.data or []] == [ids[0]]
            assert client.batch.jobs.list(page=5).data == []

    sim = _sim()
    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)


async def test_the_sdk_filters_by_status_model_metadata_and_creation_time() -> None:
    def run(url: str) -> None:
        with Mistral(api_key=KEY, server_url=url) as client:
            team_a = _submit(client, "a", model="mistral-ocr-latest", metadata={"team": "a"})
            team_b = _submit(client, "b", metadata={"team": "b", "run": "7"})
            cancelled = _submit(client, "c", model="mistral-ocr-latest")
            client.batch.jobs.cancel(job_id=cancelled)

            def ids(**query: object) -> set[str]:
                answer = client.batch.jobs.list(**query)
                assert answer.total == len(answer.data or [])
                return {job.id for job in answer.data or []}

            assert ids(status=["CANCELLED"]) == {cancelled}
            assert ids(status=["QUEUED", "RUNNING"]) == {team_a, team_b}
            assert ids(model="mistral-ocr-latest") == {team_a, cancelled}
            assert ids(metadata={"team": "b"}) == {team_b}
            assert ids(metadata={"team": "b", "run": "8"}) == set()
            assert ids(agent_id="ag-1") == set()
            created = {job.id: job.created_at for job in client.batch.jobs.list().data or []}
            after = dt.datetime.fromtimestamp(created[team_a], dt.UTC)
            assert ids(created_after=after) == {team_b, cancelled}
            assert ids(created_by_me=True) == {team_a, team_b, cancelled}
            with pytest.raises(mistral_errors.SDKError) as bad:
                client.batch.jobs.list(status=["DONE"])
            assert bad.value.status_code == 422
        with Mistral(api_key="wrong-key-0123", server_url=url) as stranger:
            with pytest.raises(mistral_errors.SDKError) as refused:
                stranger.batch.jobs.list()
            assert refused.value.status_code == 401

    sim = _sim()
    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)
