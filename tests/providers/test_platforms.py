"""Unstructured, LandingAI and Mistral adapters: status words, partial outcomes, result
references, and their sources (polled, no secret; a webhook for them is refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.errors import ConfigError, PayloadError, ProviderError
from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.landingai import LandingAIOptions
from receiver.service.app import create_app
from tests.adminsupport import AUTH, TOKEN
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path


def test_unstructured_words_and_a_completed_job_names_each_output_file_once() -> None:
    adapter = get_provider("unstructured")
    words = {
        "SCHEDULED": State.QUEUED,
        "IN_PROGRESS": State.RUNNING,
        "COMPLETED": State.SUCCEEDED,
        "STOPPED": State.CANCELLED,
        "FAILED": State.FAILED,
    }
    for word, state in words.items():  # fmt: skip
        assert adapter.parse_job({"status": word}, source="s", job_id="j").state is state
    nodes = [{"file_id": f, "node_id": n} for f in ("f1", "f2") for n in ("partition", "chunk")]
    status = adapter.parse_job({"status": "COMPLETED", "output_node_files": nodes},
                               source="s", job_id="j")  # fmt: skip
    assert status.result is not None
    assert status.result.assemble == "unstructured"
    assert status.result.inline == {"files": ["f1", "f2"]}
    assert adapter.auth_headers("k") == {"unstructured-api-key": "k"}


def test_mistral_partial_timeout_and_failed_batches() -> None:
    adapter = get_provider("mistral")
    base = {"total_requests": 4, "completed_requests": 4, "output_file": "out",
            "error_file": "err", "errors": []}  # fmt: skip
    partial = adapter.parse_job({**base, "status": "SUCCESS", "failed_requests": 1},
                                source="s", job_id="j")  # fmt: skip
    assert (partial.state, partial.error_code) == (State.PARTIAL, "requests_failed")
    assert partial.error == "1 of 4 requests failed"
    assert partial.result is not None
    assert partial.result.inline == {"output_file": "out", "error_file": "err"}
    timeout = adapter.parse_job({**base, "status": "TIMEOUT_EXCEEDED"}, source="s", job_id="j")
    assert (timeout.state, timeout.error_code) == (State.FAILED, "TIMEOUT_EXCEEDED")
    failed = adapter.parse_job({"status": "FAILED", "errors": [{"message": "bad line",
                               "count": 3}]}, source="s", job_id="j")  # fmt: skip
    assert (failed.state, failed.error, failed.result) == (State.FAILED, "bad line (x3)", None)
    running = adapter.parse_job({"status": "CANCELLATION_REQUESTED", "total_requests": 4,
                                 "completed_requests": 1}, source="s", job_id="j")  # fmt: skip
    assert running.state is State.RUNNING
    assert running.progress is not None
    assert (running.progress.done, running.progress.total) == (1, 4)


def test_landingai_results_inline_by_url_single_use_and_failed_pages() -> None:
    plain = get_provider("landingai")
    zdr = get_provider(
        "landingai", table=LandingAIOptions(jobs="extract", zero_data_retention=True)
    )
    assert zdr.job_path("a/b") == "/v1/ade/extract/jobs/a%2Fb"
    inline = plain.parse_job({"status": "completed", "data": {"markdown": "x"}}, source="s",
                             job_id="j")  # fmt: skip
    assert inline.result is not None
    assert (inline.result.inline, inline.result.single_use) == ({"markdown": "x"}, False)
    by_url = {"status": "completed", "output_url": "https://s3.example/o"}
    assert plain.parse_job(by_url, source="s", job_id="j").result.single_use is False  # type: ignore[union-attr]
    once = zdr.parse_job(by_url, source="s", job_id="j")
    assert once.result is not None
    assert (once.result.url, once.result.single_use) == ("https://s3.example/o", True)
    torn = plain.parse_job({"status": "completed", "data": {}, "metadata": {"failed_pages":
                           [2, 5]}}, source="s", job_id="j")  # fmt: skip
    assert (torn.state, torn.error_code, torn.error) == (
        State.PARTIAL,
        "pages_failed",
        "pages 2, 5 failed to parse",
    )
    gone = plain.parse_job({"status": "completed"}, source="s", job_id="j")
    assert (gone.state, gone.result, gone.error_code) == (State.SUCCEEDED, None, "result_expired")
    with pytest.raises(ProviderError):
        plain.parse_job({"state": "completed"}, source="s", job_id="j")
    with pytest.raises(PayloadError):
        plain.parse_webhook({"job_id": "j", "status": "completed"}, source="s", message_id="m")


def test_landingai_v2_is_the_sources_setting_its_host_and_paths() -> None:
    v1 = get_provider("landingai")
    v2 = get_provider("landingai", table=LandingAIOptions(api_version="v2"))
    extract = get_provider("landingai", table=LandingAIOptions(jobs="extract", api_version="v2"))
    assert (v1.default_api_base_url(), v1.job_path("j")) == (
        "https://api.va.landing.ai",
        "/v1/ade/parse/jobs/j",
    )
    assert (v2.default_api_base_url(), v2.job_path("a/b")) == (
        "https://api.ade.landing.ai",
        "/v2/parse/jobs/a%2Fb",
    )
    assert extract.job_path("j") == "/v2/extract/jobs/j"


@pytest.mark.parametrize("key", ["result", "data"])
def test_landingai_v2_result_is_read_from_result_or_data(key: str) -> None:
    v2 = get_provider("landingai", table=LandingAIOptions(api_version="v2"))
    done = v2.parse_job({"status": "completed", key: {"markdown": "x"}}, source="s", job_id="j")
    assert done.state is State.SUCCEEDED
    assert done.result is not None
    assert done.result.inline == {"markdown": "x"}


def test_landingai_v2_failed_pages_in_the_result_or_the_receipt_make_it_partial() -> None:
    v2 = get_provider("landingai", table=LandingAIOptions(api_version="v2"))
    inline = {"status": "completed", "result": {"metadata": {"failed_pages": [2, 3]}}}
    by_url = {"status": "completed", "output_url": "https://s3.example/o",
              "metadata": {"failed_pages": [4]}}  # fmt: skip
    for body, error in (
        (inline, "pages 2, 3 failed to parse"),
        (by_url, "pages 4 failed to parse"),
    ):
        status = v2.parse_job(body, source="s", job_id="j")
        assert (status.state, status.error_code, status.error) == (
            State.PARTIAL,
            "pages_failed",
            error,
        )
        assert status.result is not None


def test_landingai_v2_error_code_is_the_jobs_error_code_and_failure_reason_its_text() -> None:
    v2 = get_provider("landingai", table=LandingAIOptions(api_version="v2"))
    failed = v2.parse_job({"status": "failed", "error": {"code": "document_corrupted",
                           "message": "unreadable"}}, source="s", job_id="j")  # fmt: skip
    assert (failed.state, failed.error_code, failed.error) == (
        State.FAILED,
        "document_corrupted",
        "document_corrupted: unreadable",
    )
    older = v2.parse_job({"status": "failed", "failure_reason": "unreadable"}, source="s",
                         job_id="j")  # fmt: skip
    assert (older.state, older.error_code, older.error) == (State.FAILED, None, "unreadable")
    cancelled = v2.parse_job({"status": "cancelled", "error": {"code": "job_cancelled"}},
                             source="s", job_id="j")  # fmt: skip
    assert (cancelled.state, cancelled.error_code) == (State.CANCELLED, "job_cancelled")


def test_landingai_v2_output_url_comes_from_the_envelope_single_use_under_zdr() -> None:
    zdr = get_provider(
        "landingai", table=LandingAIOptions(api_version="v2", zero_data_retention=True)
    )
    body = {"status": "completed", "result": None, "output_url": "https://s3.example/o",
            "metadata": {"failed_pages": []}}  # fmt: skip
    status = zdr.parse_job(body, source="s", job_id="j")
    assert status.result is not None
    assert (status.state, status.result.url, status.result.single_use) == (
        State.SUCCEEDED,
        "https://s3.example/o",
        True,
    )
    gone = zdr.parse_job({**body, "output_url": None}, source="s", job_id="j")
    assert (gone.result, gone.error_code) == (None, "result_expired")


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[server]\nadmin_token = "{TOKEN}"\n'
        '[sources.landingai]\nprovider = "landingai"\napi_key = "env:KEY"\n'
        'api_base_url = "http://127.0.0.1:9"\n' + extra
    )
    return path


def test_polled_sources_need_no_secret_but_an_api_key(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path), environ={"KEY": "k"})
    assert settings.sources["landingai"].poll.grace_seconds == 0.0
    with pytest.raises(ConfigError, match="sends no webhooks: it needs no secrets"):
        load_settings(_config(tmp_path, 'secrets = ["0123456789abcdef0123"]\n'),
                      environ={"KEY": "k"})  # fmt: skip
    (tmp_path / "jobhook.toml").write_text('[sources.m]\nprovider = "mistral"\n')
    with pytest.raises(ConfigError, match="is polled: it needs api_key"):
        load_settings(tmp_path / "jobhook.toml", environ={})


def test_a_landingai_source_says_its_api_version_in_its_table(tmp_path: Path) -> None:
    table = '[sources.landingai.landingai]\napi_version = "v2"\njobs = "extract"\n'
    settings = load_settings(_config(tmp_path, table), environ={"KEY": "k"})
    assert settings.sources["landingai"].table == LandingAIOptions(jobs="extract", api_version="v2")
    bad = '[sources.landingai.landingai]\napi_version = "v3"\n'
    with pytest.raises(ConfigError, match=r"sources\.landingai\.landingai\.api_version"):
        load_settings(_config(tmp_path, bad), environ={"KEY": "k"})


async def test_a_forged_landingai_webhook_is_refused_and_changes_no_job(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path), environ={"KEY": "k"})
    async with (
        live_server(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
    ):
        await admin.post("/jobs", json={"source": "landingai", "job_id": "job-1"})
        before = (await admin.get("/jobs/landingai/job-1")).json()["job"]
        forged = await admin.post(
            "/webhooks/landingai",
            json={"job_id": "job-1", "status": "completed", "result_url": "https://evil.example/r"},
        )
        after = (await admin.get("/jobs/landingai/job-1")).json()["job"]
    assert 400 <= forged.status_code < 500
    assert (after["state"], after["provider_status"]) == (
        before["state"],
        before["provider_status"],
    )
    assert after["state"] == "queued"


@pytest.mark.parametrize("provider", ["unstructured", "landingai", "mistral", "llamaparse"])
def test_simulate_refuses_to_start_without_a_key(provider: str) -> None:
    result = CliRunner().invoke(main, ["simulate", "--provider", provider], env={
        "JOBHOOK_SIM_API_KEY": ""})  # fmt: skip
    assert result.exit_code != 0
    assert f"--provider {provider} needs --api-key" in result.output
