"""The Blob REST calls the Document Intelligence simulator's batch analysis makes: list and read
the source documents, write each ``….ocr.json`` result, as the service does with the SAS URLs
it is given (``azureBlobSource`` / ``azureBlobFileListSource``, ``resultContainerUrl``)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

if TYPE_CHECKING:
    import httpx

VERSION = "2024-11-04"


@dataclass
class BatchFile:
    """One document of a batch: where it is, what became of it."""

    name: str
    source_url: str
    data: bytes
    status: str = "running"
    result_url: str | None = None
    error: dict[str, Any] | None = None


@dataclass
class BatchOperation:
    result_id: str
    model_id: str
    api_version: str
    started: float
    created: str
    result_container: str
    result_prefix: str
    overwrite: bool
    files: list[BatchFile] = field(default_factory=list)
    finished: bool = False


def _split(url: str) -> tuple[str, str]:
    """A container URL's address without its query, and the query (its SAS)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")), parts.query


def _with(query: str, extra: str = "") -> str:
    both = "&".join(q for q in (extra, query) if q)
    return f"?{both}" if both else ""


async def read_sources(client: httpx.AsyncClient, source: dict[str, Any]) -> list[BatchFile]:
    """The documents an ``azureBlobSource`` (every blob under ``prefix``) or an
    ``azureBlobFileListSource`` (a JSONL of ``{"file": name}``) names, with their bytes."""
    base, sas = _split(str(source["containerUrl"]))
    headers = {"x-ms-version": VERSION}
    if "fileList" in source:
        listed = await client.get(f"{base}/{quote(source['fileList'])}{_with(sas)}",
                                  headers=headers)  # fmt: skip
        listed.raise_for_status()
        names = [json.loads(line)["file"] for line in listed.text.splitlines() if line.strip()]
    else:
        prefix = f"&prefix={quote(source['prefix'], safe='')}" if source.get("prefix") else ""
        listing = await client.get(
            f"{base}{_with(sas, 'restype=container&comp=list' + prefix)}", headers=headers
        )
        listing.raise_for_status()
        root = ET.fromstring(listing.content)  # noqa: S314 (the emulator's answer, in tests)
        names = [el.text or "" for el in root.iter("Name")]
    files = []
    for name in sorted(names):
        url = f"{base}/{quote(name)}"
        blob = await client.get(url + _with(sas), headers=headers)
        blob.raise_for_status()
        files.append(BatchFile(name=name, source_url=url, data=blob.content))
    return files


async def write_result(
    client: httpx.AsyncClient, op: BatchOperation, file: BatchFile, result: dict[str, Any]
) -> str:
    """``{resultPrefix}{name}.ocr.json`` in the result container: its URL (without the SAS),
    or ``""`` when it exists and ``overwriteExisting`` is false (the file is skipped)."""
    base, sas = _split(op.result_container)
    url = f"{base}/{quote(op.result_prefix + file.name + '.ocr.json')}"
    headers = {"x-ms-version": VERSION}
    if not op.overwrite:
        there = await client.head(url + _with(sas), headers=headers)
        if there.status_code == 200:
            return ""
    body = json.dumps({"status": "succeeded", "analyzeResult": result}).encode()
    put = await client.put(
        url + _with(sas), content=body,
        headers=headers | {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/json"},
    )  # fmt: skip
    put.raise_for_status()
    return url
