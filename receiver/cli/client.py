"""Where the CLI's job commands get their answers: a running service, or the store itself.

``ServiceClient`` speaks the admin API (URL + bearer token). ``StoreReader`` opens the store
named by the configuration and builds the same documents (``receiver.admin.views``) without a
service; it only reads. Both raise ``ClientError`` with a message fit for the terminal.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from receiver.admin import query as jobquery
from receiver.admin import views as jobviews
from receiver.admin.export import export_lines, parse_fields
from receiver.client import ApiError, Client, Forbidden, NotFound, TransportError, Unauthorized
from receiver.client import JobhookError as ClientSideError
from receiver.client import core as calls
from receiver.errors import ConfigError, JobhookError

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

T = TypeVar("T")
_ONE_OF = "one of the service's tokens (a secret of [[server.tokens]], or server.admin_token)"
_NO_ADMIN_API = calls.NO_ADMIN_API

Filters = dict[str, Any]
"""Filter options as text: source, state, created_after, created_before, min_confidence,
error_code, and metadata as a list of ``key:value``."""


class ClientError(Exception):
    """A command could not get its answer; ``exit_code`` 2 for bad input, 4 otherwise."""

    def __init__(self, message: str, exit_code: int = 4) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ServiceClient:
    """The admin API of a running jobhook, through ``receiver.client``: its documents as the
    service sends them (the CLI prints them as they are), its errors as terminal messages."""

    def __init__(
        self, url: str, token: str | None, *, timeout: float = 30.0, store_fallback: bool = False
    ) -> None:
        self._token_given = bool(token)
        self._unreachable_hint = (
            "is `jobhook serve` running? Point --url (or JOBHOOK_URL) at it"
            + (", or pass --config to read the store without a service" if store_fallback else "")
        )
        try:
            # click has read JOBHOOK_URL and JOBHOOK_ADMIN_TOKEN already
            self._client = Client(url, token or None, timeout=timeout, environ={})
        except ValueError as exc:
            raise ClientError(f"--url: {exc}", exit_code=2) from exc
        self.url = self._client.url

    def __repr__(self) -> str:
        return f"ServiceClient({self.url!r})"

    def close(self) -> None:
        self._client.close()

    def _send(self, call: calls.Call) -> dict[str, Any]:
        try:
            data: dict[str, Any] = self._client.send(call)
        except ClientSideError as exc:
            raise self._translate(exc) from exc
        return data

    def _translate(self, exc: ClientSideError) -> ClientError:
        if isinstance(exc, TransportError):
            return ClientError(f"cannot reach {self.url} ({exc.reason}); {self._unreachable_hint}")
        if isinstance(exc, Unauthorized) and not self._token_given:
            return ClientError(
                f"no token given; pass --token or set JOBHOOK_ADMIN_TOKEN to {_ONE_OF}"
            )
        if isinstance(exc, Unauthorized):
            return ClientError(
                f"the service refused the token; pass {_ONE_OF} with --token or JOBHOOK_ADMIN_TOKEN"
            )
        if isinstance(exc, Forbidden) and not exc.needs:  # its role may, not for that source
            return ClientError(exc.message)
        if isinstance(exc, Forbidden):
            return ClientError(
                f"{exc.message}; use a token whose role is {exc.needs or 'higher'} or above"
            )
        if isinstance(exc, NotFound) and not exc.code:
            return ClientError(f"no admin API there: wrong --url, or {_NO_ADMIN_API}")
        if isinstance(exc, ApiError):
            return ClientError(
                f"{exc.message} ({exc.status})", 2 if exc.status in (400, 413) else 4
            )
        return ClientError(str(exc))

    def list_jobs(self, filters: Filters, limit: int, cursor: str | None) -> dict[str, Any]:
        return self._send(calls.list_jobs(_params(filters), limit, cursor))

    def show(self, source: str, job_id: str) -> dict[str, Any]:
        return self._send(calls.get_job(source, job_id))

    def audit(
        self, params: list[tuple[str, str]], limit: int, cursor: str | None
    ) -> dict[str, Any]:
        return self._send(calls.audit(params, limit, cursor))

    def stats(self, period: str) -> dict[str, Any]:
        return self._send(calls.stats(period))

    def status(self) -> dict[str, Any]:
        return self._send(calls.service_status())

    def export(
        self, filters: Filters, fmt: str, include_result: bool, fields: str | None = None
    ) -> Iterator[str]:
        call = calls.export(_params(filters), fmt, include_result, fields)
        try:
            yield from self._client.stream_text(call)
        except ClientSideError as exc:
            raise self._translate(exc) from exc

    def track(
        self, source: str, job_id: str, metadata: dict[str, str], pages: int | None
    ) -> dict[str, Any]:
        return self._send(calls.track(source, job_id, metadata, pages))

    def replay(
        self, source: str, job_id: str, handler: str | None, include_succeeded: bool
    ) -> dict[str, Any]:
        return self._send(calls.replay(source, job_id, handler, include_succeeded))

    def replay_matching(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/replay``: one call of a bulk replay (or its dry run)."""
        return self._send(calls.replay_matching(body))

    def reprocess(self, source: str, job_id: str, force: bool) -> dict[str, Any]:
        """``POST /jobs/{source}/{job_id}/reprocess``: submit one job again at its provider."""
        return self._send(calls.reprocess(source, job_id, force))

    def reprocess_matching(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/reprocess``: one call of a bulk reprocess (or its dry run)."""
        return self._send(calls.reprocess_matching(body))

    def wait(self, source: str, job_id: str, seconds: float) -> dict[str, Any]:
        """One long-poll of at most ``seconds``: the job's detail, terminal or not."""
        return self._send(calls.wait_once(source, job_id, seconds))


class StoreReader:
    """Reads the store named by the configuration, no service needed; it writes nothing."""

    def __init__(self, config_path: Path | None) -> None:
        from receiver.config.load import load_settings
        from receiver.store import open_store

        try:
            settings = load_settings(config_path)
            self._store = open_store(settings.store.url)
        except ConfigError as exc:
            raise ClientError(str(exc), exit_code=2) from exc
        self._thresholds = {n: cfg.confidence_alert for n, cfg in settings.sources.items()}
        url = settings.store.url
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
            # A read command never creates state: a mistyped data_dir must not make a store.
            raise ClientError(
                f"no store at {url.removeprefix('sqlite:///')} (the data_dir or store.url of "
                f"{config_path or 'the configuration'}); correct it, or run `jobhook serve` "
                "with this configuration first",
                exit_code=2,
            )
        self._runner = asyncio.Runner()
        try:
            self._run(self._store.open())
        except ClientError:
            self._runner.close()
            raise

    def close(self) -> None:
        try:
            self._run(self._store.close())
        finally:
            self._runner.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        try:
            return self._runner.run(work)
        except jobquery.QueryError as exc:
            raise ClientError(exc.detail, exit_code=2) from exc
        except JobhookError as exc:
            raise ClientError(str(exc)) from exc

    def list_jobs(self, filters: Filters, limit: int, cursor: str | None) -> dict[str, Any]:
        try:
            where = jobquery.build_filter(**filters)
            after = jobquery.decode_cursor(cursor) if cursor else None
        except jobquery.QueryError as exc:
            raise ClientError(exc.detail, exit_code=2) from exc
        return self._run(jobviews.jobs_page(self._store, where, limit, after))

    def show(self, source: str, job_id: str) -> dict[str, Any]:
        detail = self._run(jobviews.job_detail(self._store, source, job_id))
        if detail is None:
            raise ClientError(f"no job {job_id!r} of source {source!r}")
        return detail

    def stats(self, period: str) -> dict[str, Any]:
        try:
            name, seconds = jobquery.parse_period(period)
        except jobquery.QueryError as exc:
            raise ClientError(exc.detail, exit_code=2) from exc
        since = time.time() - seconds
        return self._run(jobviews.full_stats(self._store, name, since, self._thresholds))

    def export(
        self, filters: Filters, fmt: str, include_result: bool, fields: str | None = None
    ) -> Iterator[str]:
        try:
            where = jobquery.build_filter(**filters)
            columns = parse_fields(fields)
        except jobquery.QueryError as exc:
            raise ClientError(exc.detail, exit_code=2) from exc
        lines = export_lines(self._store, where, fmt, include_result=include_result, fields=columns)

        async def following() -> str | None:
            return await anext(lines, None)

        while (line := self._run(following())) is not None:
            yield line


def _params(filters: Filters) -> list[tuple[str, str]]:
    """The filter options as query parameters (metadata repeated); empty ones left out."""
    params: list[tuple[str, str]] = []
    for key, value in filters.items():
        if isinstance(value, list | tuple):
            params += [(key, str(item)) for item in value]
        elif value is not None:
            params.append((key, str(value)))
    return params
