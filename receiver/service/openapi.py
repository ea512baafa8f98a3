"""``GET /openapi.json``: an OpenAPI 3.0 description of the routes this app has mounted.

The operations are kept by hand here, next to nothing else (the request bodies' schemas come
from the pydantic models that validate them), and the document lists only those whose route is
mounted (no admin routes without a token); a test checks that every mounted route has an
operation and that no operation describes a route that does not exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.admin import bulk, reprocess
from receiver.admin.jobs import ReplayRequest, TrackRequest
from receiver.admin.query import MAX_LIMIT, PERIODS
from receiver.admin.routes import required_roles
from receiver.models import State
from receiver.service.openapi_models import model_schemas

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.requests import Request
    from starlette.routing import BaseRoute

Json = dict[str, Any]


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, **extra: Any) -> Json:
    return {"type": kind, "nullable": True, **extra}


def _json(schema: Json, description: str) -> Json:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: Json, description: str, **extra: Any) -> Json:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description, **extra}  # fmt: skip


_PATH = [
    {"name": "source", "in": "path", "required": True, "schema": {"type": "string"}},
    {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}},
]
_ERROR = _json(_ref("Error"), "refused: see error and detail")
_AUTH = {"401": _json(_ref("Error"), "no valid bearer token")}
_FORBIDDEN = _json(
    {"type": "object", "properties": {"error": {"type": "string", "enum": ["forbidden"]},
     "needs": {"type": "string", "enum": ["read", "track", "operate", "admin"]},
     "role": {"type": "string"}, "detail": {"type": "string"}}},
    "the token's role is below the one this route needs (named in needs), or the call names "
    "a source the token is not limited to (no needs; detail names the sources it may use)",
)  # fmt: skip
_STATES = [s.value for s in State]
_FILTERS = [
    _query("source", {"type": "string"}, "only this source"),
    _query("state", {"type": "string", "enum": _STATES}, "only this canonical state"),
    _query("created_after", {"type": "string"}, "ISO 8601 (UTC unless offset) or Unix seconds"),
    _query("created_before", {"type": "string"}, "ISO 8601 (UTC unless offset) or Unix seconds"),
    _query("metadata", {"type": "array", "items": {"type": "string"}},
           "key=value (or key:value) the job's metadata must hold; repeatable", style="form",
           explode=True),
    _query("min_confidence", {"type": "number"}, "jobs whose least confident field is at least"),
    _query("error_code", {"type": "string"},
           "jobs that failed with this normalised code, or with a dispatch failing with it"),
    _query("field", {"type": "string"}, "jobs whose result has this extracted field"),
    _query("max_confidence", {"type": "number"},
           "with field: jobs whose field's confidence is at most this (the weak extractions)"),
]  # fmt: skip

# fmt: off
SCHEMAS: Json = {
    "Error": {"type": "object", "required": ["error"],
              "properties": {"error": {"type": "string"}, "detail": {"type": "string"}}},
    "AuditEntry": {"type": "object", "properties": {
        "id": {"type": "integer"}, "at": {"type": "number"}, "last_at": {"type": "number"},
        "token": {"type": "string", "description": "the token's name; empty when unknown"},
        "role": {"type": "string"}, "action": {"type": "string"},
        "target": {"type": "string", "description": "source/job_id, or the bulk filter"},
        "jobs": _nullable("integer", description="what the call changed: dispatches "
                          "requeued, jobs submitted again, 1 for a track"),
        "outcome": {"type": "string", "enum": ["started", "ok", "rejected", "failed",
                                               "unauthorized", "forbidden"]},
        "ref": _nullable("string", description="the call's replay_id or reprocess_id"),
        "request_id": {"type": "string"}, "client": {"type": "string"},
        "attempts": {"type": "integer", "description": "refusals counted on this row"}}},
    "Result": {"type": "object", "nullable": True, "properties": {
        "sha256": {"type": "string"}, "bytes": {"type": "integer"},
        "available": {"type": "boolean"}}},
    "Job": {"type": "object", "required": ["source", "job_id", "state", "terminal"],
            "properties": {
        "source": {"type": "string"}, "job_id": {"type": "string"},
        "state": {"type": "string", "enum": _STATES}, "provider_status": {"type": "string"},
        "terminal": {"type": "boolean"}, "metadata": {"type": "object"},
        "error": _nullable("string"), "error_code": _nullable("string"),
        "failure": {"type": "object", "nullable": True, "properties": {
            "code": {"type": "string"}, "message": _nullable("string"),
            "where": {"type": "string"}}},
        "progress": {"type": "object", "nullable": True, "properties": {
            "done": _nullable("integer"), "total": _nullable("integer")}},
        "expected_pages": _nullable("integer"), "created_at": {"type": "string"},
        "updated_at": {"type": "string"}, "terminal_at": _nullable("string"),
        "processing_seconds": _nullable("number"), "confidence": _nullable("number"),
        "fields": {"type": "object", "description": "GET /jobs/{source}/{job_id} only: each "
                   "extracted field's confidence (null when the provider gives none)",
                   "additionalProperties": _nullable("number")},
        "result": _ref("Result"), "reprocessed_as": _ref("ReprocessLink"),
        "reprocessed_from": _ref("ReprocessLink")}},
    "ReprocessLink": {"type": "object", "nullable": True, "properties": {
        "source": {"type": "string"}, "job_id": _nullable("string"), "state": {"type": "string"},
        "attempts": {"type": "integer"}, "error": _nullable("string"), "at": {"type": "string"}}},
    "JobPage": {"type": "object", "required": ["jobs", "next_cursor"], "properties": {
        "jobs": {"type": "array", "items": _ref("Job")}, "next_cursor": _nullable("string")}},
    "JobDetail": {"type": "object", "required": ["job", "deliveries", "completion", "dispatches"],
                  "properties": {
        "job": _ref("Job"),
        "deliveries": {"type": "array", "items": {"type": "object", "properties": {
            "message_id": {"type": "string"}, "state": {"type": "string"},
            "provider_status": {"type": "string"}, "received_at": {"type": "string"}}}},
        "completion": {"type": "object", "nullable": True, "properties": {
            "id": {"type": "integer"}, "state": {"type": "string"}, "phase": {"type": "string"},
            "error": _nullable("string"), "result": _ref("Result"),
            "trace_id": _nullable("string")}},
        "dispatches": {"type": "array", "items": {"type": "object", "properties": {
            "handler": {"type": "string"}, "state": {"type": "string"},
            "attempts": {"type": "integer"}, "last_error": _nullable("string"),
            "next_attempt_at": _nullable("string")}}}}},
    "Stats": {"type": "object", "required": ["period", "total", "by_state", "by_source"],
              "properties": {
        "period": {"type": "string"}, "since": {"type": "string"},
        "total": {"type": "integer"}, "terminal": {"type": "integer"},
        "by_state": {"type": "object", "additionalProperties": {"type": "integer"}},
        "by_source": {"type": "object", "additionalProperties": {"type": "integer"}},
        "success_rate": _nullable("number"),
        "processing_seconds": {"type": "object", "properties": {
            "count": {"type": "integer"}, "avg": _nullable("number"),
            "p50": _nullable("number"), "p95": _nullable("number")}},
        "handler_failures": {"type": "object"},
        "avg_confidence": _nullable("number"),
        "fields": {"type": "array", "items": {"type": "object", "properties": {
            "source": {"type": "string"}, "field": {"type": "string"},
            "count": {"type": "integer"}, "mean": {"type": "number"},
            "p10": {"type": "number"}, "below": {"type": "number"},
            "threshold": {"type": "number"}}}}}},
    **model_schemas(TrackRequest, ReplayRequest, reprocess.BulkReprocessRequest,
                    reprocess.OneReprocessRequest),  # request bodies: as the routes validate them
}

OPERATIONS: dict[tuple[str, str], Json] = {
    ("/webhooks/{source}", "post"): {
        "summary": "Receive a signed webhook from a provider",
        "security": [],
        "parameters": [_PATH[0]],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
        "responses": {"200": _json({"type": "object", "properties": {
            "status": {"type": "string", "enum": ["accepted", "duplicate",
                       "subscription_confirmed", "unsubscribe_logged"]},
            "job_id": {"type": "string"}, "state": {"type": "string"}}},
            "stored durably (or, for SNS, a subscription handshake answered)"),
            "400": _ERROR, "401": _ERROR, "403": _ERROR, "404": _ERROR, "413": _ERROR,
            "503": _json(_ref("Error"), "the store cannot commit: retry")},
    },
    ("/webhooks/{source}/{token}", "post"): {
        "summary": "Receive a Reducto direct webhook: a hint, checked with the job API",
        "security": [],
        "parameters": [_PATH[0], {"name": "token", "in": "path", "required": True,
                                  "schema": {"type": "string"}}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {}}}},
        "responses": {"202": _json({"type": "object", "properties": {
            "status": {"type": "string", "enum": ["hinted"]}, "job_id": {"type": "string"}}},
            "the job will be looked up"),
            "400": _ERROR, "404": _ERROR, "413": _ERROR,
            "429": _json(_ref("Error"), "too many hints for untracked jobs"),
            "503": _json(_ref("Error"), "starting: retry")},
    },
    ("/healthz", "get"): {"summary": "The process is alive", "security": [],
                          "responses": {"200": {"description": "alive"}}},
    ("/readyz", "get"): {"summary": "The store answers", "security": [],
                         "responses": {"200": {"description": "ready"},
                                       "503": {"description": "store unavailable"}}},
    ("/metrics", "get"): {"summary": "Prometheus metrics", "security": [],
                          "responses": {"200": {"description": "text exposition format",
                                                "content": {"text/plain": {}}}}},
    ("/openapi.json", "get"): {"summary": "This document", "security": [],
                               "responses": {"200": {"description": "OpenAPI 3.0"}}},
    ("/jobs", "get"): {
        "summary": "List jobs, newest first",
        "parameters": [*_FILTERS,
                       _query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                              "page size (default 50)"),
                       _query("cursor", {"type": "string"}, "next_cursor of the previous page")],
        "responses": {"200": _json(_ref("JobPage"), "one page"), "400": _ERROR, **_AUTH},
    },
    ("/jobs", "post"): {
        "summary": "Track a job just submitted to a provider (idempotent)",
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": _ref("TrackRequest")}}},
        "responses": {"200": _json({"type": "object", "properties": {
            "status": {"type": "string"}, "job": _ref("Job")}}, "tracked"),
            "400": _ERROR, "404": _ERROR, "413": _ERROR, **_AUTH},
    },
    ("/jobs/stats", "get"): {
        "summary": "Totals, states, sources, success rate, processing time, handler failures",
        "parameters": [_query("period", {"type": "string", "enum": list(PERIODS)},
                              "jobs created in the last period (default 24h)")],
        "responses": {"200": _json(_ref("Stats"), "the figures"), "400": _ERROR, **_AUTH},
    },
    ("/jobs/export", "get"): {
        "summary": "Every matching job, streamed as CSV or JSON Lines",
        "parameters": [*_FILTERS,
                       _query("format", {"type": "string", "enum": ["csv", "jsonl"]},
                              "jsonl (default) or csv"),
                       _query("include_result", {"type": "boolean"},
                              "jsonl: add result_data, the stored result when it is JSON"),
                       _query("fields", {"type": "string"},
                              "csv: the extracted fields to add as columns, comma-separated "
                              "(default: every field the matching jobs have, at most 100)")],
        "responses": {"200": {"description": "the export", "content": {
            "text/csv": {}, "application/x-ndjson": {}}}, "400": _ERROR, **_AUTH},
    },
    ("/jobs/{source}/{job_id}", "get"): {
        "summary": "A job with its deliveries, completion and handler dispatches",
        "parameters": _PATH,
        "responses": {"200": _json(_ref("JobDetail"), "the job"), "404": _ERROR, **_AUTH},
    },
    ("/jobs/{source}/{job_id}/wait", "get"): {
        "summary": "Long-poll until the job is terminal",
        "parameters": [*_PATH, _query("timeout", {"type": "number", "minimum": 0,
                                                  "maximum": 300}, "seconds (default 30)")],
        "responses": {"200": _json(_ref("JobDetail"), "terminal"),
                      "202": _json(_ref("JobDetail"), "timed out: not terminal yet"),
                      "400": _ERROR, "404": _ERROR, **_AUTH},
    },
    ("/jobs/{source}/{job_id}/replay", "post"): {
        "summary": "Queue a job's dead (or also succeeded) handler dispatches again",
        "parameters": _PATH,
        "requestBody": {"required": False,
                        "content": {"application/json": {"schema": _ref("ReplayRequest")}}},
        "responses": {"200": _json({"type": "object", "properties": {
            "requeued": {"type": "integer"}}}, "how many were queued"),
            "400": _ERROR, "404": _ERROR, "413": _ERROR, **_AUTH},
    },
    ("/jobs/replay", "post"): {**bulk.OPERATION, "responses": {
        "200": _json({"type": "object"}, "{dry_run, count}, or {replay_id, requeued, next_cursor}"),
        "400": _ERROR, "413": _ERROR, **_AUTH}},
    **{key: {**op, "responses": {**op["responses"], **_AUTH}}
       for key, op in reprocess.OPERATIONS.items()},
    ("/events", "get"): {
        "summary": "Completions as server-sent events, resumable with Last-Event-ID",
        "parameters": [
            {"name": "Last-Event-ID", "in": "header", "required": False,
             "schema": {"type": "string"}},
            _query("last_event_id", {"type": "integer", "minimum": 0},
                   "like the Last-Event-ID header"),
            _query("heartbeat", {"type": "number", "minimum": 0.1, "maximum": 300},
                   "seconds between heartbeat comments (default 15)")],
        "responses": {"200": {"description": "text/event-stream",
                              "content": {"text/event-stream": {}}},
                      "400": _ERROR, **_AUTH},
    },
    ("/audit", "get"): {
        "summary": "The audit trail: admin actions and refused attempts, newest first",
        "parameters": [
            _query("token", {"type": "string"}, "only this token's rows"),
            _query("action", {"type": "string"},
                   "only this action (track_job, replay_job, replay_jobs, reprocess_job, "
                   "reprocess_jobs, console_replay, console_dead_replay, console_reprocess, "
                   "console_login, ...)"),
            _query("after", {"type": "string"}, "rows touched at or after (ISO 8601 or Unix)"),
            _query("before", {"type": "string"}, "rows started before (ISO 8601 or Unix)"),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                   "page size (default 50)"),
            _query("cursor", {"type": "string"}, "next_cursor of the previous page")],
        "responses": {"200": _json({"type": "object", "properties": {
            "entries": {"type": "array", "items": _ref("AuditEntry")},
            "next_cursor": _nullable("string")}}, "one page"), "400": _ERROR, **_AUTH},
    },
    ("/status", "get"): {
        "summary": "The store, each source's budget and backlog, circuits, work not yet done",
        "responses": {"200": _json({"type": "object"}, "ready"),
                      "503": _json({"type": "object"}, "the store does not answer"), **_AUTH},
    },
}
# fmt: on


_LIMITED = (
    "A token limited to some sources (`sources` on its `[[server.tokens]]` entry) sees and "
    "acts on their jobs only: lists, stats, exports and events hold only theirs, another "
    "source's job answers 404 as a missing one, and a call naming another source gets 403."
)


def mounted(routes: Sequence[BaseRoute]) -> set[tuple[str, str]]:
    """(path, method) of every route, HEAD left out (Starlette adds it to each GET)."""
    return {
        (route.path, method.lower())
        for route in routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }


def openapi_document(routes: Sequence[BaseRoute]) -> Json:
    """The document for exactly the mounted ``routes``."""
    paths: Json = {}
    roles = required_roles()
    for path, method in sorted(mounted(routes)):
        if (path, method) in OPERATIONS:
            operation = OPERATIONS[path, method]
            role = roles.get((path, method))
            if role is not None:
                operation = {
                    **operation,
                    "description": f"Needs a token with the `{role}` role or above. {_LIMITED}",
                    "x-jobhook-role": role,
                    "responses": {**operation["responses"], "403": _FORBIDDEN},
                }
            paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "jobhook", "version": "1"},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


async def openapi_endpoint(request: Request) -> JSONResponse:
    return JSONResponse(openapi_document(request.app.routes))
