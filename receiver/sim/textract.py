"""``jobhook simulate --provider textract``: Textract's JSON 1.1 API, and Amazon SNS beside it.

The API (plain http on loopback) answers ``POST /`` with ``X-Amz-Target: Textract.<Operation>``
and ``Content-Type: application/x-amz-json-1.1``, each request's SigV4 signature checked with
botocore against the configured key pair, exactly the shapes of botocore's service model: the
four ``Start*`` submissions and their ``Get*`` answers paged by ``NextToken`` (at most 1,000
blocks a page; 20 expense documents; 30 lending pages), errors as ``{"__type", "message"}``
with HTTP 400 (``InvalidJobIdException``, ``ProvisionedThroughputExceededException`` over the
key's budget, ``ThrottlingException`` on demand), jobs forgotten after their retention.

As SNS (``receiver.sim.sns``) it serves https on a second port, with its own CA (made at start,
written to ``ca.pem`` in the state directory): the signing certificate, and
``ConfirmSubscription`` at the ``SubscribeURL`` it sends. At start it asks the endpoint to
confirm its subscription; once confirmed, each finished job whose ``NotificationChannel`` names
the topic is delivered as a signed ``Notification``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hmac
import itertools
import json
import os
import secrets
import signal
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.errors import ConfigError
from receiver.sim.sns import SnsSide, Subscription
from receiver.sockets import bound_socket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.requests import Request

log = structlog.get_logger("receiver.sim.textract")

JSON_11 = "application/x-amz-json-1.1"
PAGE_LIMITS = {
    "DocumentAnalysis": 1000,
    "DocumentTextDetection": 1000,
    "ExpenseAnalysis": 20,
    "LendingAnalysis": 30,
}
LIST_KEYS = {
    "DocumentAnalysis": "Blocks",
    "DocumentTextDetection": "Blocks",
    "ExpenseAnalysis": "ExpenseDocuments",
    "LendingAnalysis": "Results",
}
FORM = (
    ("Invoice number:", "INV-0042", 98.5, 97.0),
    ("Date:", "2026-11-26", 93.25, 91.0),
    ("Total:", "1,280.00", 71.5, 88.0),
)
"""The form every analysed document holds: (key, value, key confidence, value confidence)."""
MODEL_VERSION_KEYS = {
    "DocumentAnalysis": "AnalyzeDocumentModelVersion",
    "DocumentTextDetection": "DetectDocumentTextModelVersion",
    "ExpenseAnalysis": "AnalyzeExpenseModelVersion",
    "LendingAnalysis": "AnalyzeLendingModelVersion",
}


@dataclass
class Job:
    job_id: str
    api: str
    location: dict[str, Any]
    tag: str | None
    topic: str | None
    started: float
    status: str = "IN_PROGRESS"
    items: list[Any] = field(default_factory=list)
    pages: int = 3


class TextractSim:
    """Textract's jobs, keys and budget, and the SNS topic that announces them."""

    def __init__(
        self,
        *,
        access_key_id: str,
        secret_access_key: str,
        region: str = "us-east-1",
        duration: float = 0.2,
        blocks: int = 2500,
        pages: int = 3,
        requests_per_second: float = 10.0,
        throttle_every: int = 0,
        retention_seconds: float = 7 * 86_400,
        sns_endpoint: str | None = None,
        topic_arn: str | None = None,
        signature_version: str = "2",
    ) -> None:
        self.keys = {access_key_id: secret_access_key}
        self.region = region
        self.duration = duration
        self.blocks = blocks
        self.pages = pages
        """Pages of each document: its ``DocumentMetadata.Pages`` and one ``PAGE`` block each."""
        self.interval = 1.0 / requests_per_second
        self.throttle_every = throttle_every
        self.throttle_next = 0
        """How many of the next ``Get*`` calls are throttled, whatever ``throttle_every`` says."""
        self.retention = retention_seconds
        self.jobs: dict[str, Job] = {}
        self.calls: dict[str, int] = {}
        self._next_slot = 0.0
        self._gets = itertools.count(1)
        self.sns = SnsSide(signature_version)
        if sns_endpoint is not None and topic_arn is not None:
            self.sns.subscription = Subscription(topic_arn, sns_endpoint, secrets.token_hex(32))

    def api_app(self) -> Starlette:
        return Starlette(routes=[Route("/", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        target = request.headers.get("x-amz-target", "")
        service, _, operation = target.partition(".")
        body = await request.body()
        if service != "Textract" or not operation:
            return _error("UnknownOperationException", "missing or unknown X-Amz-Target")
        if request.headers.get("content-type", "").split(";")[0] != JSON_11:
            return _error("SerializationException", f"Content-Type must be {JSON_11}")
        problem = self._check_signature(request, body)
        if problem is not None:
            return _error(problem[0], problem[1], status=problem[2])
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            return _error("SerializationException", "the body is not JSON")
        if not isinstance(payload, dict):
            return _error("SerializationException", "the body is not a JSON object")
        self.calls[operation] = self.calls.get(operation, 0) + 1
        now = time.monotonic()
        if now < self._next_slot:
            return _error(
                "ProvisionedThroughputExceededException",
                "The number of requests exceeded your throughput limit.",
            )
        self._next_slot = now + self.interval
        if operation.startswith("Start") and operation[5:] in LIST_KEYS:
            return self._start(operation[5:], payload)
        if operation.startswith("Get") and operation[3:] in LIST_KEYS:
            throttled = bool(self.throttle_every) and next(self._gets) % self.throttle_every == 0
            if self.throttle_next > 0:
                self.throttle_next -= 1
                throttled = True
            if throttled:
                return _error(
                    "ThrottlingException",
                    "Amazon Textract is temporarily unable to "
                    "process the request. Try your call again.",
                )
            return self._get(operation[3:], payload)
        return _error("UnknownOperationException", f"unknown operation {operation}")

    def _check_signature(self, request: Request, body: bytes) -> tuple[str, str, int] | None:
        """SigV4 recomputed with botocore's signer over what the client signed."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        header = request.headers.get("authorization", "")
        if not header.startswith("AWS4-HMAC-SHA256 "):
            return "MissingAuthenticationTokenException", "Missing Authentication Token", 400
        parts = dict(p.strip().split("=", 1) for p in header[17:].split(",") if "=" in p)
        scope = parts.get("Credential", "").split("/")
        if len(scope) != 5 or scope[0] not in self.keys:
            return "UnrecognizedClientException", "The security token included is invalid.", 400
        if scope[2:4] != [self.region, "textract"]:
            return "InvalidSignatureException", f"Credential should be scoped to {self.region}", 403
        stamp = request.headers.get("x-amz-date", "")
        try:
            signed_at = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            return "InvalidSignatureException", "X-Amz-Date is missing or malformed", 403
        if abs(time.time() - signed_at.timestamp()) > 15 * 60:
            return "InvalidSignatureException", "Signature expired", 403
        names = parts.get("SignedHeaders", "").split(";")
        aws = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=body,
            headers={n: request.headers.get(n, "") for n in names},
        )
        aws.context["timestamp"] = stamp
        token = request.headers.get("x-amz-security-token")
        signer = SigV4Auth(
            Credentials(scope[0], self.keys[scope[0]], token), "textract", self.region
        )
        expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
        if not hmac.compare_digest(expected, parts.get("Signature", "")):
            return (
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
                403,
            )
        return None

    def _start(self, api: str, payload: dict[str, Any]) -> Response:
        location = payload.get("DocumentLocation")
        s3 = location.get("S3Object") if isinstance(location, dict) else None
        if not isinstance(s3, dict) or not s3.get("Bucket") or not s3.get("Name"):
            return _error("InvalidParameterException", "DocumentLocation.S3Object is required")
        if api == "DocumentAnalysis" and not payload.get("FeatureTypes"):
            return _error("InvalidParameterException", "FeatureTypes is required")
        channel = payload.get("NotificationChannel")
        topic = None
        if channel is not None:
            if (
                not isinstance(channel, dict)
                or not channel.get("SNSTopicArn")
                or not channel.get("RoleArn")
            ):
                return _error(
                    "InvalidParameterException", "NotificationChannel needs SNSTopicArn and RoleArn"
                )
            topic = channel["SNSTopicArn"]
        job = Job(
            uuid.uuid4().hex + uuid.uuid4().hex,
            api,
            {"S3Bucket": s3["Bucket"], "S3ObjectName": s3["Name"]},
            payload.get("JobTag"),
            topic,
            time.time(),
            pages=self.pages,
        )
        self.jobs[job.job_id] = job
        asyncio.get_running_loop().call_later(self.duration, self._finish, job)
        return JSONResponse({"JobId": job.job_id}, media_type=JSON_11)

    def _finish(self, job: Job) -> None:
        if job.status == "IN_PROGRESS":
            self.finish(job)

    def finish(self, job: Job) -> None:
        """End ``job`` now, as its ``duration`` running out does: its outcome follows from the
        document's name (``fail``: FAILED, ``partial``: PARTIAL_SUCCESS), and the topic hears."""
        name = str(job.location["S3ObjectName"]).lower()
        job.status = (
            "FAILED" if "fail" in name else "PARTIAL_SUCCESS" if "partial" in name else "SUCCEEDED"
        )
        if job.status != "FAILED":
            job.items = _items(job.api, self.blocks, job.pages)
        if job.topic is not None:
            self.sns.publish(job.topic, self.notification(job))

    def notification(self, job: Job) -> dict[str, Any]:
        """The SNS ``Message`` of a finished job: its Status is SUCCEEDED, FAILED or ERROR,
        never PARTIAL_SUCCESS (only the ``Get*`` answer tells a partial success)."""
        status = "SUCCEEDED" if job.status == "PARTIAL_SUCCESS" else job.status
        return {"JobId": job.job_id, "Status": status, "API": f"Start{job.api}",
                "JobTag": job.tag, "Timestamp": int(time.time() * 1000),
                "DocumentLocation": job.location}  # fmt: skip

    def _get(self, api: str, payload: dict[str, Any]) -> Response:
        job = self.jobs.get(str(payload.get("JobId")))
        if job is None or job.api != api or time.time() - job.started > self.retention:
            return _error("InvalidJobIdException", "An invalid job identifier was passed.")
        limit = PAGE_LIMITS[api]
        size = payload.get("MaxResults", limit)
        if not isinstance(size, int) or size < 1:
            return _error("InvalidParameterException", "MaxResults must be at least 1")
        size = min(size, limit)
        start = 0
        token = payload.get("NextToken")
        if token is not None:
            try:
                start = int(base64.urlsafe_b64decode(str(token)).decode().split(":")[1])
            except (ValueError, IndexError):
                return _error("InvalidParameterException", "NextToken is not valid")
        answer: dict[str, Any] = {"DocumentMetadata": {"Pages": job.pages}, "JobStatus": job.status}
        if job.status == "FAILED":
            answer["StatusMessage"] = "Request has unsupported document format"
        if job.status in ("SUCCEEDED", "PARTIAL_SUCCESS"):
            answer[LIST_KEYS[api]] = job.items[start : start + size]
            if start + size < len(job.items):
                following = f"{job.job_id}:{start + size}".encode()
                answer["NextToken"] = base64.urlsafe_b64encode(following).decode()
        if job.status == "PARTIAL_SUCCESS":
            answer["Warnings"] = [{"ErrorCode": "UNSUPPORTED_DOCUMENT", "Pages": [job.pages]}]
        answer[MODEL_VERSION_KEYS[api]] = "1.0"
        return JSONResponse(answer, media_type=JSON_11)


def _error(kind: str, message: str, *, status: int = 400) -> Response:
    return JSONResponse(
        {"__type": kind, "message": message}, status_code=status, media_type=JSON_11
    )


def _items(api: str, count: int, pages: int) -> list[Any]:
    """A finished job's list: expense documents, lending pages, or ``_blocks``."""
    if api == "ExpenseAnalysis":
        return [
            {
                "ExpenseIndex": 1,
                "SummaryFields": [
                    {
                        "Type": {"Text": "INVOICE_RECEIPT_ID", "Confidence": 99.1},
                        "ValueDetection": {"Text": "INV-0042", "Confidence": 97.4},
                        "PageNumber": 1,
                    },
                    {
                        "Type": {"Text": "TOTAL", "Confidence": 98.0},
                        "ValueDetection": {"Text": "1,280.00", "Confidence": 74.5},
                        "PageNumber": 1,
                    },
                ],
                "LineItemGroups": [],
                "Blocks": [],
            }
        ]
    if api == "LendingAnalysis":
        return [
            {
                "Page": 1,
                "PageClassification": {
                    "PageType": [{"Value": "PAYSLIPS", "Confidence": 99.0}],
                    "PageNumber": [{"Value": "1", "Confidence": 99.0}],
                },
                "Extractions": [
                    {
                        "LendingDocument": {
                            "LendingFields": [
                                {
                                    "Type": "GROSS_PAY",
                                    "ValueDetections": [{"Text": "5,000.00", "Confidence": 95.5}],
                                }
                            ],
                            "SignatureDetections": [],
                        }
                    }
                ],
            }
        ]
    return _blocks(api, count, pages)


def _blocks(api: str, count: int, pages: int) -> list[dict[str, Any]]:
    """A document's blocks as Textract orders them: page by page, each page's ``PAGE`` block
    (its ``CHILD`` relationship listing the page's lines and key-value sets) before the page's
    own blocks; the form ``FORM`` on the first page (``DocumentAnalysis``), then lines spread
    evenly over the pages. ``count`` blocks in all, or just the pages and the form when those
    are more."""
    form = _form_blocks() if api == "DocumentAnalysis" else []
    lines = max(0, count - pages - len(form))
    blocks: list[dict[str, Any]] = []
    n = 0
    for page in range(1, pages + 1):
        own = list(form) if page == 1 else []
        for _ in range(lines // pages + (1 if page <= lines % pages else 0)):
            own.append({"BlockType": "LINE", "Id": f"line-{n}", "Text": f"line {n}",
                        "Page": page, "Confidence": 99.0})  # fmt: skip
            n += 1
        children = [b["Id"] for b in own if b["BlockType"] in ("LINE", "KEY_VALUE_SET")]
        relationships = [{"Type": "CHILD", "Ids": children}] if children else []
        blocks.append({"BlockType": "PAGE", "Id": f"page-{page}", "Page": page,
                       "Confidence": 99.9, "Relationships": relationships})  # fmt: skip
        blocks.extend(own)
    return blocks


def _form_blocks() -> list[dict[str, Any]]:
    """``FORM`` as key-value sets and their words, on page 1."""
    blocks: list[dict[str, Any]] = []
    for n, (key, value, key_conf, value_conf) in enumerate(FORM):
        key_words = [
            {
                "BlockType": "WORD",
                "Id": f"kw-{n}-{i}",
                "Text": word,
                "Page": 1,
                "Confidence": key_conf,
            }
            for i, word in enumerate(key.split())
        ]
        value_word = {
            "BlockType": "WORD",
            "Id": f"vw-{n}",
            "Text": value,
            "Page": 1,
            "Confidence": value_conf,
        }
        blocks.append(
            {
                "BlockType": "KEY_VALUE_SET",
                "Id": f"key-{n}",
                "Page": 1,
                "EntityTypes": ["KEY"],
                "Confidence": key_conf,
                "Relationships": [
                    {"Type": "VALUE", "Ids": [f"value-{n}"]},
                    {"Type": "CHILD", "Ids": [w["Id"] for w in key_words]},
                ],
            }
        )
        blocks.append(
            {
                "BlockType": "KEY_VALUE_SET",
                "Id": f"value-{n}",
                "Page": 1,
                "EntityTypes": ["VALUE"],
                "Confidence": value_conf,
                "Relationships": [{"Type": "CHILD", "Ids": [f"vw-{n}"]}],
            }
        )
        blocks.extend([*key_words, value_word])
    return blocks


@contextlib.asynccontextmanager
async def running(
    sim: TextractSim,
    state_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    sns_port: int = 0,
    sns_host: str = "localhost",
) -> AsyncIterator[tuple[str, str]]:
    """Serve the API (http) and SNS (https, as ``sns_host``) for the block: their base URLs.

    The CA that issued SNS's TLS certificate is written to ``state_dir/ca.pem``.
    """
    cert_file, key_file = write_materials(sim, state_dir)
    with bound_socket(host, port) as api, bound_socket(host, sns_port) as sns:  # held: no race
        sockets = [api, sns]
        port, sns_port = (int(sock.getsockname()[1]) for sock in sockets)
        sim.sns.base_url = f"https://{sns_host}:{sns_port}"
        servers = [
            uvicorn.Server(
                uvicorn.Config(
                    sim.api_app(),
                    host=host,
                    port=port,
                    log_config=None,
                    access_log=False,
                    lifespan="off",
                    loop="asyncio",
                )
            ),
            uvicorn.Server(
                uvicorn.Config(
                    sim.sns.app(),
                    host=host,
                    port=sns_port,
                    log_config=None,
                    access_log=False,
                    lifespan="off",
                    loop="asyncio",
                    ssl_certfile=str(cert_file),
                    ssl_keyfile=str(key_file),
                )
            ),
        ]
        tasks = [
            asyncio.create_task(server.serve(sockets=[sock]))
            for server, sock in zip(servers, sockets, strict=True)
        ]
        try:
            deadline = time.monotonic() + 15
            while not all(server.started for server in servers):
                if any(task.done() for task in tasks) or time.monotonic() > deadline:
                    raise RuntimeError("the textract simulator did not start")
                await asyncio.sleep(0.01)
            yield f"http://{host}:{port}", sim.sns.base_url
        finally:
            await sim.sns.aclose()
            for server in servers:
                server.should_exit = True
            with contextlib.suppress(SystemExit):
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=15)


def write_materials(sim: TextractSim, state_dir: Path) -> tuple[Path, Path]:
    """The CA bundle (``ca.pem``, for the receiver's config), and SNS's TLS certificate and key."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "ca.pem").write_bytes(sim.sns.ca_pem)
    cert_file, key_file = state_dir / "sns-cert.pem", state_dir / "sns-key.pem"
    cert_file.write_bytes(sim.sns.tls_cert_pem)
    key_file.touch(mode=0o600)
    key_file.write_bytes(sim.sns.tls_key_pem)
    return cert_file, key_file


def run_textract(
    *,
    host: str,
    port: int,
    sns_port: int,
    state_dir: Path,
    sns_host: str = "localhost",
    **options: Any,
) -> None:
    """``jobhook simulate --provider textract``: serve until SIGINT/SIGTERM."""
    from receiver.ops.log import configure_logging

    configure_logging()
    key_id, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key_id or not secret:
        raise ConfigError(
            "simulator: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the key pair whose "
            "SigV4 signatures it accepts"
        )
    sim = TextractSim(access_key_id=key_id, secret_access_key=secret, **options)

    async def main() -> None:
        async with running(
            sim, state_dir, host=host, port=port, sns_port=sns_port, sns_host=sns_host
        ) as (api, sns):
            log.info(
                "sim_serving",
                provider="textract",
                url=api,
                sns_url=sns,
                ca_bundle=str(state_dir / "ca.pem"),
            )
            sim.sns.subscribe()
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await stop.wait()

    asyncio.run(main())
