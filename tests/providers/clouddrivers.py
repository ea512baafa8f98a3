"""The contract suite's drivers for the cloud providers' simulators: Textract (with SNS),
Azure Document Intelligence and Google Document AI.

Each simulator is served from a thread (``served_in_thread``), and a job is made in a state
the way the simulator's own tests make one: Textract's through boto3 (``StartDocumentAnalysis``,
SigV4 checked) and then ended at once; Azure's and Google's operations started as far back on
the simulator's clock as the state needs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import uuid
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.azure import AzureOptions
from receiver.providers.contract_suite import REQUIRED_STATES, SimulatorDriver
from receiver.providers.google import GcpOptions
from receiver.providers.textract import AwsSettings
from receiver.secret import Secret
from receiver.sim import ManualClock
from receiver.sim.azure import AzureDocIntelSim, Operation
from receiver.sim.google import BatchOperation, DocumentAISim
from receiver.sim.textract import TextractSim
from tests.providers.simdriver import served_in_thread
from tests.textract_support import KEY_ID, REGION, ROLE, SECRET_KEY, TOPIC

if TYPE_CHECKING:
    from collections.abc import Iterator

DURATION = 1_000.0
"""Simulated seconds an Azure or Google operation runs: far longer than any wait in the suite."""
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


class TextractDriver(SimulatorDriver):
    """Textract's API on loopback; SNS's notifications as its topic would deliver them."""

    states = (State.RUNNING, State.SUCCEEDED, State.PARTIAL, State.FAILED)
    webhook_metadata: frozenset[State] = frozenset()
    # SNS says SUCCEEDED for a partial success; the Get* answer tells it.
    webhook_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})

    def __init__(self, sim: TextractSim, base_url: str) -> None:
        self.sim = sim
        self.base_url = base_url
        self.api_key = ""  # SigV4: the key pair comes from the environment
        aws = AwsSettings(region=REGION, topic_arns=(TOPIC,))
        self.provider = get_provider("textract", table=aws)
        self._client = boto3.client("textract", endpoint_url=base_url, region_name=REGION,
                                    aws_access_key_id=KEY_ID,
                                    aws_secret_access_key=SECRET_KEY)  # fmt: skip

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        name = {State.FAILED: "fail", State.PARTIAL: "partial"}.get(state, "doc")
        answer = self._client.start_document_analysis(
            DocumentLocation={"S3Object": {"Bucket": "docs", "Name": f"contract-{name}.pdf"}},
            FeatureTypes=["FORMS"],
            JobTag=str(metadata.get("contract", "contract")),
            NotificationChannel={"SNSTopicArn": TOPIC, "RoleArn": ROLE},
        )
        job_id: str = answer["JobId"]
        if state is not State.RUNNING:
            self.sim.finish(self.sim.jobs[job_id])
        return job_id

    async def webhook_body(self, job_id: str) -> Any:
        job = self.sim.jobs[job_id]
        if job.status == "IN_PROGRESS":
            return None  # SNS hears of a job once, when it ends
        message = json.dumps(self.sim.notification(job))
        return self.sim.sns.envelope("Notification", TOPIC, message)

    async def throttle(self, retry_after: int) -> float | None:
        self.sim.throttle_next = 1
        return None  # Textract's ThrottlingException names no wait

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "JobStatus": word}

    def reword_webhook(self, body: Any, word: str) -> Any:
        message = json.loads(body["Message"])
        return {**body, "Message": json.dumps({**message, "Status": word})}


class AzureDriver(SimulatorDriver):
    """Document Intelligence's analyze operations on loopback, on a clock moved by hand."""

    unknown_job = "prebuilt-layout:00000000-0000-4000-8000-00000000c0de"

    def __init__(self, sim: AzureDocIntelSim, clock: ManualClock, base_url: str) -> None:
        self.sim = sim
        self.clock = clock
        self.base_url = base_url
        self.api_key = sim.api_key
        self.provider = get_provider("azure-docintel", table=AzureOptions())
        self._rate = sim.requests_per_second
        self._spent_until: float | None = None

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        result_id = str(uuid.uuid4())
        ago = {State.QUEUED: 0.0, State.RUNNING: DURATION / 2}.get(state, DURATION)
        self.sim.operations[result_id] = Operation(
            result_id, "prebuilt-layout", "2024-11-30", self.clock.time() - ago,
            "2026-11-26T21:00:00Z", pages=1, corrupt=state is State.FAILED,
        )  # fmt: skip
        return f"prebuilt-layout:{result_id}"

    async def webhook_body(self, job_id: str) -> Any:
        return None

    async def throttle(self, retry_after: int) -> float | None:
        # This second's requests spent: answers are 429 (Retry-After: 1) until the next.
        self._rate = self.sim.requests_per_second
        self._spent_until = self.clock.time() + 1.0
        self.sim.requests_per_second = 0
        return 1.0

    async def elapse(self, seconds: float) -> None:
        self.clock.advance(seconds)
        if self._spent_until is not None and self.clock.time() >= self._spent_until - 1e-6:
            self.sim.requests_per_second, self._spent_until = self._rate, None

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "status": word}

    def reword_webhook(self, body: Any, word: str) -> Any:
        raise AssertionError("Azure Document Intelligence sends no webhooks")


