"""``GET /jobs/export?format=csv|jsonl``: every job the filters match, streamed page by page.

JSON Lines carries each job's full document (as ``GET /jobs`` lists it) with its extracted
fields' ``fields`` (confidence) and ``values``; with ``include_result=true`` it also carries
``result_data``, the stored result parsed as JSON when it is JSON and at most
``MAX_INLINE_RESULT`` bytes. CSV has one flat row per job, metadata as a JSON cell, then one
column per extracted field holding its value: the ``fields=a,b`` asked for, or else the union of
the fields the matching jobs have (alphabetical, at most ``MAX_FIELD_COLUMNS``). A field named
like a fixed column gets the column ``field.NAME``.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import StreamingResponse

from receiver.admin.jobs import filter_from, store_of
from receiver.admin.query import QueryError, parse_field
from receiver.admin.views import listing_doc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from starlette.requests import Request

    from receiver.store import Store
    from receiver.store.rows import FieldValue, JobFilter, JobListing

PAGE = 500
MAX_INLINE_RESULT = 8 * 1024 * 1024
MAX_FIELD_COLUMNS = 100
FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
CSV_COLUMNS = (
    "source", "job_id", "state", "provider_status", "created_at", "updated_at", "terminal_at",
    "processing_seconds", "confidence", "progress_done", "progress_total", "expected_pages",
    "error", "result_sha256", "result_bytes", "metadata",
)  # fmt: skip


def csv_row(doc: dict[str, Any], names: Sequence[str] = (), values: Any = None) -> str:
    """One job's CSV line; ``names`` are the field columns, ``values`` its fields' values."""
    progress = doc["progress"] or {}
    result = doc["result"] or {}
    flat = {
        **doc,
        "progress_done": progress.get("done"),
        "progress_total": progress.get("total"),
        "result_sha256": result.get("sha256"),
        "result_bytes": result.get("bytes"),
        "metadata": json.dumps(doc["metadata"], separators=(",", ":"), sort_keys=True),
    }
    cells = [flat[c] for c in CSV_COLUMNS] + [(values or {}).get(n) for n in names]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow("" if c is None else c for c in cells)
    return out.getvalue()


def csv_header(names: Sequence[str] = ()) -> str:
    columns = [*CSV_COLUMNS, *(f"field.{n}" if n in CSV_COLUMNS else n for n in names)]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(columns)
    return out.getvalue()


async def read_result_data(listing: JobListing) -> Any:
    """The stored result as JSON, or None when it is gone, too large or not JSON."""
    path = listing.result_path
    if path is None or (listing.result_bytes or 0) > MAX_INLINE_RESULT:
        return None
    try:
        data = await anyio.Path(Path(path)).read_bytes()
        return json.loads(data) if len(data) <= MAX_INLINE_RESULT else None
    except (OSError, ValueError):
        return None


async def export_lines(
    store: Store,
    where: JobFilter,
    fmt: str,
    *,
    include_result: bool = False,
    fields: Sequence[str] | None = None,
) -> AsyncIterator[str]:
    """The export as text lines, reading the store one page at a time."""
    names: Sequence[str] = ()
    if fmt == "csv":
        names = fields if fields is not None else await store.field_names(where, MAX_FIELD_COLUMNS)
        yield csv_header(names)
    after = None
    while True:
        rows = await store.list_jobs(where, limit=PAGE, after=after)
        found: dict[tuple[str, str], list[FieldValue]] = {}
        if rows and (names or fmt == "jsonl"):
            found = await store.fields_of([(r.job.source, r.job.job_id) for r in rows])
        for row in rows:
            doc = listing_doc(row)
            extracted = found.get((row.job.source, row.job.job_id), [])
            values = {f.field: f.value for f in extracted}
            if fmt == "csv":
                yield csv_row(doc, names, values)
                continue
            doc["fields"] = {f.field: f.confidence for f in extracted}
            doc["values"] = values
            if include_result:
                doc["result_data"] = await read_result_data(row)
            yield json.dumps(doc, separators=(",", ":")) + "\n"
        if len(rows) < PAGE:
            return
        after = rows[-1].key


def parse_format(text: str | None) -> str:
    fmt = text or "jsonl"
    if fmt not in FORMATS:
        raise QueryError("invalid_query", "format must be csv or jsonl")
    return fmt


def parse_fields(text: str | None) -> list[str] | None:
    """``fields=a,b``: the field columns of a CSV export, in that order (None: all seen)."""
    if text is None or not text.strip():
        return None
    names = [parse_field(name.strip()) for name in text.split(",") if name.strip()]
    if len(names) > MAX_FIELD_COLUMNS:
        raise QueryError("invalid_query", f"fields names at most {MAX_FIELD_COLUMNS} fields")
    return list(dict.fromkeys(names))


def parse_flag(name: str, text: str | None) -> bool:
    if text in (None, "", "false", "0"):
        return False
    if text in ("true", "1"):
        return True
    raise QueryError("invalid_query", f"{name} must be true or false")


async def export_jobs(request: Request) -> StreamingResponse:
    fmt = parse_format(request.query_params.get("format"))
    include_result = parse_flag("include_result", request.query_params.get("include_result"))
    fields = parse_fields(request.query_params.get("fields"))
    where = filter_from(request)
    lines = export_lines(
        store_of(request), where, fmt, include_result=include_result, fields=fields
    )
    return StreamingResponse(
        lines,
        media_type=FORMATS[fmt],
        headers={"Content-Disposition": f'attachment; filename="jobs.{fmt}"'},
    )
