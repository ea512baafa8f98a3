"""Shared by the Textract tests: credentials in the environment, the simulator, a config."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.config.load import load_settings

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

KEY_ID = "AKIDSIMULATOR0000001"
SECRET_KEY = "sim/secret/key/0123456789abcdefghijklmn"
REGION = "us-east-1"
TOPIC = "arn:aws:sns:us-east-1:123456789012:textract-done"
ROLE = "arn:aws:iam::123456789012:role/TextractSNS"
TOKEN = "admin-token-0123456789abcdef"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials as a deployment gives them (environment), and no other source of them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def textract_settings(
    tmp_path: Path,
    api_url: str,
    sns_url: str,
    *,
    extra_aws: str = "",
    poll: str = "grace_seconds = 600\nrequests_per_minute = 480",
    extra: str = "",
) -> Settings:
    """A textract source on the simulator: its CA and SNS host added, a file handler."""
    sns_authority = sns_url.removeprefix("https://")
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
[dispatch]
lease_seconds = 5
[sources.tx]
provider = "textract"
api_base_url = "{api_url}"
[sources.tx.aws]
region = "{REGION}"
topic_arns = ["{TOPIC}"]
extra_ca_bundle = "{tmp_path / "sim" / "ca.pem"}"
extra_sns_hosts = ["{sns_authority}"]
{extra_aws}
[sources.tx.poll]
{poll}
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.05
{extra}
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})
