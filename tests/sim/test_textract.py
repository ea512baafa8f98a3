"""The Textract simulator speaks what boto3 (botocore's service model) sends and expects."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from receiver.sim.textract import TextractSim, running
from tests.textract_support import KEY_ID, REGION, ROLE, SECRET_KEY, TOPIC

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[TextractSim, str]]:
    simulator = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY, duration=0.05,
                            blocks=2345, requests_per_second=1000)  # fmt: skip
    async with running(simulator, tmp_path / "sim") as (url, _):
        yield simulator, url


def client(url: str, secret: str = SECRET_KEY) -> Any:
    return boto3.client("textract", endpoint_url=url, region_name=REGION,
                        aws_access_key_id=KEY_ID, aws_secret_access_key=secret,
                        config=Config(retries={"max_attempts": 1, "mode": "standard"}))  # fmt: skip


def _all_pages(url: str) -> tuple[str, list[dict[str, Any]]]:
    textract = client(url)
    job_id = textract.start_document_analysis(
        DocumentLocation={"S3Object": {"Bucket": "docs", "Name": "a.pdf"}},
        FeatureTypes=["FORMS"], JobTag="team-1",
        NotificationChannel={"SNSTopicArn": TOPIC, "RoleArn": ROLE},
    )["JobId"]  # fmt: skip
    time.sleep(0.1)  # the job takes 0.05 s
    pages = [textract.get_document_analysis(JobId=job_id)]  # botocore has no paginator for it
    while "NextToken" in pages[-1]:
        pages.append(textract.get_document_analysis(JobId=job_id, NextToken=pages[-1]["NextToken"]))
    return job_id, pages


async def test_boto3_pages_a_finished_analysis_by_next_token(sim: tuple[TextractSim, str]) -> None:
    job_id, pages = await asyncio.to_thread(_all_pages, sim[1])
    assert [len(page["Blocks"]) for page in pages] == [1000, 1000, 345]
    assert all(page["JobStatus"] == "SUCCEEDED" for page in pages)
    assert "NextToken" not in pages[-1]
    assert sim[0].jobs[job_id].tag == "team-1"
    assert sim[0].jobs[job_id].topic == TOPIC


def _error_of(call: Any, **kwargs: Any) -> tuple[str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


async def test_errors_are_aws_errors_as_boto3_reads_them(sim: tuple[TextractSim, str]) -> None:
    textract = client(sim[1])
    gone = await asyncio.to_thread(_error_of, textract.get_document_analysis, JobId="f" * 64)
    assert gone == ("InvalidJobIdException", 400)
    sim[0].throttle_every = 1
    throttled = await asyncio.to_thread(_error_of, textract.get_expense_analysis, JobId="f" * 64)
    assert throttled == ("ThrottlingException", 400)
    sim[0].throttle_every = 0
    sim[0].interval = 60.0  # one request a minute: the next is over the budget
    await asyncio.to_thread(_error_of, textract.get_lending_analysis, JobId="f" * 64)
    over = await asyncio.to_thread(_error_of, textract.get_document_text_detection, JobId="f" * 64)
    assert over == ("ProvisionedThroughputExceededException", 400)


async def test_a_request_signed_with_another_secret_is_refused(
    sim: tuple[TextractSim, str],
) -> None:
    textract = client(sim[1], secret="wrong-secret")
    refused = await asyncio.to_thread(_error_of, textract.get_document_analysis, JobId="f" * 64)
    assert refused == ("InvalidSignatureException", 403)


async def test_the_json_11_protocol_is_required(sim: tuple[TextractSim, str]) -> None:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            sim[1] + "/",
            json={"JobId": "x"},
            headers={"X-Amz-Target": "Textract.GetDocumentAnalysis"},
        )
    assert answer.status_code == 400
    assert answer.json()["__type"] == "SerializationException"


async def test_every_page_of_the_document_has_its_page_block_before_its_own_blocks(
    sim: tuple[TextractSim, str],
) -> None:
    sim[0].pages = 4
    _, answers = await asyncio.to_thread(_all_pages, sim[1])
    blocks = [block for answer in answers for block in answer["Blocks"]]
    assert len(blocks) == 2345
    assert {answer["DocumentMetadata"]["Pages"] for answer in answers} == {4}
    page_blocks = [block for block in blocks if block["BlockType"] == "PAGE"]
    assert [block["Page"] for block in page_blocks] == [1, 2, 3, 4]
    current = 0
    for block in blocks:  # page by page, each page's PAGE block first
        if block["BlockType"] == "PAGE":
            assert block["Page"] == current + 1
            current = block["Page"]
        assert block["Page"] == current
    for page in page_blocks:
        (children,) = [r["Ids"] for r in page["Relationships"] if r["Type"] == "CHILD"]
        expected = [b["Id"] for b in blocks if b["Page"] == page["Page"]
                    and b["BlockType"] in ("LINE", "KEY_VALUE_SET")]  # fmt: skip
        assert children == expected
        assert children
