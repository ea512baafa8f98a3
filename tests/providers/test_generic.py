"""The generic provider: each known provider's bodies read through configuration alone."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.generic import Generic
from receiver.service.app import build_sources
from tests.providers.configs import GENERIC_TOML, generic_for
from tests.providers.conftest import sample
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

WEBHOOKS = [(p, k) for p in GENERIC_TOML for k in sample(p) if k.startswith("webhook_")]
JOBS = [(p, k) for p in GENERIC_TOML for k in sample(p) if k.startswith("job_")]


@pytest.mark.parametrize(("provider", "key"), WEBHOOKS, ids=lambda v: str(v))
def test_generic_reads_every_sample_webhook_like_the_adapter(provider: str, key: str) -> None:
    body = sample(provider)[key]
    expected = get_provider(provider).parse_webhook(body, source="s", message_id="m")
    assert generic_for(provider).parse_webhook(body, source="s", message_id="m") == expected


@pytest.mark.parametrize(("provider", "key"), JOBS, ids=lambda v: str(v))
def test_generic_reads_every_sample_job_answer_like_the_adapter(provider: str, key: str) -> None:
    body = sample(provider)[key]
    expected = get_provider(provider).parse_job(body, source="s", job_id="j")
    got = generic_for(provider).parse_job(body, source="s", job_id="j")
    assert (got.state, got.provider_status, got.error) == (
        expected.state, expected.provider_status, expected.error)  # fmt: skip
    if provider != "reducto":  # Reducto's progress is a fraction, not pages
        assert got.progress == expected.progress
    if provider == "docextract" and expected.result is not None:
        # Configured with result = "": the whole document, a superset of the adapter's result.
        assert got.result is not None
        assert got.result.inline == body
        assert expected.result.inline.items() <= body.items()
    else:
        assert got.result == expected.result


def test_generic_reads_the_retry_hint_where_configured() -> None:
    assert generic_for("knowhere").retry_hint(sample("knowhere")["rate_limited_429"]) == 12.0
    assert generic_for("docurift").retry_hint(sample("knowhere")["rate_limited_429"]) is None


def test_generic_job_path_and_auth_follow_the_configuration() -> None:
    docurift, knowhere = generic_for("docurift"), generic_for("knowhere")
    assert docurift.job_path("doc_71c0a2") == "/v1/documents/doc_71c0a2"
    assert knowhere.job_path("job 1") == "/v1/jobs/job%201"
    assert docurift.auth_headers("k") == {"X-API-Key": "k"}
    assert knowhere.auth_headers("k") == {"Authorization": "Bearer k"}
    assert knowhere.list_path() is None


def test_result_url_wins_over_an_inline_result() -> None:
    body = {"status": "Completed", "result": {"result": {"type": "url", "url": "https://u/r"}}}
    status = generic_for("reducto").parse_job(body, source="s", job_id="j")
    assert status.result is not None
    assert (status.result.url, status.result.inline) == ("https://u/r", None)


def test_unfinished_job_has_no_result_even_when_one_is_present() -> None:
    body = {"data": {"status": "processing", "result": {"partial": True}}}
    status = generic_for("docurift").parse_job(body, source="s", job_id="j")
    assert (status.state, status.result) == (State.RUNNING, None)


GENERIC_BASE = """
data_dir = "{data}"
[sources.acme]
provider = "generic"
secrets = ["{secret}"]
[sources.acme.generic]
webhook_job_id = "/job/id"
webhook_status = "/job/state"
job_status = "/state"
result = "/output"
{extra}
[sources.acme.generic.status_words]
0 = "queued"
1 = "running"
2 = "succeeded"
{words}
"""


def _load(tmp_path: Path, extra: str = "", words: str = "", **replace: str) -> Any:
    text = GENERIC_BASE.format(data=tmp_path, secret=SECRET, extra=extra, words=words)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "jobhook.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ={})


def _error(tmp_path: Path, **kwargs: str) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, **kwargs)
    return str(info.value)


def test_a_new_api_is_configuration_not_code(tmp_path: Path) -> None:
    settings = _load(tmp_path)
    source = build_sources(settings)["acme"]
    assert isinstance(source.provider, Generic)
    event = source.provider.parse_webhook(
        {"job": {"id": 7, "state": 2}}, source="acme", message_id="m"
    )
    assert (event.job_id, event.state, event.provider_status) == ("7", State.SUCCEEDED, "2")
    status = source.provider.parse_job({"state": 2, "output": [1, 2]}, source="acme", job_id="7")
    assert status.result is not None
    assert status.result.inline == [1, 2]
    assert source.provider.job_path("7") == "/v1/jobs/7"  # the default


@pytest.mark.parametrize(
    ("kwargs", "key", "words"),
    [
        ({"extra": 'error = "error"'}, "sources.acme.generic.error", "start with '/'"),
        ({"extra": 'progress_done = "/p~2"'}, "sources.acme.generic.progress_done", "'~'"),
        ({"words": '3 = "finished"'}, "sources.acme.generic.status_words.3", "succeeded"),
        ({"extra": 'job_path = "/v1/jobs"'}, "sources.acme.generic.job_path", "{job_id}"),
        ({"extra": 'job_path = "/v1/{id}/{job_id}"'}, "sources.acme.generic.job_path", "no other"),
        ({"extra": 'job_path = "/v1/{job_id"'}, "sources.acme.generic.job_path", "template"),
        ({"extra": 'auth_header = "X Key"'}, "sources.acme.generic.auth_header", "pattern"),
        (
            {"extra": 'webhook_jobid = "/id"'},
            "sources.acme.generic.webhook_jobid",
            "did you mean 'webhook_job_id'?",
        ),
    ],
    ids=["pointer", "escape", "state", "no-job-id", "other-field", "template", "header", "extra"],
)
def test_bad_generic_configuration_names_the_key(
    tmp_path: Path, kwargs: dict[str, str], key: str, words: str
) -> None:
    message = _error(tmp_path, **kwargs)
    assert key in message
    assert words in message


def test_status_words_without_a_terminal_state_are_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, **{'2 = "succeeded"': '2 = "running"'})
    assert "sources.acme.generic.status_words" in message
    assert "terminal" in message


def test_required_pointers_must_be_configured(tmp_path: Path) -> None:
    message = _error(tmp_path, **{'job_status = "/state"': ""})
    assert "sources.acme.generic.job_status" in message


def test_generic_provider_without_its_table_is_refused(tmp_path: Path) -> None:
    text = (
        f'data_dir = "{tmp_path}"\n[sources.acme]\nprovider = "generic"\nsecrets = ["{SECRET}"]\n'
    )
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ConfigError, match=re.escape("needs a [sources.NAME.generic] table")):
        load_settings(tmp_path / "c.toml", environ={})


def test_generic_table_on_another_provider_is_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, **{'provider = "generic"': 'provider = "reducto"'})
    assert "only for provider 'generic'" in message


def test_get_provider_for_generic_needs_its_settings() -> None:
    with pytest.raises(ConfigError):
        get_provider("generic")
