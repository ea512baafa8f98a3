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

import httpx

from receiver.admin import query as jobquery
from receiver.admin import views as jobviews
from receiver.admin.export import export_lines, parse_fields
from receiver.errors import ConfigError, JobhookError

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

T = TypeVar("T")

Filters = dict[str, Any]
"""Filter options as text: source, state, created_after, created_before, min_confidence,
error_code, and metadata as a list of ``key:value``."""


class ClientError(Exception):
    """A command could not get its answer; ``exit_code`` 2 for bad input, 4 otherwise."""

    def __init__(self, message: str, exit_code: int = 4) -> None:
        super().__init__(message)
        self.exit_code = exit_code


REPROCESS_TIMEOUT = httpx.Timeout(30.0, read=600.0)
"""A reprocess call waits for the provider's rate budget, one submission after another."""


class ServiceClient:
    """The admin API of a running jobhook."""

    def __init__(
        self, url: str, token: str | None, *, timeout: float = 30.0, store_fallback: bool = False
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._token_given = bool(token)
        self._unreachable_hint = (
            "is `jobhook serve` running? Point --url (or JOBHOOK_URL) at it"
            + (", or pass --config to read the store without a service" if store_fallback else "")
        )
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"ServiceClient({self.url!r})"

    def close(self) -> None:
        self._client.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        _check(response, token_given=self._token_given)
        return response

    def _unreachable(self, exc: httpx.HTTPError) -> ClientError:
        return ClientError(f"cannot reach {self.url} ({type(exc).__name__}); "
                           f"{self._unreachable_hint}")  # fmt: skip

    def list_jobs(self, filters: Filters, limit: int, cursor: str | None) -> dict[str, Any]:
        params = {**_params(filters), "limit": limit, "cursor": cursor}
        data: dict[str, Any] = self._call("GET", "/jobs", params=_drop_none(params)).json()
        return data

    def show(self, source: str, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("GET", _job_path(source, job_id)).json()
        return data

    def stats(self, period: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("GET", "/jobs/stats", params={"period": period}).json()
        return data

    def export(
        self, filters: Filters, fmt: str, include_result: bool, fields: str | None = None
    ) -> Iterator[str]:
        params = {**_params(filters), "format": fmt, "include_result": str(include_result).lower()}
        params["fields"] = fields
        request = self._client.build_request("GET", "/jobs/export", params=_drop_none(params))
        try:
            response = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        try:
            if response.status_code != 200:
                response.read()
                _check(response, token_given=self._token_given)
            yield from response.iter_text()
        finally:
            response.close()

    def track(
        self, source: str, job_id: str, metadata: dict[str, str], pages: int | None
    ) -> dict[str, Any]:
        body = {"source": source, "job_id": job_id, "metadata": metadata, "pages": pages}
        data: dict[str, Any] = self._call("POST", "/jobs", json=body).json()
        return data

    def replay(
        self, source: str, job_id: str, handler: str | None, include_succeeded: bool
    ) -> dict[str, Any]:
        body = {"handler": handler, "include_succeeded": include_succeeded}
        path = _job_path(source, job_id) + "/replay"
        data: dict[str, Any] = self._call("POST", path, json=body).json()
        return data

    def replay_matching(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/replay``: one call of a bulk replay (or its dry run)."""
        data: dict[str, Any] = self._call("POST", "/jobs/replay", json=body).json()
        return data

    def reprocess(self, source: str, job_id: str, force: bool) -> dict[str, Any]:
        """``POST /jobs/{source}/{job_id}/reprocess``: submit one job again at its provider."""
        path = _job_path(source, job_id) + "/reprocess"
        data: dict[str, Any] = self._call("POST", path, json={"force": force},
                                          timeout=REPROCESS_TIMEOUT).json()  # fmt: skip
        return data

    def reprocess_matching(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/reprocess``: one call of a bulk reprocess (or its dry run)."""
        response = self._call("POST", "/jobs/reprocess", json=body, timeout=REPROCESS_TIMEOUT)
        data: dict[str, Any] = response.json()
        return data

    def wait(self, source: str, job_id: str, seconds: float) -> dict[str, Any]:
        """One long-poll of at most ``seconds``: the job's detail, terminal or not."""
        path = _job_path(source, job_id) + "/wait"
        params = {"timeout": f"{seconds:.3f}"}
        timeout = httpx.Timeout(30.0, read=seconds + 30.0)
        data: dict[str, Any] = self._call("GET", path, params=params, timeout=timeout).json()
        return data


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


def _check(response: httpx.Response, *, token_given: bool) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
        error, detail = body.get("error", ""), body.get("detail", "")
    except ValueError:
        error, detail = "", ""
    if response.status_code == 401 and not token_given:
        raise ClientError("no admin token given; pass --token or set JOBHOOK_ADMIN_TOKEN to the "
                          "service's server.admin_token")  # fmt: skip
    if response.status_code == 401:
        raise ClientError("the service refused the admin token; pass the service's "
                          "server.admin_token with --token or JOBHOOK_ADMIN_TOKEN")  # fmt: skip
    if response.status_code == 404 and not error:
        raise ClientError("no admin API there: wrong --url, or server.admin_token is not set")
    exit_code = 2 if response.status_code in (400, 413) else 4
    raise ClientError(f"{detail or error or response.reason_phrase} ({response.status_code})",
                      exit_code)  # fmt: skip


def _job_path(source: str, job_id: str) -> str:
    from urllib.parse import quote

    return f"/jobs/{quote(source, safe='')}/{quote(job_id, safe='')}"


def _params(filters: Filters) -> dict[str, Any]:
    return {key: value for key, value in filters.items() if value not in (None, (), [])}


def _drop_none(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if value is not None}
