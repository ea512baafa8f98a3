"""Textract end to end, offline: boto3 submits to the simulator, SNS tells jobhook, jobhook
confirms with the SigV4-signed Get*, assembles the pages and hands the result to a file handler.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import TYPE_CHECKING, Any

import boto3
import httpx
from botocore.config import Config

from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.service.reload import Reloader
from receiver.sim.textract import TextractSim, running
from tests.sim.helpers import wait_for
from tests.support import free_port, live_server
from tests.textract_support import (
    KEY_ID,
    REGION,
    ROLE,
    SECRET_KEY,
    TOKEN,
    TOPIC,
    aws_env,
    textract_settings,
)

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["aws_env"]


def _submit(api_url: str, name: str, tag: str) -> str:
    # The simulator holds Textract's rate limit, and three submissions race the service's own
    # polls for it: retried as a boto3 user would retry a throttled API (standard mode's three
    # attempts can all land on a taken slot on a slow machine).
    retries = Config(retries={"mode": "standard", "max_attempts": 10})
    client = boto3.client("textract", endpoint_url=api_url, region_name=REGION,
                          aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET_KEY,
                          config=retries)  # fmt: skip
    answer = client.start_document_analysis(
        DocumentLocation={"S3Object": {"Bucket": "invoices", "Name": name}},
        FeatureTypes=["FORMS", "TABLES"],
        NotificationChannel={"SNSTopicArn": TOPIC, "RoleArn": ROLE},
        JobTag=tag,
    )
    job_id: str = answer["JobId"]
    return job_id


def _written(out: Path, job_id: str) -> dict[str, Any] | None:
    path = out / "tx" / f"{safe_name(job_id)}.json"
    return json.loads(path.read_text()) if path.exists() else None


async def test_boto3_submission_reaches_the_file_handler_through_sns(
    tmp_path: Path, aws_env: None
) -> None:
    port = free_port()
    sim = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY, region=REGION,
                      duration=0.1, blocks=2500, sns_endpoint=f"http://127.0.0.1:{port}/webhooks/tx",
                      requests_per_second=50,
                      topic_arn=TOPIC)  # fmt: skip
    async with running(sim, tmp_path / "sim") as (api_url, sns_url):
        settings = textract_settings(tmp_path, api_url, sns_url)
        app = create_app(settings)
        async with live_server(app, port=port) as url:
            sim.sns.subscribe()
            assert sim.sns.subscription is not None
            subscription = sim.sns.subscription
            await wait_for(lambda: subscription.confirmed)

            ok, failed, partial = await asyncio.gather(
                asyncio.to_thread(_submit, api_url, "invoice.pdf", "team-42"),
                asyncio.to_thread(_submit, api_url, "fail.pdf", "team-43"),
                asyncio.to_thread(_submit, api_url, "partial.pdf", "team-44"),
            )
            out = tmp_path / "out"
            await wait_for(lambda: all(_written(out, j) for j in (ok, failed, partial)), 20)

            done = _written(out, ok)
            assert done is not None
            assert done["state"] == "succeeded"
            assert done["provider_status"] == "SUCCEEDED"
            assert done["metadata"]["JobTag"] == "team-42"
            # Textract's own confidences (percent) as jobhook's field confidence (0..1).
            assert done["fields"] == {"Invoice number": 0.97, "Date": 0.91, "Total": 0.715}
            assert done["error_code"] is None
            assert done["metadata"]["API"] == "StartDocumentAnalysis"
            assert done["metadata"]["DocumentLocation"]["S3ObjectName"] == "invoice.pdf"
            data = (out / "tx" / f"{ok}.result").read_bytes()
            assert hashlib.sha256(data).hexdigest() == done["result"]["sha256"]
            result = json.loads(data)
            assert len(result["Blocks"]) == 2500  # three NextToken pages, concatenated
            assert result["ResponsePages"] == 3
            assert "NextToken" not in result
            assert result["JobStatus"] == "SUCCEEDED"

            bad = _written(out, failed)
            assert bad is not None
            assert bad["state"] == "failed"
            assert bad["result"] is None
            assert bad["error_code"] == "FAILED"
            half = _written(out, partial)
            assert half is not None
            assert half["state"] == "partial"
            assert half["provider_status"] == "PARTIAL_SUCCESS"
            assert half["error_code"] == "UNSUPPORTED_DOCUMENT"
            assert json.loads((out / "tx" / f"{partial}.result").read_bytes())["Warnings"]

            async with httpx.AsyncClient(base_url=url, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as admin:  # fmt: skip
                job = (await admin.get(f"/jobs/tx/{ok}")).json()["job"]
                failed_job = (await admin.get(f"/jobs/tx/{failed}")).json()["job"]
                partial_job = (await admin.get(f"/jobs/tx/{partial}")).json()["job"]
            assert job["fields"] == {"Invoice number": 0.97, "Date": 0.91, "Total": 0.715}
            assert job["confidence"] == 0.715
            assert failed_job["error_code"] == "FAILED"
            assert partial_job["error_code"] == "UNSUPPORTED_DOCUMENT"
            # A refusal is answered as every webhook refusal is: 4xx and its reason.
            async with httpx.AsyncClient() as plain:
                raw = await plain.post(f"{url}/webhooks/tx", content=b'{"JobId": "x"}')
            assert raw.status_code == 400
            assert raw.json()["error"] == "raw_delivery"
            # Notifications were confirmed with Get* (signed: the simulator checks SigV4).
            assert sim.calls["GetDocumentAnalysis"] >= 2 + 3 + 3
            assert len(sim.sns.delivered) == 4

            # A reload (SIGHUP, a rotated file) keeps the SNS source able to fetch certificates.
            reloader = Reloader(app, tmp_path / "jobhook.toml")
            assert await reloader.reload("test")
            after = await asyncio.to_thread(_submit, api_url, "later.pdf", "team-45")
            await wait_for(lambda: _written(out, after) is not None, 20)


async def test_without_sns_a_tracked_job_is_polled_and_a_forgotten_one_expires(
    tmp_path: Path, aws_env: None
) -> None:
    sim = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY, region=REGION,
                      duration=0.05, requests_per_second=50)  # fmt: skip
    async with running(sim, tmp_path / "sim") as (api_url, sns_url):
        poll = "grace_seconds = 0\ninitial_delay = 0.05\nmax_delay = 0.1\nrequests_per_minute = 480"
        settings = textract_settings(tmp_path, api_url, sns_url, poll=poll)
        async with live_server(create_app(settings)) as url:
            client = boto3.client(
                "textract",
                endpoint_url=api_url,
                region_name=REGION,
                aws_access_key_id=KEY_ID,
                aws_secret_access_key=SECRET_KEY,
            )
            answer = await asyncio.to_thread(
                client.start_expense_analysis,
                DocumentLocation={"S3Object": {"Bucket": "receipts", "Name": "r.png"}},
            )
            expense = f"ExpenseAnalysis:{answer['JobId']}"
            gone = "f" * 64
            async with httpx.AsyncClient(base_url=url, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as admin:  # fmt: skip
                for job_id in (expense, gone):
                    tracked = await admin.post("/jobs", json={"source": "tx", "job_id": job_id})
                    assert tracked.status_code in (200, 201), tracked.text
                out = tmp_path / "out"
                await wait_for(lambda: all(_written(out, j) for j in (expense, gone)), 20)
                job = (await admin.get(f"/jobs/tx/{expense}")).json()["job"]
            done = _written(out, expense)
            assert done is not None
            assert done["state"] == "succeeded"
            assert done["fields"] == {"INVOICE_RECEIPT_ID": 0.974, "TOTAL": 0.745}
            assert job["fields"] == done["fields"]
            expired = _written(out, gone)
            assert expired is not None
            assert expired["state"] == "expired"
            assert "InvalidJobIdException" in expired["error"]
