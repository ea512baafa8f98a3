"""Resolve a completion once, for all its handlers: confirm with the job API, store the result."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from receiver import tracing
from receiver.errors import (
    ChecksumError,
    FetchError,
    ProviderError,
    ResultConsumedError,
    RetryableError,
)
from receiver.files import atomic_write, safe_name
from receiver.models import ResultRef, State
from receiver.pipeline import failures
from receiver.pipeline.confidence import job_confidence
from receiver.pipeline.fetch import remove_partials
from receiver.pipeline.fields import extract_fields, lowest
from receiver.providers.jobapi import JobNotFoundError
from receiver.store import Resolution
from receiver.store.codec import result_ref_json

if TYPE_CHECKING:
    from collections.abc import Mapping

    from receiver.pipeline.fetch import ResultFetcher
    from receiver.providers.base import Provider
    from receiver.providers.jobapi import JobAPI
    from receiver.store import CompletionRow, Engine
    from receiver.tracing import Span

log = structlog.get_logger(__name__)
MAX_URL_REFRESHES = 3
MAX_FIELDS_BYTES = 8 * 1024 * 1024
"""A fetched result at most this large is read for its fields (a larger one keeps none)."""


class Resolver:
    """Turns a leased completion into a Resolution, or raises RetryableError to try later."""

    def __init__(
        self,
        apis: dict[str, JobAPI | None],
        fetcher: ResultFetcher | None,
        results_dir: Path,
        *,
        store: Engine | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        self._apis = apis
        self._providers = dict(providers or {})
        """Each source's adapter, which reads the fields of its results."""
        self._fetcher = fetcher
        self._dir = results_dir
        self._store = store
        """Records single-use fetches; without one, a single-use result is never requested."""

    def result_path(self, source: str, job_id: str) -> Path:
        return self._dir / safe_name(source) / f"{safe_name(job_id)}.result"

    def _provider(self, source: str) -> Provider | None:
        api = self._apis.get(source)
        return self._providers.get(source) or (api.provider if api is not None else None)

    async def resolve(self, completion: CompletionRow, ref: ResultRef | None) -> Resolution:
        """Confirm (when the webhook carried no result) and store the result on disk."""
        api = self._apis.get(completion.source)
        state: State | None = None
        provider_status: str | None = None
        error: str | None = None
        code: str | None = None
        if ref is None and api is not None and completion.state != State.EXPIRED:
            try:
                with tracing.span("jobhook.confirm", kind="client") as span:
                    status = await api.get_job(completion.job_id, urgent=True)
                    span.set("jobhook.provider.status", status.provider_status)
                    span.set("jobhook.state", status.state.value)
            except JobNotFoundError as exc:
                return Resolution(
                    error=str(exc), error_code="job_not_found", error_where="provider"
                )
            if not status.state.terminal:
                raise ProviderError(
                    f"{completion.source}: job {completion.job_id} is still "
                    f"{status.provider_status!r} in the job API"
                )
            ref, error, code = status.result, status.error, status.error_code
            state, provider_status = status.state, status.provider_status
        where = "provider" if error is not None or code is not None else None
        if ref is None:
            return Resolution(
                error=error,
                state=state,
                provider_status=provider_status,
                error_code=code,
                error_where=where,
            )
        dest = self.result_path(completion.source, completion.job_id)
        if ref.assemble is not None:
            return _with(
                await self._assemble(completion, ref, dest, api),
                error, state, provider_status, code, where,
            )  # fmt: skip
        if ref.url is None:
            return _with(
                await _store_inline(ref.inline, dest, self._provider(completion.source)),
                error, state, provider_status, code, where,
            )  # fmt: skip
        started = time.monotonic()
        with tracing.span("jobhook.result.fetch") as span:
            fetched = await self._download(completion, ref, dest, api, span)
            span.set("jobhook.result.bytes", fetched.result_bytes)
            span.set("jobhook.result.seconds", round(time.monotonic() - started, 6))
            if fetched.error is not None:
                span.fail(fetched.error)
        return _with(fetched, error, state, provider_status, code, where)

    async def _assemble(
        self, completion: CompletionRow, ref: ResultRef, dest: Path, api: JobAPI | None
    ) -> Resolution:
        """A result the job API builds from several calls (Textract's pages), written to
        ``dest`` by the API itself; its fields read like a fetched result's."""
        if api is None:
            return Resolution(
                error="the result must be assembled by the job API, which is not configured",
                error_code="resolve_failed",
                error_where="fetch",
            )
        try:
            with tracing.span("jobhook.result.assemble", kind="client") as span:
                sha256, size = await api.write_result(completion.job_id, ref, dest)
                span.set("jobhook.result.bytes", size)
        except JobNotFoundError as exc:
            return Resolution(error=str(exc), error_code="result_expired", error_where="fetch")
        found = Resolution(str(dest), sha256, size)
        if size <= MAX_FIELDS_BYTES:
            found = _with_fields(
                found,
                await anyio.to_thread.run_sync(_read_json, dest),
                self._provider(completion.source),
            )
        return found

    async def _download(
        self,
        completion: CompletionRow,
        ref: ResultRef,
        dest: Path,
        api: JobAPI | None,
        span: Span = tracing.NULL_SPAN,
    ) -> Resolution:
        if self._fetcher is None:
            return Resolution(
                error="result is a URL but no fetcher is configured",
                error_code="no_fetcher",
                error_where="fetch",
            )
        if ref.single_use:
            return await self._fetch_once(completion, ref, dest, self._fetcher, api)
        for refresh in range(MAX_URL_REFRESHES + 1):
            assert ref.url is not None
            span.set("jobhook.result.url_refreshes", refresh)
            try:
                info = await self._fetcher.fetch(
                    ref.url,
                    dest,
                    expected_sha256=ref.sha256,
                    headers=api.result_headers(ref.url) if api is not None else None,
                )
            except FetchError as exc:
                if exc.permanent:
                    log.warning(
                        "result_refused",
                        source=completion.source,
                        job_id=completion.job_id,
                        error=str(exc),
                    )
                    return Resolution(
                        error=f"result not fetched: {exc}",
                        error_code=failures.fetch_code(exc),
                        error_where="fetch",
                    )
                if not exc.expired or api is None or refresh == MAX_URL_REFRESHES:
                    raise
                log.info("result_url_expired", source=completion.source, job_id=completion.job_id)
                status = await api.get_job(completion.job_id, urgent=True)
                if status.result is None or status.result.url is None:
                    return Resolution(
                        error="result URL expired and the job API has no new one",
                        error_code="result_expired",
                        error_where="fetch",
                    )
                ref = status.result
                continue
            found = Resolution(str(info.path), info.sha256, info.bytes)
            if info.bytes <= MAX_FIELDS_BYTES:
                found = _with_fields(
                    found,
                    await anyio.to_thread.run_sync(_read_json, info.path),
                    self._provider(completion.source),
                )
            return found
        raise RetryableError("unreachable")  # pragma: no cover

    async def _fetch_once(
        self,
        completion: CompletionRow,
        ref: ResultRef,
        dest: Path,
        fetcher: ResultFetcher,
        api: JobAPI | None,
    ) -> Resolution:
        """A single-use result: the start of its one request committed first, then one try.

        A start found committed already means an earlier request failed or was cut short
        (a crash mid-download): the provider may have spent the result, so it is not asked
        again and the completion fails with ``result_consumed``.
        """
        assert ref.url is not None
        try:
            fetcher.policy.check_url(ref.url)  # a refused URL was never requested
        except FetchError as exc:
            return _fetch_failed(completion, exc)
        if self._store is None:
            return _fetch_failed(
                completion, ResultConsumedError("no store records its single request")
            )
        if not await self._store.start_result_fetch(completion.id, time.time()):
            removed = await anyio.to_thread.run_sync(remove_partials, dest)
            kept = await anyio.to_thread.run_sync(_kept, dest)
            if kept is not None:  # fetched in full (renamed into place) before a crash
                log.info("result_kept", source=completion.source, job_id=completion.job_id)
                return await self._with_read_fields(kept, completion.source)
            log.warning("result_consumed", source=completion.source,
                        job_id=completion.job_id, partial_files_removed=removed)  # fmt: skip
            return _fetch_failed(
                completion,
                ResultConsumedError(
                    "the single-use result was requested before (a download that failed or "
                    "was interrupted) and is not asked for again"
                ),
            )
        try:
            headers = api.result_headers(ref.url) if api is not None else None
            info = await fetcher.fetch(
                ref.url, dest, expected_sha256=ref.sha256, attempts=1, headers=headers
            )
        except FetchError as exc:
            if not (exc.permanent or exc.expired or isinstance(exc, ChecksumError)):
                exc = ResultConsumedError(f"the single-use result's one request failed: {exc}")
            return _fetch_failed(completion, exc)
        return await self._with_read_fields(
            Resolution(str(info.path), info.sha256, info.bytes), completion.source
        )

    async def _with_read_fields(self, found: Resolution, source: str) -> Resolution:
        if found.result_path is None or (found.result_bytes or 0) > MAX_FIELDS_BYTES:
            return found
        return _with_fields(
            found,
            await anyio.to_thread.run_sync(_read_json, Path(found.result_path)),
            self._provider(source),
        )