class GoogleDriver(SimulatorDriver):
    """Document AI's operations, token endpoint and Cloud Storage on loopback, on a clock moved
    by hand; a partial batch is one whose second input is missing."""

    states = (*REQUIRED_STATES, State.PARTIAL)
    # Document AI has no word for a partial batch: SUCCEEDED, with a document that failed.
    job_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})
    unknown_job = "sim-project:us:4040404040404040404"

    def __init__(self, sim: DocumentAISim, clock: ManualClock, base_url: str) -> None:
        self.sim = sim
        self.clock = clock
        self.base_url = base_url
        self.api_key = ""  # OAuth2: a token made from the service-account key
        key = Secret(json.dumps(sim.service_account_key()))
        options = GcpOptions(credentials=key, storage_url=base_url)
        self.provider = get_provider("google-docai", table=options)
        self.sim.put("gs://contract-in/doc.pdf", PDF)
        self.sim.put("gs://contract-in/notes.txt", b"not a document", "text/plain")
        self._quota = sim.requests_per_minute
        self._spent_until: float | None = None

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        inputs = {
            State.FAILED: ["gs://contract-in/notes.txt"],
            State.PARTIAL: ["gs://contract-in/doc.pdf", "gs://contract-in/missing.pdf"],
        }.get(state, ["gs://contract-in/doc.pdf"])
        ago = {State.QUEUED: 0.0, State.RUNNING: DURATION / 2}.get(state, DURATION)
        op_id = str(uuid.uuid4().int)[:19]
        name = f"projects/sim-project/locations/us/operations/{op_id}"
        self.sim.operations[op_id] = BatchOperation(
            name, "sim-project", inputs, "gs://contract-out/results", self.clock.time() - ago, ""
        )
        return f"sim-project:us:{op_id}"

    async def webhook_body(self, job_id: str) -> Any:
        return None

    async def throttle(self, retry_after: int) -> float | None:
        # The project's per-minute quota spent: answers are 429 (Retry-After: 60) for a minute.
        self._spent_until = self.clock.time() + 60.0
        self.sim.requests_per_minute = 0
        return 60.0

    async def elapse(self, seconds: float) -> None:
        self.clock.advance(seconds)
        if self._spent_until is not None and self.clock.time() >= self._spent_until - 1e-6:
            self.sim.requests_per_minute, self._spent_until = self._quota, None

    def reword_job(self, body: Any, word: str) -> Any:
        # A finished operation's ``done`` decides its state whatever the word says: the word
        # alone decides only while the operation runs, so the reworded answer is a running one.
        reworded = {k: v for k, v in copy.deepcopy(body).items()
                    if k not in ("done", "response", "error")}  # fmt: skip
        reworded["metadata"]["state"] = word
        return reworded

    def reword_webhook(self, body: Any, word: str) -> Any:
        raise AssertionError("Google Document AI sends no webhooks")


@contextlib.contextmanager
def textract_driver() -> Iterator[TextractDriver]:
    """Textract's simulator (its jobs ended by the driver), the key pair in the environment."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        env.setenv("AWS_CONFIG_FILE", "/nonexistent/jobhook-contract-aws-config")
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/jobhook-contract-aws-credentials")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        sim = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY, region=REGION,
                          duration=DURATION, blocks=2100, requests_per_second=1e6)  # fmt: skip
        with served_in_thread(sim.api_app()) as url:
            yield TextractDriver(sim, url)


@contextlib.contextmanager
def azure_driver() -> Iterator[AzureDriver]:
    clock = ManualClock()
    sim = AzureDocIntelSim(api_key="contract-az-key-123", duration=DURATION, clock=clock.time)
    with served_in_thread(sim.app()) as url:
        yield AzureDriver(sim, clock, url)


@contextlib.contextmanager
def google_driver() -> Iterator[GoogleDriver]:
    clock = ManualClock()
    sim = DocumentAISim(duration=DURATION, clock=clock.time)
    with served_in_thread(sim.app()) as url:
        sim.public_url = url
        yield GoogleDriver(sim, clock, url)
