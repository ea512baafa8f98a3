"""Sources of providers that send no webhook: no secret, polled from the start, their own table."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.providers import get_provider
from receiver.providers.azure import AzureOptions
from receiver.sim.google import DocumentAISim
from tests.support import FIXTURES

REPO = FIXTURES.parents[1]

if TYPE_CHECKING:
    from pathlib import Path

AZURE = """
[sources.az]
provider = "azure-docintel"
api_base_url = "https://docs.cognitiveservices.azure.com"
api_key = "env:AZURE_DOCINTEL_KEY"
"""
ENV = {"AZURE_DOCINTEL_KEY": "k" * 32}


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "jobhook.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n' + text)
    return load_settings(path, environ=ENV)


def test_an_azure_source_needs_no_secret_and_is_polled_without_grace(tmp_path: Path) -> None:
    settings = _load(tmp_path, AZURE + '[sources.az.azure]\nmodel_id = "prebuilt-invoice"\n')
    source = settings.sources["az"]  # type: ignore[attr-defined]
    assert source.secrets == ()
    assert source.poll.grace_seconds == 0.0
    assert source.table == AzureOptions(model_id="prebuilt-invoice")
    assert source.api_key.reveal() == ENV["AZURE_DOCINTEL_KEY"]


def _documented(heading: str) -> str:
    """The first TOML block under ``heading`` in docs/providers.md."""
    text = (REPO / "docs" / "providers.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    return section[
        section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml"))
    ]


def test_the_documented_azure_source_loads_as_pasted(tmp_path: Path) -> None:
    settings = _load(tmp_path, _documented("## Azure AI Document Intelligence"))
    source = settings.sources["az"]  # type: ignore[attr-defined]
    assert (source.provider, source.table.model_id) == ("azure-docintel", "prebuilt-invoice")


def test_a_grace_period_that_is_set_is_kept(tmp_path: Path) -> None:
    settings = _load(tmp_path, AZURE + "[sources.az.poll]\ngrace_seconds = 5\n")
    assert settings.sources["az"].poll.grace_seconds == 5.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (AZURE + 'secrets = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]\n', "needs no secrets"),
        ('[sources.az]\nprovider = "azure-docintel"\n', "needs api_base_url"),
        (AZURE + '[sources.az.azure]\napi_version = "v4"\n', "a date"),
        (AZURE + '[sources.az.azure]\nmodel_id = "no spaces"\n', "model id"),
        ('[sources.r]\nprovider = "reducto"\nsecrets = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]\n'
         "[sources.r.azure]\n", "not for provider 'reducto'"),
    ],
)  # fmt: skip
def test_a_bad_cloud_source_is_refused_saying_why(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _load(tmp_path, text)


def test_the_documented_google_source_loads_with_a_key_at_its_path(tmp_path: Path) -> None:
    key = tmp_path / "docai-key.json"
    key.write_text(json.dumps(DocumentAISim().service_account_key()))
    text = _documented("## Google Document AI").replace("/etc/jobhook/docai-key.json", str(key))
    source = _load(tmp_path, text).sources["docai"]  # type: ignore[attr-defined]
    provider = get_provider(source.provider, table=source.table)
    assert provider.default_api_base_url() == "https://eu-documentai.googleapis.com"
    assert provider.job_id("8437264") == "my-project:eu:8437264"


def test_a_google_key_that_is_no_service_account_key_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "key.json"
    key.write_text('{"type": "authorized_user"}')
    text = f'[sources.g]\nprovider = "google-docai"\n[sources.g.gcp]\ncredentials = "file:{key}"\n'
    with pytest.raises(ConfigError, match="service_account"):
        _load(tmp_path, text)


def test_the_documented_entra_source_loads_with_no_key(tmp_path: Path) -> None:
    text = _documented("### Entra ID instead of a key")
    path = tmp_path / "jobhook.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n' + text)
    settings = load_settings(path, environ={"AZURE_CLIENT_SECRET_JOBHOOK": "s" * 40})
    source = settings.sources["az"]
    assert source.api_key is None
    assert source.table is not None
    assert source.table.auth == "entra"  # type: ignore[attr-defined]
    assert source.table.client_secret.reveal() == "s" * 40  # type: ignore[attr-defined]
    assert "s" * 40 not in repr(source.table)


def test_the_documented_batch_container_loads(tmp_path: Path) -> None:
    sas = "https://acct.blob.core.windows.net/results?sv=2024-11-04&sr=c&sp=rl&sig=abc%3D"
    text = AZURE + _documented("### Batch analysis")
    path = tmp_path / "jobhook.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n' + text)
    settings = load_settings(path, environ=ENV | {"AZURE_RESULTS_SAS_URL": sas})
    table = settings.sources["az"].table
    assert table.container_sas  # type: ignore[union-attr]
    assert "sig=" not in repr(table)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (AZURE + '[sources.az.azure]\nauth = "entra"\n', "remove api_key"),
        (AZURE + '[sources.az.azure]\nauth = "token"\n', "'key' or 'entra'"),
        (AZURE + '[sources.az.azure]\nclient_secret = "x"\n', "needs tenant_id and client_id"),
        (AZURE + '[sources.az.azure]\nauthority = "http://login.example"\n', "https URL"),
        (AZURE + '[sources.az.azure]\nresult_container_url = "https://a.example/"\n',
         "name the container"),
    ],
)  # fmt: skip
def test_a_bad_entra_or_batch_table_is_refused_saying_why(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        _load(tmp_path, text)


def test_entra_without_azure_identity_installed_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As where jobhook[azure] is not installed (whether or not another test imported it).
    monkeypatch.setitem(sys.modules, "azure", None)
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    text = '[sources.az]\nprovider = "azure-docintel"\napi_base_url = "https://a.example"\n'
    with pytest.raises(ConfigError, match=r"needs jobhook\[azure\]"):
        _load(tmp_path, text + '[sources.az.azure]\nauth = "entra"\n')