def _kept(dest: Path) -> Resolution | None:
    """A result file already in place (only a complete, checked download is renamed there)."""
    digest, size = hashlib.sha256(), 0
    try:
        with dest.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return None
    return Resolution(str(dest), digest.hexdigest(), size)


def _fetch_failed(completion: CompletionRow, exc: FetchError) -> Resolution:
    """A single-use result that cannot be had: the completion fails (the provider's word,
    ``success``, stays beside it), since no later attempt can have it either."""
    log.warning("result_refused", source=completion.source, job_id=completion.job_id,
                error=str(exc))  # fmt: skip
    return Resolution(
        error=f"result not fetched: {exc}",
        state=State.FAILED,
        error_code=failures.fetch_code(exc),
        error_where="fetch",
    )


def _with(
    resolution: Resolution,
    error: str | None,
    state: State | None,
    provider_status: str | None,
    error_code: str | None,
    error_where: str | None,
) -> Resolution:
    return dataclasses.replace(
        resolution,
        error=resolution.error or error,
        state=resolution.state or state,
        provider_status=provider_status,
        error_code=resolution.error_code or error_code,
        error_where=resolution.error_where or error_where,
    )


async def _store_inline(value: Any, dest: Path, provider: Provider | None) -> Resolution:
    data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    await anyio.to_thread.run_sync(atomic_write, dest, data)
    return _with_fields(
        Resolution(str(dest), hashlib.sha256(data).hexdigest(), len(data)), value, provider
    )


def _with_fields(resolution: Resolution, value: Any, provider: Provider | None) -> Resolution:
    """The result's job-level confidence and fields (``provider`` reads its own shapes); a
    result whose confidence is per block or nested gets its least confident field as the
    job's."""
    fields = extract_fields(value, provider)
    confidence = job_confidence(value)
    return dataclasses.replace(
        resolution, confidence=lowest(fields) if confidence is None else confidence, fields=fields
    )


def _read_json(path: Path) -> Any:
    """A stored result as JSON, or None when it is not JSON (a ZIP, a PDF...)."""
    try:
        data = path.read_bytes()
        return json.loads(data) if data.lstrip()[:1] in (b"{", b"[") else None
    except (OSError, ValueError):
        return None


def ref_to_json(ref: ResultRef | None) -> str | None:
    """How a result reference is kept in the store until the completion is resolved."""
    if ref is None:
        return None
    return result_ref_json(ref)


def ref_from_json(text: str | None) -> ResultRef | None:
    if not text:
        return None
    data = json.loads(text)
    return ResultRef(
        inline=data.get("inline"),
        url=data.get("url"),
        sha256=data.get("sha256"),
        assemble=data.get("assemble"),
        single_use=data.get("single_use") is True,
    )
