"""A faithful Azure AI Document Intelligence (API 2024-11-30): analyze operations and their polls.

What ``azure-ai-documentintelligence`` 1.0.2 sends and reads: ``POST {endpoint}/
documentintelligence/documentModels/{modelId}:analyze?api-version=2024-11-30`` with the document's
bytes (``application/octet-stream``) or JSON ``{urlSource | base64Source}``, answered 202 with
``Operation-Location: {endpoint}/documentintelligence/documentModels/{modelId}/analyzeResults/
{resultId}?api-version=...`` and ``Retry-After``; ``GET`` that URL answers ``{status,
createdDateTime, lastUpdatedDateTime, analyzeResult | error}`` with ``Retry-After`` on every
such answer (never on a 4xx refusal: azure-core would retry it). The key is
``Ocp-Apim-Subscription-Key``; every request counts against a per-second limit (S0: 15), over
which the answer is 429 with ``Retry-After: 1``. Results are kept ``retention`` seconds (24 h),
then 404.

Batches: ``POST .../documentModels/{modelId}:analyzeBatch`` with ``{azureBlobSource |
azureBlobFileListSource, resultContainerUrl, resultPrefix, overwriteExisting}`` reads the
documents from Blob Storage (the SAS URLs given: Azurite in tests) and answers 202 with
``Operation-Location: .../analyzeBatchResults/{resultId}``; when it has run, each document's
``{resultPrefix}{name}.ocr.json`` is written to the result container and ``GET`` answers
``{resultId, status: succeeded, percentCompleted, result: {succeededCount, failedCount,
skippedCount, details: [{sourceUrl, resultUrl, status, error}]}}`` — succeeded even when every
file failed, as the service does. ``GET .../analyzeBatchResults`` lists a model's batches.

A request signs in with the key, or with ``Authorization: Bearer`` and a token the Entra ID
simulator (``receiver.sim.azure_entra``) issued for ``https://cognitiveservices.azure.com``.

Documents: a PDF (``%PDF``), PNG, JPEG or TIFF is analysed; any other bytes are refused at once
(400 ``InvalidContent``); a PDF without its ``%%EOF`` trailer (truncated) fails in the operation
with the same code, as a corrupted file does.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hmac
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.sim.azure_batch import BatchFile, BatchOperation, read_sources, write_result

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

    from receiver.sim.azure_entra import EntraSim
    from receiver.sim.clouds import CloudOptions

AUDIENCE = "https://cognitiveservices.azure.com"

API_VERSIONS = ("2024-11-30", "2024-07-31-preview", "2024-02-29-preview")
MODELS = ("prebuilt-read", "prebuilt-layout", "prebuilt-invoice", "prebuilt-receipt")
_MAGIC = (b"%PDF", b"\x89PNG", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
INVOICE_FIELDS = (
    # name, type, value key, value, content, confidence (InvoiceTotal under the 0.80 alert)
    ("VendorName", "string", "valueString", "Contoso Ltd.", "Contoso Ltd.", 0.952),
    ("InvoiceId", "string", "valueString", "INV-100", "INV-100", 0.981),
    ("InvoiceDate", "date", "valueDate", "2026-11-02", "11/2/2026", 0.934),
    ("InvoiceTotal", "currency", "valueCurrency", {"amount": 1280.0, "currencyCode": "USD"},
     "$1,280.00", 0.713),
)  # fmt: skip
CORRUPT = {
    "code": "InvalidRequest",
    "message": "Invalid request.",
    "innererror": {
        "code": "InvalidContent",
        "message": "The file is corrupted or format is unsupported. Refer to documentation for "
        "the list of supported formats.",
    },
}


@dataclass
class Operation:
    """One analyze operation: what was sent, and when it started (simulated seconds)."""

    result_id: str
    model_id: str
    api_version: str
    started: float
    created: str
    pages: int
    corrupt: bool


@dataclass(frozen=True, slots=True)
class Hit:
    """One request the simulator answered: when (its clock), what, and how."""

    at: float
    method: str
    path: str
    status: int
    auth: str = "key"
    """How the request signed in: ``key`` or ``bearer``."""


@dataclass
class AzureDocIntelSim:
    """The service's state: operations by result id, the request log, the rate window."""

    api_key: str
    duration: float = 2.0
    """Seconds an operation runs (``notStarted`` for the first tenth)."""
    retry_after: float = 1.0
    """The ``Retry-After`` every answer carries (the SDK's and jobhook's polling pace); less
    than a second (tests) is also sent as ``retry-after-ms``, which azure-core reads first."""
    requests_per_second: float = 15.0
    retention: float = 86_400.0
    clock: Callable[[], float] = time.monotonic
    operations: dict[str, Operation] = field(default_factory=dict)
    batches: dict[str, BatchOperation] = field(default_factory=dict)
    entra: EntraSim | None = None
    """Where bearer tokens come from; None: only the key is accepted."""
    hits: list[Hit] = field(default_factory=list)
    _window: collections.deque[float] = field(default_factory=collections.deque)

    def app(self) -> Starlette:
        """The ASGI app serving the Document Intelligence routes."""
        base = "/documentintelligence/documentModels"
        return Starlette(routes=[
            Route(base + "/{model}:analyze", self._analyze, methods=["POST"]),
            Route(base + "/{model}:analyzeBatch", self._analyze_batch, methods=["POST"]),
            Route(base + "/{model}/analyzeBatchResults", self._batches, methods=["GET"]),
            Route(base + "/{model}/analyzeBatchResults/{result}", self._batch,
                  methods=["GET", "DELETE"]),
            Route(base + "/{model}/analyzeResults/{result}", self._result,
                  methods=["GET", "DELETE"]),
        ])  # fmt: skip

    def polls_of(self, result_id: str) -> list[Hit]:
        """The GETs of one operation, in order."""
        return [h for h in self.hits if h.method == "GET" and h.path.endswith("/" + result_id)]

    async def _analyze(self, request: Request) -> Response:
        await request.body()  # read before any refusal, so the connection stays usable
        refused = self._gate(request)
        if refused is not None:
            return refused
        model = request.path_params["model"]
        if model not in MODELS:
            return self._error(
                request,
                404,
                "NotFound",
                "Resource not found.",
                inner=("ModelNotFound", "The requested model was not found."),
            )
        document = await self._document(request)
        if isinstance(document, Response):
            return document
        if not document.startswith(_MAGIC):
            return self._answer(request, JSONResponse({"error": CORRUPT}, status_code=400))
        result_id = str(uuid.uuid4())
        version = request.query_params["api-version"]
        self.operations[result_id] = Operation(
            result_id, model, version, self.clock(), _now(),
            pages=_pages(document),
            corrupt=document.startswith(b"%PDF") and b"%%EOF" not in document[-1024:],
        )  # fmt: skip
        origin = f"{request.url.scheme}://{request.url.netloc}"
        location = f"{origin}{base_path(model)}/analyzeResults/{result_id}?api-version={version}"
        response = Response(status_code=202, headers={"Operation-Location": location})
        return self._answer(request, response)

    async def _result(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        op = self.operations.get(request.path_params["result"])
        if op is None or op.model_id != request.path_params["model"] or self._expired(op):
            return self._error(request, 404, "NotFound", "Resource not found.")
        if request.method == "DELETE":
            del self.operations[op.result_id]
            return self._answer(request, Response(status_code=204))
        elapsed = self.clock() - op.started
        body: dict[str, Any] = {"createdDateTime": op.created, "lastUpdatedDateTime": _now()}
        if elapsed < self.duration / 10:
            body["status"] = "notStarted"
        elif elapsed < self.duration:
            body["status"] = "running"
        elif op.corrupt:
            body |= {"status": "failed", "error": CORRUPT}
        else:
            body |= {"status": "succeeded", "analyzeResult": analyze_result(op)}
        return self._answer(request, JSONResponse(body))

    async def _analyze_batch(self, request: Request) -> Response:
        body = await request.body()
        refused = self._gate(request)
        if refused is not None:
            return refused
        model = request.path_params["model"]
        if model not in MODELS:
            missing = ("ModelNotFound", "The requested model was not found.")
            return self._error(request, 404, "NotFound", "Resource not found.", inner=missing)
        try:
            asked = json.loads(body)
            source = asked.get("azureBlobSource") or asked.get("azureBlobFileListSource")
            container = asked["resultContainerUrl"]
            if not isinstance(source, dict) or not isinstance(container, str):
                raise TypeError(container)
        except (ValueError, TypeError, KeyError, AttributeError):
            wanted = ("InvalidParameter", "Specify azureBlobSource or azureBlobFileListSource, "
                      "and resultContainerUrl.")  # fmt: skip
            return self._error(request, 400, "InvalidRequest", "Invalid request.", inner=wanted)
        try:
            async with httpx.AsyncClient(timeout=10.0) as client:
                files = await read_sources(client, source)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            unread = ("InvalidContentSourceFormat",
                      f"Cannot read the source container: {type(exc).__name__}")  # fmt: skip
            return self._error(request, 400, "InvalidRequest", "Invalid request.", inner=unread)
        result_id = str(uuid.uuid4())
        version = request.query_params["api-version"]
        self.batches[result_id] = BatchOperation(
            result_id, model, version, self.clock(), _now(), result_container=container,
            result_prefix=str(asked.get("resultPrefix") or ""),
            overwrite=asked.get("overwriteExisting") is True, files=files,
        )  # fmt: skip
        origin = f"{request.url.scheme}://{request.url.netloc}"
        location = (
            f"{origin}{base_path(model)}/analyzeBatchResults/{result_id}?api-version={version}"
        )
        accepted = Response(status_code=202, headers={"Operation-Location": location})
        return self._answer(request, accepted)

    async def _batch(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        op = self.batches.get(request.path_params["result"])
        if op is None or op.model_id != request.path_params["model"]:
            return self._error(request, 404, "NotFound", "Resource not found.")
        if self.clock() - op.started > self.retention:
            return self._error(request, 404, "NotFound", "Resource not found.")
        if request.method == "DELETE":
            del self.batches[op.result_id]
            return self._answer(request, Response(status_code=204))
        if self.clock() - op.started >= self.duration and not op.finished:
            await self._run(op)
        return self._answer(request, JSONResponse(self._batch_body(op)))

    async def _batches(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        model = request.path_params["model"]
        value = [self._batch_body(op) for op in self.batches.values() if op.model_id == model]
        return self._answer(request, JSONResponse({"value": value}))

    async def _run(self, op: BatchOperation) -> None:
        """Analyse each document and write its result blob (once, when the batch is done)."""
        async with httpx.AsyncClient(timeout=10.0) as client:
            for file in op.files:
                if not file.data.startswith(_MAGIC) or (
                    file.data.startswith(b"%PDF") and b"%%EOF" not in file.data[-1024:]
                ):
                    file.status, file.error = "failed", CORRUPT
                    continue
                single = Operation(op.result_id, op.model_id, op.api_version, op.started,
                                   op.created, pages=_pages(file.data), corrupt=False)  # fmt: skip
                url = await write_result(client, op, file, analyze_result(single))
                file.status, file.result_url = ("succeeded", url) if url else ("skipped", None)
        op.finished = True

    def _batch_body(self, op: BatchOperation) -> dict[str, Any]:
        elapsed = self.clock() - op.started
        body: dict[str, Any] = {"resultId": op.result_id, "createdDateTime": op.created,
                                "lastUpdatedDateTime": _now()}  # fmt: skip
        if not op.finished:
            running = elapsed >= self.duration / 10
            percent = min(99, int(100 * elapsed / self.duration)) if self.duration else 0
            return body | {"status": "running" if running else "notStarted",
                           "percentCompleted": percent}  # fmt: skip
        details = [_detail(f) for f in op.files]
        counts = {word: sum(f.status == word for f in op.files)
                  for word in ("succeeded", "failed", "skipped")}  # fmt: skip
        return body | {
            "status": "succeeded", "percentCompleted": 100,
            "result": {"succeededCount": counts["succeeded"], "failedCount": counts["failed"],
                       "skippedCount": counts["skipped"], "details": details},
        }  # fmt: skip

    def _gate(self, request: Request) -> Response | None:
        """Key (or Entra ID token), rate and API version, in the service's order; a refusal,
        or None."""
        key = request.headers.get("ocp-apim-subscription-key", "")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.entra is not None and not key:
            if not self.entra.valid(token.strip(), AUDIENCE):
                return self._error(request, 401, "401", "Access denied due to invalid bearer "
                                   "token.")  # fmt: skip
        elif not hmac.compare_digest(key.encode(), self.api_key.encode()):
            return self._error(request, 401, "401", "Access denied due to invalid subscription "
                               "key or wrong API endpoint. Make sure to provide a valid key for "
                               "an active subscription and use a correct regional API endpoint "
                               "for your resource.")  # fmt: skip
        now = self.clock()
        while self._window and self._window[0] <= now - 1.0:
            self._window.popleft()
        if len(self._window) >= self.requests_per_second:
            return self._error(request, 429, "429", "Requests to the Analyze Operation have "
                               "exceeded rate limit of your current pricing tier. Please retry "
                               "after 1 second.")  # fmt: skip
        self._window.append(now)
        version = request.query_params.get("api-version")
        if version not in API_VERSIONS:
            return self._error(request, 400, "InvalidRequest", "Invalid request.",
                               inner=("UnsupportedApiVersion", f"The HTTP resource that matches "
                                      f"the request URI does not support the API version "
                                      f"'{version}'."))  # fmt: skip
        return None

    async def _document(self, request: Request) -> bytes | Response:
        body = await request.body()
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return body if body else self._empty(request)
        try:
            asked = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            asked = None
        if isinstance(asked, dict) and isinstance(asked.get("base64Source"), str):
            try:
                data = base64.b64decode(asked["base64Source"], validate=True)
            except (binascii.Error, ValueError):
                return self._error(
                    request,
                    400,
                    "InvalidRequest",
                    "Invalid request.",
                    inner=("InvalidBase64", "base64Source is not valid base64."),
                )
            return data if data else self._empty(request)
        if isinstance(asked, dict) and isinstance(asked.get("urlSource"), str):
            # Nothing is fetched: a URL stands for a well-formed one-page PDF.
            return b"%PDF-1.7\n/Type /Page\n%%EOF"
        return self._error(
            request,
            400,
            "InvalidRequest",
            "Invalid request.",
            inner=("InvalidParameter", "Specify urlSource or base64Source."),
        )

    def _empty(self, request: Request) -> Response:
        return self._error(
            request,
            400,
            "InvalidRequest",
            "Invalid request.",
            inner=("InvalidContentLength", "The input document is empty."),
        )

    def _expired(self, op: Operation) -> bool:
        return self.clock() - op.started > self.retention

    def _error(
        self,
        request: Request,
        status: int,
        code: str,
        message: str,
        *,
        inner: tuple[str, str] | None = None,
    ) -> Response:
        error: dict[str, Any] = {"code": code, "message": message}
        if inner is not None:
            error["innererror"] = {"code": inner[0], "message": inner[1]}
        return self._answer(request, JSONResponse({"error": error}, status_code=status))

    def _answer(self, request: Request, response: Response) -> Response:
        # Not on refusals: azure-core retries any answer that carries Retry-After. A 429 waits
        # out the one-second window.
        if response.status_code == 429:
            response.headers["Retry-After"] = "1"
        elif response.status_code in (200, 202):
            response.headers["Retry-After"] = str(math.ceil(self.retry_after))
            if self.retry_after != math.ceil(self.retry_after):
                response.headers["retry-after-ms"] = str(round(self.retry_after * 1000))
        response.headers["apim-request-id"] = str(uuid.uuid4())
        bearer = request.headers.get("authorization", "").lower().startswith("bearer ")
        self.hits.append(Hit(self.clock(), request.method, request.url.path, response.status_code,
                             "bearer" if bearer else "key"))  # fmt: skip
        return response


def base_path(model: str) -> str:
    return f"/documentintelligence/documentModels/{model}"


def analyze_result(op: Operation) -> dict[str, Any]:
    """An ``AnalyzeResult`` as the service returns it for ``op``'s model."""
    words = [f"Page {n} of the simulated document." for n in range(1, op.pages + 1)]
    content = "\n".join(words)
    pages, offset = [], 0
    for number, line in enumerate(words, start=1):
        span = {"offset": offset, "length": len(line)}
        pages.append({"pageNumber": number, "angle": 0.0, "width": 8.5, "height": 11.0,
                      "unit": "inch", "spans": [span],
                      "lines": [{"content": line, "polygon": [1, 1, 7, 1, 7, 1.3, 1, 1.3],
                                 "spans": [span]}]})  # fmt: skip
        offset += len(line) + 1
    result: dict[str, Any] = {
        "apiVersion": op.api_version,
        "modelId": op.model_id,
        "stringIndexType": "textElements",
        "content": content,
        "pages": pages,
        "styles": [],
        "contentFormat": "text",
    }
    if op.model_id == "prebuilt-invoice":
        fields = {
            name: {"type": kind, key: value, "content": text, "confidence": confidence,
                   "spans": [{"offset": 0, "length": len(text)}],
                   "boundingRegions": [{"pageNumber": 1, "polygon": [1, 1, 3, 1, 3, 1.2, 1, 1.2]}]}
            for name, kind, key, value, text, confidence in INVOICE_FIELDS
        }  # fmt: skip
        result["documents"] = [{
            "docType": "invoice", "fields": fields, "confidence": 1.0,
            "spans": [{"offset": 0, "length": len(content)}],
            "boundingRegions": [{"pageNumber": 1, "polygon": [0, 0, 8.5, 0, 8.5, 11, 0, 11]}],
        }]  # fmt: skip
    return result


def _pages(document: bytes) -> int:
    return max(1, document.count(b"/Type /Page") - document.count(b"/Type /Pages"))


def _detail(file: BatchFile) -> dict[str, Any]:
    detail: dict[str, Any] = {"sourceUrl": file.source_url, "status": file.status}
    if file.result_url:
        detail["resultUrl"] = file.result_url
    if file.error:
        detail["error"] = file.error
    return detail


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider azure-docintel`` serves."""
    rps = options.requests_per_minute / 60 if options.requests_per_minute else 15.0
    sim = AzureDocIntelSim(api_key=options.api_key, duration=options.duration,
                           requests_per_second=rps)  # fmt: skip
    return sim.app()
