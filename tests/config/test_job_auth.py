"""``Provider.job_auth``: only an ``api_key`` provider takes a source's ``api_key``, and a polled
one needs it; built-in and third-party providers alike, nothing decided by a provider's name."""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING

import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.providers import PROVIDERS

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TOPIC = "arn:aws:sns:eu-west-1:123456789012:textract"
GOOGLE = '[sources.s]\nprovider = "google-docai"\n[sources.s.gcp]\nlocation = "eu"\n'
TEXTRACT = (
    f'[sources.s]\nprovider = "textract"\n[sources.s.aws]\nregion = "eu-west-1"\n'
    f'topic_arns = ["{TOPIC}"]\n'
)
PLUGIN = '''
from receiver.providers.mistral import MistralBatch


class Signed(MistralBatch):
    """A third-party polled provider whose job API signs with AWS Signature V4."""

    name = "signed"
    job_auth = "sigv4"


class Keyed(MistralBatch):
    """A third-party polled provider whose job API takes the source's api_key."""

    name = "keyed"
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    module = f"jobhook_auth_{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    yield module
    sys.modules.pop(module, None)


def _load(tmp_path: Path, text: str, api_key: bool = False) -> object:
    path = tmp_path / "jobhook.toml"
    key = 'api_key = "env:KEY"\n' if api_key else ""
    head, _, rest = text.partition("\n[sources.s.")
    body = head + "\n" + key + ("[sources.s." + rest if rest else "")
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n' + body)
    return load_settings(path, environ={"KEY": "k"})


def test_each_builtin_declares_how_its_job_api_signs() -> None:
    declared = {name: cls.job_auth for name, cls in PROVIDERS.items() if cls.job_auth != "api_key"}
    assert declared == {"google-docai": "table", "textract": "sigv4"}


def test_google_is_polled_without_an_api_key_and_refuses_one(tmp_path: Path) -> None:
    _load(tmp_path, GOOGLE)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, GOOGLE, api_key=True)
    assert (
        "provider 'google-docai' signs its requests with [sources.NAME.gcp] credentials, "
        "not an api_key"
    ) in str(caught.value)


def test_textract_refuses_an_api_key(tmp_path: Path) -> None:
    _load(tmp_path, TEXTRACT)
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, TEXTRACT, api_key=True)
    assert (
        "provider 'textract' signs its requests with AWS Signature V4 (the environment's key "
        "pair), not an api_key"
    ) in str(caught.value)


def test_a_third_party_provider_declares_its_own_signing(tmp_path: Path, plugin: str) -> None:
    signed = f'[sources.s]\nprovider = "{plugin}:Signed"\n'
    _load(tmp_path, signed)  # polled, yet no api_key: it signs its own requests
    with pytest.raises(ConfigError, match=r"signs its requests with AWS Signature V4"):
        _load(tmp_path, signed, api_key=True)


def test_a_third_party_polled_provider_with_an_api_key_needs_it(
    tmp_path: Path, plugin: str
) -> None:
    keyed = f'[sources.s]\nprovider = "{plugin}:Keyed"\n'
    _load(tmp_path, keyed, api_key=True)
    with pytest.raises(ConfigError, match=r"is polled: it needs api_key"):
        _load(tmp_path, keyed)
