"""A faithful Google Document AI (v1, REST) with the OAuth2 token endpoint and the Cloud Storage
JSON API subset its clients use.

- ``POST /token``: the service-account JWT-bearer grant. The assertion must be signed (RS256) by
  the key ``service_account_key()`` hands out, for that key's ``client_email`` and Google's token
  endpoint (google-auth's audience, whatever ``token_uri`` says), and unexpired; the answer is
  ``{access_token, expires_in, token_type}``.
- ``POST /v1/projects/{p}/locations/{l}/processors/{id}:batchProcess`` (bearer token): inputs
  ``gcsDocuments`` or ``gcsPrefix``, output ``documentOutputConfig.gcsOutputConfig.gcsUri``;
  answers the long-running ``Operation`` (``BatchProcessMetadata``, ``WAITING``). At most
  ``concurrent`` unfinished batches a project (429 ``RESOURCE_EXHAUSTED``), and
  ``requests_per_minute`` requests a project (1,800).
- ``GET /v1/projects/{p}/locations/{l}/operations/{id}``: ``RUNNING``, then done: each input
  read from the bucket; a PDF becomes a ``Document`` shard at ``{gcsUri}/{opId}/{index}/
  {name}-0.json``; a missing input fails ``NOT_FOUND``, any other bytes ``INVALID_ARGUMENT``. All
  failed: the operation fails (``error``), some: ``SUCCEEDED`` with their statuses.
- Cloud Storage (``STORAGE_EMULATOR_HOST`` for google-cloud-storage): list with ``prefix`` and
  ``pageToken``, media download (``x-goog-hash: md5=``), multipart and media upload. Anonymous
  as the emulators are, but a bearer token that is there must be one this simulator issued.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

METADATA = "type.googleapis.com/google.cloud.documentai.v1.BatchProcessMetadata"
RESPONSE = "type.googleapis.com/google.cloud.documentai.v1.BatchProcessResponse"
CLIENT_EMAIL = "jobhook-sim@sim-project.iam.gserviceaccount.com"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL)
ENTITIES = (("supplier_name", "Contoso Ltd.", 0.96), ("invoice_id", "INV-100", 0.99),
            ("total_amount", "1280.00", 0.68))  # fmt: skip
"""What every processor finds in a document (total_amount under the 0.80 alert)."""


@dataclass
class Blob:
    data: bytes
    content_type: str
    generation: int
    updated: str

    @property
    def md5(self) -> str:
        return base64.b64encode(hashlib.md5(self.data).digest()).decode()  # noqa: S324 (GCS's md5Hash)


@dataclass
class BatchOperation:
    name: str
    project: str
    inputs: list[str]
    output: str
    started: float
    created: str
    finished: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    at: float
    method: str
    path: str
    status: int


@dataclass
class DocumentAISim:
    """Document AI, its token endpoint and Cloud Storage, in memory."""

    public_url: str = ""
    """Where clients reach the simulator: the key's ``token_uri`` is ``{public_url}/token``."""
    duration: float = 2.0
    concurrent: int = 5
    requests_per_minute: float = 1800.0
    page_size: int = 1000
    clock: Callable[[], float] = time.monotonic
    buckets: dict[str, dict[str, Blob]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    operations: dict[str, BatchOperation] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    garbled: set[str] = field(default_factory=set)
    """Objects whose downloads arrive with a byte changed (a transfer fault; md5 unchanged)."""
    _window: dict[str, collections.deque[float]] = field(
        default_factory=lambda: collections.defaultdict(collections.deque)
    )
    _key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def service_account_key(self) -> dict[str, str]:
        """A service-account key whose tokens this simulator issues (its ``token_uri``)."""
        pem = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode()  # fmt: skip
        token_uri = f"{self.public_url}/token"
        return {"type": "service_account", "project_id": "sim-project",
                "private_key_id": "sim-key-1", "private_key": pem, "client_email": CLIENT_EMAIL,
                "client_id": "100000000000000000001", "token_uri": token_uri}  # fmt: skip

    def app(self) -> Starlette:
        ops = "/v1/projects/{project}/locations/{location}"
        gcs = "/storage/v1/b/{bucket}/o"
        return Starlette(routes=[
            Route("/token", self._token, methods=["POST"]),
            Route(ops + "/processors/{processor}:batchProcess", self._batch, methods=["POST"]),
            Route(ops + "/operations/{operation}", self._operation, methods=["GET"]),
            Route(gcs, self._list, methods=["GET"]),
            Route(gcs + "/{name:path}", self._object, methods=["GET"]),
            Route("/download" + gcs + "/{name:path}", self._media, methods=["GET"]),
            Route("/upload" + gcs, self._upload, methods=["POST"]),
        ])  # fmt: skip

    def put(self, uri: str, data: bytes, content_type: str = "application/pdf") -> None:
        """Store an object at ``gs://bucket/name``."""
        bucket, _, name = uri.removeprefix("gs://").partition("/")
        self._store(bucket, name, data, content_type)

    def polls_of(self, operation_id: str) -> list[Hit]:
        return [h for h in self.hits if h.method == "GET" and h.path.endswith("/" + operation_id)]

    async def _token(self, request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        grant = form.get("grant_type", [""])[0]
        assertion = form.get("assertion", [""])[0]
        if grant != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return self._oauth_error(request, "unsupported_grant_type", "Invalid grant_type.")
        # google-auth addresses the assertion to Google's token endpoint, whatever token_uri
        # it posts it to: that is the audience Google checks.
        claims = self._verified(assertion, GOOGLE_TOKEN_AUDIENCE)
        if claims is None:
            return self._oauth_error(request, "invalid_grant", "Invalid JWT Signature.")
        token = "ya29.sim-" + secrets.token_urlsafe(24)
        self.tokens[token] = time.time() + 3600
        answer = {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}
        return self._answer(request, JSONResponse(answer))

    def _verified(self, assertion: str, audience: str | None) -> dict[str, Any] | None:
        """The claims of a JWT the key signed, for ``audience`` (None: any Google API's)."""
        try:
            head, body, signature = assertion.split(".")
            header = json.loads(_unb64(head))
            claims = json.loads(_unb64(body))
            self._key.public_key().verify(_unb64(signature), f"{head}.{body}".encode(),
                                          padding.PKCS1v15(), hashes.SHA256())  # fmt: skip
        except (ValueError, InvalidSignature):
            return None
        now = time.time()
        aimed = (
            claims.get("aud") == audience
            if audience is not None
            else (str(claims.get("aud", "")).startswith("https://") or "scope" in claims)
        )
        if (header.get("alg") != "RS256" or claims.get("iss") != CLIENT_EMAIL
                or not aimed or not now - 60 < claims.get("exp", 0)
                or claims.get("exp", 0) - claims.get("iat", 0) > 3600):  # fmt: skip
            return None
        return dict(claims)

    def _authorized(self, request: Request, *, required: bool) -> bool:
        """An access token the token endpoint issued, or (what the SDK sends for a service
        account) a JWT the key signed itself for this API, as Google accepts both."""
        header = request.headers.get("authorization")
        if header is None:
            return not required
        token = header.removeprefix("Bearer ")
        if token.count(".") == 2:
            claims = self._verified(token, None)
            return claims is not None and claims.get("sub") == CLIENT_EMAIL
        return self.tokens.get(token, 0) > time.time()

    def _throttled(self, request: Request, project: str) -> Response | None:
        window = self._window[project]
        now = self.clock()
        while window and window[0] <= now - 60:
            window.popleft()
        if len(window) >= self.requests_per_minute:
            return self._error(request, 429, "RESOURCE_EXHAUSTED",
                               "Quota exceeded for quota metric 'Number of requests' and limit "
                               "'Number of requests per minute' of service "
                               "'documentai.googleapis.com'.", retry_after="60")  # fmt: skip
        window.append(now)
        return None

    async def _batch(self, request: Request) -> Response:
        body = await request.body()
        if not self._authorized(request, required=True):
            return self._unauthenticated(request)
        project = request.path_params["project"]
        throttled = self._throttled(request, project)
        if throttled is not None:
            return throttled
        try:
            asked = json.loads(body)
        except ValueError:
            asked = None
        inputs = _inputs(asked, self.buckets)
        output = _get(asked, "documentOutputConfig", "gcsOutputConfig", "gcsUri")
        if inputs is None or not isinstance(output, str) or not output.startswith("gs://"):
            return self._error(request, 400, "INVALID_ARGUMENT", "Request contains an invalid "
                               "argument: inputDocuments and documentOutputConfig.gcsOutputConfig"
                               ".gcsUri are required.")  # fmt: skip
        running = [
            o for o in self.operations.values() if o.project == project and not self._done(o)
        ]
        if len(running) >= self.concurrent:
            message = f"Quota exceeded: {self.concurrent} concurrent batch requests a project."
            return self._error(request, 429, "RESOURCE_EXHAUSTED", message)
        op_id = str(uuid.uuid4().int)[:19]
        location = request.path_params["location"]
        name = f"projects/{project}/locations/{location}/operations/{op_id}"
        op = BatchOperation(name, project, inputs, output.rstrip("/"), self.clock(), _now())
        self.operations[op_id] = op
        return self._answer(request, JSONResponse(self._describe(op)))

    async def _operation(self, request: Request) -> Response:
        if not self._authorized(request, required=True):
            return self._unauthenticated(request)
        throttled = self._throttled(request, request.path_params["project"])
        if throttled is not None:
            return throttled
        op = self.operations.get(request.path_params["operation"])
        if op is None or op.project != request.path_params["project"]:
            return self._error(request, 404, "NOT_FOUND", "Operation not found.")
        return self._answer(request, JSONResponse(self._describe(op)))

    def _done(self, op: BatchOperation) -> bool:
        return self.clock() - op.started >= self.duration

    def _describe(self, op: BatchOperation) -> dict[str, Any]:
        elapsed = self.clock() - op.started
        metadata: dict[str, Any] = {"@type": METADATA, "createTime": op.created,
                                    "updateTime": _now()}  # fmt: skip
        if elapsed < self.duration / 10:
            return {"name": op.name, "metadata": {**metadata, "state": "WAITING"}}
        if elapsed < self.duration:
            return {"name": op.name, "metadata": {**metadata, "state": "RUNNING"}}
        if op.finished is None:
            op.finished = self._process(op)
        return {"name": op.name, "metadata": {**metadata, **op.finished["metadata"]},
                "done": True, **op.finished["outcome"]}  # fmt: skip

    def _process(self, op: BatchOperation) -> dict[str, Any]:
        """Run the batch: read each input, write its shard; the metadata and outcome."""
        op_id = op.name.rsplit("/", 1)[1]
        statuses = []
        for index, uri in enumerate(op.inputs):
            bucket, _, name = uri.removeprefix("gs://").partition("/")
            blob = self.buckets.get(bucket, {}).get(name)
            entry: dict[str, Any] = {"inputGcsSource": uri}
            if blob is None:
                entry["status"] = {"code": 5, "message": f"Failed to read input file: {uri}"}
            elif not blob.data.startswith(b"%PDF"):
                entry["status"] = {"code": 3, "message": "Unsupported input file format."}
            else:
                out = f"{op.output}/{op_id}/{index}"
                stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
                out_bucket, _, out_prefix = out.removeprefix("gs://").partition("/")
                shard = json.dumps(_document(uri, blob.data)).encode()
                self._store(out_bucket, f"{out_prefix}/{stem}-0.json", shard, "application/json")
                entry |= {"status": {}, "outputGcsDestination": out,
                          "humanReviewStatus": {"state": "SKIPPED"}}  # fmt: skip
            statuses.append(entry)
        failed = [s for s in statuses if s["status"].get("code")]
        if statuses and len(failed) == len(statuses):
            return {"metadata": {"state": "FAILED", "stateMessage": "Failed to process all "
                                 "documents.", "individualProcessStatuses": statuses},
                    "outcome": {"error": {"code": 3, "message": "Failed to process all "
                                          "documents."}}}  # fmt: skip
        return {"metadata": {"state": "SUCCEEDED", "stateMessage": "Processed all documents.",
                             "individualProcessStatuses": statuses},
                "outcome": {"response": {"@type": RESPONSE}}}  # fmt: skip

    async def _list(self, request: Request) -> Response:
        if not self._authorized(request, required=False):
            return self._unauthenticated(request)
        bucket = request.path_params["bucket"]
        prefix = request.query_params.get("prefix", "")
        start = int(request.query_params.get("pageToken") or 0)
        names = sorted(n for n in self.buckets.get(bucket, {}) if n.startswith(prefix))
        page = names[start : start + self.page_size]
        body: dict[str, Any] = {"kind": "storage#objects",
                                "items": [self._resource(bucket, n) for n in page]}  # fmt: skip
        if start + self.page_size < len(names):
            body["nextPageToken"] = str(start + self.page_size)
        return self._answer(request, JSONResponse(body))

    async def _object(self, request: Request) -> Response:
        if request.query_params.get("alt") == "media":
            return await self._media(request)
        if not self._authorized(request, required=False):
            return self._unauthenticated(request)
        bucket, name = request.path_params["bucket"], request.path_params["name"]
        if name not in self.buckets.get(bucket, {}):
            return self._error(request, 404, "NOT_FOUND", f"No such object: {bucket}/{name}")
        return self._answer(request, JSONResponse(self._resource(bucket, name)))

    async def _media(self, request: Request) -> Response:
        if not self._authorized(request, required=False):
            return self._unauthenticated(request)
        bucket, name = request.path_params["bucket"], request.path_params["name"]
        blob = self.buckets.get(bucket, {}).get(name)
        if blob is None:
            return self._error(request, 404, "NOT_FOUND", f"No such object: {bucket}/{name}")
        headers = {"x-goog-hash": f"md5={blob.md5}", "x-goog-generation": str(blob.generation)}
        data = blob.data.replace(b"1", b"7", 1) if name in self.garbled else blob.data
        return self._answer(request, Response(data, media_type=blob.content_type,
                                              headers=headers))  # fmt: skip

    async def _upload(self, request: Request) -> Response:
        body = await request.body()
        if not self._authorized(request, required=False):
            return self._unauthenticated(request)
        bucket = request.path_params["bucket"]
        kind = request.headers.get("content-type", "")
        name, content_type, data = request.query_params.get("name"), kind, body
        if request.query_params.get("uploadType") == "multipart":
            parts = _multipart(kind, body)
            if parts is None:
                return self._error(request, 400, "INVALID_ARGUMENT", "Malformed multipart body.")
            meta, (content_type, data) = parts
            name = meta.get("name", name)
        if not name:
            return self._error(request, 400, "INVALID_ARGUMENT", "Required parameter: name")
        self._store(bucket, name, data, content_type or "application/octet-stream")
        return self._answer(request, JSONResponse(self._resource(bucket, name)))

    def _store(self, bucket: str, name: str, data: bytes, content_type: str) -> None:
        generation = time.time_ns() // 1000
        self.buckets[bucket][name] = Blob(data, content_type, generation, _now())

    def _resource(self, bucket: str, name: str) -> dict[str, Any]:
        blob = self.buckets[bucket][name]
        return {"kind": "storage#object", "id": f"{bucket}/{name}/{blob.generation}",
                "name": name, "bucket": bucket, "generation": str(blob.generation),
                "metageneration": "1", "contentType": blob.content_type,
                "size": str(len(blob.data)), "md5Hash": blob.md5, "updated": blob.updated,
                "timeCreated": blob.updated, "storageClass": "STANDARD"}  # fmt: skip

    def _unauthenticated(self, request: Request) -> Response:
        return self._error(request, 401, "UNAUTHENTICATED", "Request had invalid authentication "
                           "credentials. Expected OAuth 2 access token.")  # fmt: skip

    def _oauth_error(self, request: Request, error: str, description: str) -> Response:
        body = {"error": error, "error_description": description}
        return self._answer(request, JSONResponse(body, status_code=400))

    def _error(self, request: Request, status: int, word: str, message: str,
               retry_after: str | None = None) -> Response:  # fmt: skip
        body = {"error": {"code": status, "message": message, "status": word}}
        response = JSONResponse(body, status_code=status)
        if retry_after is not None:
            response.headers["Retry-After"] = retry_after
        return self._answer(request, response)

    def _answer(self, request: Request, response: Response) -> Response:
        self.hits.append(Hit(self.clock(), request.method, request.url.path, response.status_code))
        return response


def _inputs(asked: Any, buckets: dict[str, dict[str, Blob]]) -> list[str] | None:
    documents = _get(asked, "inputDocuments", "gcsDocuments", "documents")
    if isinstance(documents, list) and documents:
        uris = [d.get("gcsUri") for d in documents if isinstance(d, dict)]
        return [u for u in uris if isinstance(u, str) and u.startswith("gs://")] or None
    prefix = _get(asked, "inputDocuments", "gcsPrefix", "gcsUriPrefix")
    if isinstance(prefix, str) and prefix.startswith("gs://"):
        bucket, _, start = prefix.removeprefix("gs://").partition("/")
        return [
            f"gs://{bucket}/{n}" for n in sorted(buckets.get(bucket, {})) if n.startswith(start)
        ]
    return None


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _document(uri: str, data: bytes) -> dict[str, Any]:
    """A ``Document`` as a processor writes it for a PDF."""
    pages = max(1, data.count(b"/Type /Page") - data.count(b"/Type /Pages"))
    text = "".join(f"{value}\n" for _, value, _ in ENTITIES)
    offsets, position = [], 0
    for _, value, _ in ENTITIES:
        offsets.append((position, position + len(value)))
        position += len(value) + 1
    return {
        "uri": uri, "mimeType": "application/pdf", "text": text,
        "pages": [{"pageNumber": n, "dimension": {"width": 612, "height": 792, "unit": "points"}}
                  for n in range(1, pages + 1)],
        "entities": [{"type": kind, "mentionText": value, "confidence": confidence,
                      "id": str(n), "textAnchor": {"textSegments": [
                          {"startIndex": str(start), "endIndex": str(end)}]}}
                     for n, ((kind, value, confidence), (start, end))
                     in enumerate(zip(ENTITIES, offsets, strict=True))],
        "shardInfo": {"shardIndex": "0", "shardCount": "1", "textOffset": "0"},
    }  # fmt: skip


def _multipart(kind: str, body: bytes) -> tuple[dict[str, Any], tuple[str, bytes]] | None:
    """A ``multipart/related`` upload: its JSON metadata, then (content type, media)."""
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + kind.encode() + b"\r\n\r\n"
                                                  + body)  # fmt: skip
    if not message.is_multipart():
        return None
    parts = list(message.iter_parts())
    if len(parts) != 2:
        return None
    head, media = parts[0].get_payload(decode=True), parts[1].get_payload(decode=True)
    try:
        meta = json.loads(head) if isinstance(head, bytes) else {}
    except ValueError:
        return None
    data = media if isinstance(media, bytes) else b""
    return (meta if isinstance(meta, dict) else {}), (parts[1].get_content_type(), data)


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider google-docai`` serves; ``--key-out`` gets the
    service-account key its token endpoint accepts."""
    sim = DocumentAISim(public_url=options.public_url, duration=options.duration,
                        requests_per_minute=options.requests_per_minute or 1800.0)  # fmt: skip
    if options.key_out is not None:
        options.key_out.write_text(json.dumps(sim.service_account_key(), indent=2))
        options.key_out.chmod(0o600)
    return sim.app()
