"""The Textract adapter and its job API, against the simulator (SigV4 checked there)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError, PayloadError
from receiver.models import ResultRef, State
from receiver.pipeline.fields import extract_fields
from receiver.providers import get_provider
from receiver.providers.jobapi import JobNotFoundError
from receiver.providers.ratelimit import RateLimiter
from receiver.providers.textract import (
    ENDPOINT_VARIABLES,
    AwsSettings,
    Textract,
    TextractJobAPI,
    ThrottledError,
)
from receiver.secret import Secret
from receiver.service.app import create_app
from receiver.service.preflight import preflight
from receiver.sim.textract import TextractSim, running
from tests.support import free_port, live_server
from tests.textract_support import KEY_ID, REGION, SECRET_KEY, TOPIC, aws_env

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

__all__ = ["aws_env"]

AWS = AwsSettings(region=REGION, topic_arns=(TOPIC,))


def sns_body(**message: Any) -> dict[str, Any]:
    return {"Type": "Notification", "MessageId": "m-1", "Message": json.dumps(message)}


def test_a_notification_becomes_an_event_with_its_job_tag() -> None:
    provider = Textract(AWS)
    event = provider.parse_webhook(
        sns_body(JobId="j1", Status="SUCCEEDED", API="StartDocumentAnalysis", JobTag="team-42",
                 DocumentLocation={"S3Bucket": "b", "S3ObjectName": "a.pdf"}),
        source="tx", message_id="m-1",
    )  # fmt: skip
    assert (event.job_id, event.state, event.provider_status) == ("j1", State.SUCCEEDED,
                                                                  "SUCCEEDED")  # fmt: skip
    assert event.metadata["JobTag"] == "team-42"
    assert event.metadata["DocumentLocation"]["S3ObjectName"] == "a.pdf"
    assert event.message_id == "m-1"


@pytest.mark.parametrize("status", ["FAILED", "ERROR"])
def test_failed_and_error_are_failed_with_the_word_as_code(status: str) -> None:
    event = Textract(AWS).parse_webhook(sns_body(JobId="j1", Status=status), source="tx",
                                        message_id="m")  # fmt: skip
    assert (event.state, event.error_code) == (State.FAILED, status)


def test_another_api_than_the_sources_is_named_in_the_job_id() -> None:
    event = Textract(AWS).parse_webhook(
        sns_body(JobId="j1", Status="SUCCEEDED", API="StartExpenseAnalysis"), source="tx",
        message_id="m")  # fmt: skip
    assert event.job_id == "ExpenseAnalysis:j1"


def test_a_message_that_is_not_textracts_json_is_refused() -> None:
    with pytest.raises(PayloadError):
        Textract(AWS).parse_webhook({"Message": "not json"}, source="tx", message_id="m")
    with pytest.raises(PayloadError):
        Textract(AWS).parse_webhook(sns_body(Status="SUCCEEDED"), source="tx", message_id="m")


def test_partial_success_is_partial_with_the_warnings_code() -> None:
    status = Textract(AWS).parse_job(
        {"JobStatus": "PARTIAL_SUCCESS", "Warnings": [{"ErrorCode": "UNSUPPORTED", "Pages": [3]}]},
        source="tx", job_id="j1")  # fmt: skip
    assert (status.state, status.error_code) == (State.PARTIAL, "UNSUPPORTED")
    assert status.result == ResultRef(assemble="DocumentAnalysis")


@pytest.fixture
async def sim(tmp_path: Path, aws_env: None) -> AsyncIterator[tuple[TextractSim, str]]:
    simulator = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY, duration=0.05,
                            blocks=2100, requests_per_second=1000)  # fmt: skip
    async with running(simulator, tmp_path / "sim") as (url, _):
        yield simulator, url


@pytest.fixture
async def api(sim: tuple[TextractSim, str]) -> AsyncIterator[TextractJobAPI]:
    async with httpx.AsyncClient() as client:
        yield TextractJobAPI(source="tx", provider=Textract(AWS), base_url=sim[1],
                             api_key=Secret(""), client=client,
                             limiter=RateLimiter(6000, name="tx"))  # fmt: skip


def _start(url: str, api: str, name: str = "doc.pdf") -> str:
    client = boto3.client("textract", endpoint_url=url, region_name=REGION,
                          aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET_KEY)  # fmt: skip
    location = {"S3Object": {"Bucket": "docs", "Name": name}}
    if api == "DocumentAnalysis":
        answer = client.start_document_analysis(DocumentLocation=location,
                                                FeatureTypes=["FORMS"])  # fmt: skip
    else:
        answer = getattr(client, f"start_{'expense' if api == 'ExpenseAnalysis' else 'lending'}"
                         "_analysis")(DocumentLocation=location)  # fmt: skip
    job_id: str = answer["JobId"]
    return job_id


async def test_a_job_is_running_then_succeeded(
    api: TextractJobAPI, sim: tuple[TextractSim, str]
) -> None:
    job_id = await asyncio.to_thread(_start, sim[1], "DocumentAnalysis")
    assert (await api.get_job(job_id)).state is State.RUNNING
    await asyncio.sleep(0.1)
    status = await api.get_job(job_id, urgent=True)
    assert status.state is State.SUCCEEDED
    assert status.result == ResultRef(assemble="DocumentAnalysis")


async def test_every_page_is_assembled_into_one_result(
    api: TextractJobAPI, sim: tuple[TextractSim, str], tmp_path: Path
) -> None:
    job_id = await asyncio.to_thread(_start, sim[1], "DocumentAnalysis")
    await asyncio.sleep(0.1)
    dest = tmp_path / "r.result"
    sha, size = await api.write_result(job_id, ResultRef(assemble="DocumentAnalysis"), dest)
    data = dest.read_bytes()
    assert (hashlib.sha256(data).hexdigest(), len(data)) == (sha, size)
    result = json.loads(data)
    assert len(result["Blocks"]) == 2100
    assert result["ResponsePages"] == 3
    assert result["DocumentMetadata"] == {"Pages": 3}
    assert "NextToken" not in result


async def test_an_expense_job_by_its_api_prefixed_id_gives_its_summary_fields(
    api: TextractJobAPI, sim: tuple[TextractSim, str], tmp_path: Path
) -> None:
    job_id = "ExpenseAnalysis:" + await asyncio.to_thread(_start, sim[1], "ExpenseAnalysis")
    await asyncio.sleep(0.1)
    status = await api.get_job(job_id)
    assert status.result == ResultRef(assemble="ExpenseAnalysis")
    dest = tmp_path / "e.result"
    await api.write_result(job_id, status.result, dest)
    fields = {
        f.field: (f.confidence, f.value)
        for f in extract_fields(json.loads(dest.read_bytes()), api.provider)
    }
    assert fields == {"INVOICE_RECEIPT_ID": (0.974, "INV-0042"), "TOTAL": (0.745, "1,280.00")}


async def test_a_job_textract_does_not_know_is_not_found(api: TextractJobAPI) -> None:
    with pytest.raises(JobNotFoundError, match="7 days"):
        await api.get_job("f" * 64)


async def test_throttling_defers_the_budget_and_says_when_to_retry(
    api: TextractJobAPI, sim: tuple[TextractSim, str]
) -> None:
    sim[0].throttle_every = 1
    with pytest.raises(ThrottledError) as caught:
        await api.get_job("f" * 64)
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > 0
    assert api.limiter._next > 0


async def test_a_throttled_page_is_waited_out_not_started_again(
    api: TextractJobAPI, sim: tuple[TextractSim, str], tmp_path: Path
) -> None:
    job_id = await asyncio.to_thread(_start, sim[1], "DocumentAnalysis")
    await asyncio.sleep(0.1)
    sim[0].throttle_every = 2  # every second Get* is throttled
    await api.write_result(job_id, ResultRef(assemble="DocumentAnalysis"), tmp_path / "r")
    assert len(json.loads((tmp_path / "r").read_bytes())["Blocks"]) == 2100


async def test_a_wrong_key_is_refused_by_the_simulator(
    sim: tuple[TextractSim, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    async with httpx.AsyncClient() as client:
        api = TextractJobAPI(source="tx", provider=Textract(AWS), base_url=sim[1],
                             api_key=Secret(""), client=client,
                             limiter=RateLimiter(6000))  # fmt: skip
        with pytest.raises(Exception, match="403 InvalidSignatureException"):
            await api.get_job("f" * 64)


def test_no_credentials_is_a_config_error_naming_the_source(
    monkeypatch: pytest.MonkeyPatch, aws_env: None
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ConfigError, match=r"sources\.tx: no AWS credentials"):
        TextractJobAPI(source="tx", provider=Textract(AWS), base_url="https://x",
                       api_key=Secret(""), client=httpx.AsyncClient(),
                       limiter=RateLimiter(60))  # fmt: skip


def _config(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "jobhook.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n{text}', encoding="utf-8")
    return load_settings(path, environ={})


def test_a_textract_source_signs_by_sns_and_needs_its_aws_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    settings = _config(tmp_path, f'[sources.tx]\nprovider = "textract"\n[sources.tx.aws]\n'
                                 f'region = "{REGION}"\ntopic_arns = ["{TOPIC}"]\n')  # fmt: skip
    assert settings.sources["tx"].signature == "sns"
    provider = get_provider("textract", table=settings.sources["tx"].table)
    assert provider.default_api_base_url() == "https://textract.us-east-1.amazonaws.com"
    with pytest.raises(ConfigError, match=r"needs a \[sources\.NAME\.aws\] table"):
        _config(tmp_path, '[sources.tx]\nprovider = "textract"\n')


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('region = "us-east-1"\ntopic_arns = []', "at least 1"),
        ('region = "us-east-1"\ntopic_arns = ["arn:aws:sqs:us-east-1:1:q"]', "not an SNS topic"),
        (f'region = "Virginia"\ntopic_arns = ["{TOPIC}"]', "not an AWS region"),
    ],
)
def test_a_bad_aws_table_is_refused(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, f'[sources.tx]\nprovider = "textract"\n[sources.tx.aws]\n{table}\n')


def test_sns_takes_no_secrets_and_is_only_for_textract(tmp_path: Path) -> None:
    aws = f'[sources.tx.aws]\nregion = "{REGION}"\ntopic_arns = ["{TOPIC}"]\n'
    with pytest.raises(ConfigError, match="takes no secrets"):
        _config(tmp_path, f'[sources.tx]\nprovider = "textract"\nsecrets = ["a" ]\n{aws}')
    with pytest.raises(ConfigError, match="only for provider textract"):
        _config(tmp_path, '[sources.r]\nprovider = "reducto"\nsignature = "sns"\n')


def test_without_the_aws_extra_startup_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, aws_env: None
) -> None:
    monkeypatch.setitem(sys.modules, "botocore.session", None)  # as if botocore were absent
    with pytest.raises(ConfigError, match=r"needs the 'aws' extra \(botocore\)"):
        TextractJobAPI(source="tx", provider=Textract(AWS), base_url="https://x",
                       api_key=Secret(""), client=httpx.AsyncClient(),
                       limiter=RateLimiter(60))  # fmt: skip


GLOBAL = "http://global.test:4566"
SERVICE = "http://textract.test:4566"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"AWS_ENDPOINT_URL": GLOBAL},
        {"AWS_ENDPOINT_URL_TEXTRACT": SERVICE, "AWS_ENDPOINT_URL": GLOBAL},
        {"AWS_ENDPOINT_URL_TEXTRACT": "", "AWS_ENDPOINT_URL": GLOBAL},
        {"AWS_ENDPOINT_URL_S3": SERVICE},
        {"AWS_ENDPOINT_URL_TEXTRACT": SERVICE, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "True"},
        {"AWS_ENDPOINT_URL": GLOBAL, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "false"},
    ],
)
def test_the_endpoint_comes_from_the_environment_as_boto3_takes_it(
    environ: dict[str, str], aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    boto3_uses = boto3.client("textract", region_name=REGION).meta.endpoint_url
    assert Textract(AWS).default_api_base_url() == boto3_uses


def test_an_endpoint_variable_that_is_no_url_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_TEXTRACT", "textract.test:4566")
    with pytest.raises(ConfigError, match="AWS_ENDPOINT_URL_TEXTRACT must be an http"):
        Textract(AWS).default_api_base_url()


@pytest.mark.parametrize("api_base_url", [False, True])
async def test_the_service_polls_the_environment_s_endpoint_unless_api_base_url_is_set(
    api_base_url: bool,
    sim: tuple[TextractSim, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, url = sim
    nowhere = f"http://127.0.0.1:{free_port()}"
    # Without api_base_url the service's own variable wins over the global one; with it, the
    # source's setting wins over both.
    monkeypatch.setenv("AWS_ENDPOINT_URL_TEXTRACT", nowhere if api_base_url else url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", nowhere)
    base = f'api_base_url = "{url}"\n' if api_base_url else ""
    settings = _config(tmp_path, f'[sources.tx]\nprovider = "textract"\n{base}[sources.tx.aws]\n'
                                 f'region = "{REGION}"\ntopic_arns = ["{TOPIC}"]\n')  # fmt: skip
    job_id = await asyncio.to_thread(_start, url, "DocumentAnalysis")
    app = create_app(settings)
    async with live_server(app):
        status = await app.state.runtime.apis["tx"].get_job(job_id)
    assert status.state in (State.RUNNING, State.SUCCEEDED)  # the simulator knows the job


def test_check_config_names_an_endpoint_variable_that_is_no_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``check-config`` accepts, ``serve`` starts: the environment's endpoint included."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "localhost:4566")
    aws = f'[sources.tx.aws]\nregion = "{REGION}"\ntopic_arns = ["{TOPIC}"]\n'
    config = tmp_path / "jobhook.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[sources.tx]\nprovider = "textract"\n{aws}')
    with pytest.raises(ConfigError, match=r"sources\.tx: AWS_ENDPOINT_URL must be an http"):
        preflight(config, check_port=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:4566")
    assert preflight(config, check_port=False).sources["tx"].provider.name == "textract"
