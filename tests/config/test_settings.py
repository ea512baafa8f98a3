"""Configuration: validated once, errors name the key, secrets never appear in errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> object:
    path = tmp_path / "jobhook.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ=env or {})


def _error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text, env)
    return str(info.value)


SOURCE = '[sources.reducto]\nprovider = "reducto"\n'


def test_secret_from_env_and_file_resolve(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    settings = _load(
        tmp_path,
        SOURCE + f'secrets = ["env:WH", "file:{secret_file}"]\n',
        {"WH": SECRET},
    )
    secrets = settings.sources["reducto"].secrets  # type: ignore[attr-defined]
    assert [s.reveal() for s in secrets] == [SECRET, SECRET]
    assert SECRET not in repr(settings)


def test_signed_source_without_secret_refuses_to_start(tmp_path: Path) -> None:
    message = _error(tmp_path, SOURCE + "secrets = []\n")
    assert "sources.reducto.secrets" in message
    assert "at least one secret" in message


def test_missing_secrets_key_names_it(tmp_path: Path) -> None:
    assert "sources.reducto.secrets" in _error(tmp_path, SOURCE)


def test_unset_env_secret_names_the_variable(tmp_path: Path) -> None:
    message = _error(tmp_path, SOURCE + 'secrets = ["env:NOPE"]\n')
    assert "sources.reducto.secrets #1" in message
    assert "NOPE" in message


def test_malformed_secret_is_refused_without_echoing_it(tmp_path: Path) -> None:
    bad = "whsec_not*base64*at*all!!"
    message = _error(tmp_path, SOURCE + f'secrets = ["{bad}"]\n')
    assert "not a whsec_ base64 secret" in message
    assert bad not in message


def test_short_secret_is_refused(tmp_path: Path) -> None:
    assert "too short" in _error(tmp_path, SOURCE + 'secrets = ["whsec_c2hvcnQ="]\n')


def test_unknown_provider_is_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, f'[sources.x]\nprovider = "nope"\nsecrets = ["{SECRET}"]\n')
    assert "sources.x.provider" in message
    assert "unknown provider" in message


def test_unknown_key_is_refused(tmp_path: Path) -> None:
    assert "server.prot" in _error(tmp_path, "[server]\nprot = 1\n")


def test_invalid_toml_is_reported(tmp_path: Path) -> None:
    assert "not valid TOML" in _error(tmp_path, "[server\n")


def test_missing_config_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml", environ={})


def test_env_overrides_nested_keys(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        "",
        {
            "JOBHOOK_SERVER__PORT": "9001",
            "JOBHOOK_SOURCES__REDUCTO__PROVIDER": "reducto",
            "JOBHOOK_SOURCES__REDUCTO__SECRETS": '["env:WH"]',
            "WH": SECRET,
        },
    )
    assert settings.server.port == 9001  # type: ignore[attr-defined]
    assert "reducto" in settings.sources  # type: ignore[attr-defined]


def test_paths_follow_data_dir(tmp_path: Path) -> None:
    settings = _load(tmp_path, f'data_dir = "{tmp_path}/d"\n')
    assert settings.store.url == f"sqlite:///{tmp_path}/d/jobhook.db"  # type: ignore[attr-defined]
    assert str(settings.results.dir) == f"{tmp_path}/d/results"  # type: ignore[attr-defined]


def test_zero_config_without_secret_has_no_source() -> None:
    settings = load_settings(None, environ={})
    assert settings.sources == {}


def test_zero_config_with_reducto_secret_in_env() -> None:
    settings = load_settings(None, environ={"REDUCTO_WEBHOOK_SECRET": SECRET})
    assert settings.sources["reducto"].secrets[0].reveal() == SECRET


def test_handler_naming_unknown_source_is_refused(tmp_path: Path) -> None:
    text = '[[handlers]]\nname = "a"\ntype = "log"\nsources = ["nope"]\n'
    assert "unknown source 'nope'" in _error(tmp_path, text)


def test_duplicate_handler_names_are_refused(tmp_path: Path) -> None:
    text = '[[handlers]]\nname = "a"\ntype = "log"\n[[handlers]]\nname = "a"\ntype = "log"\n'
    assert "used twice" in _error(tmp_path, text)


def test_a_handlers_max_concurrency_is_read_and_unset_by_default(tmp_path: Path) -> None:
    text = '[[handlers]]\nname = "a"\ntype = "log"\nmax_concurrency = 2\n'
    text += '[[handlers]]\nname = "b"\ntype = "log"\n'
    settings = _load(tmp_path, text)
    limits = [h.max_concurrency for h in settings.handlers]  # type: ignore[attr-defined]
    assert limits == [2, None]


@pytest.mark.parametrize("value", ["0", "-1", "1.5", '"many"'])
def test_a_max_concurrency_below_one_or_not_a_whole_number_is_refused(
    tmp_path: Path, value: str
) -> None:
    message = _error(
        tmp_path, f'[[handlers]]\nname = "a"\ntype = "log"\nmax_concurrency = {value}\n'
    )
    assert "max_concurrency" in message


def test_handler_options_never_show_their_values_in_reprs(tmp_path: Path) -> None:
    text = (
        '[[handlers]]\nname = "fwd"\ntype = "http"\nurl = "https://u:pw@example.com/x"\n'
        'secret = "whsec_dG9wLXNlY3JldC12YWx1ZS0xMjM0"\n'
    )
    settings = _load(tmp_path, text)
    assert "dG9wLXNlY3JldC12YWx1ZS0xMjM0" not in repr(settings)
    assert "pw@" not in repr(settings)
    assert settings.handlers[0].options["url"] == "https://u:pw@example.com/x"  # type: ignore[attr-defined]


def test_zero_config_file_handler_follows_the_data_dir() -> None:
    settings = load_settings(None, environ={"JOBHOOK_DATA_DIR": "/srv/jh"})
    assert settings.handlers[0].options["dir"] == "/srv/jh/out"
    assert settings.store.url == "sqlite:////srv/jh/jobhook.db"


def test_knowhere_api_version_is_v1_or_v2(tmp_path: Path) -> None:
    base = f'[sources.k]\nprovider = "knowhere"\nsecrets = ["{SECRET}"]\n'
    settings = _load(tmp_path, base + 'api_version = "v1"\n')
    assert settings.sources["k"].api_version == "v1"  # type: ignore[attr-defined]
    assert "sources.k.api_version" in _error(tmp_path, base + 'api_version = "v3"\n')


def test_api_version_is_refused_for_other_providers(tmp_path: Path) -> None:
    message = _error(tmp_path, SOURCE + f'secrets = ["{SECRET}"]\napi_version = "v1"\n')
    assert "api_version is for provider 'knowhere'" in message


def test_confidence_alert_defaults_to_080_and_takes_a_share(tmp_path: Path) -> None:
    base = SOURCE + f'secrets = ["{SECRET}"]\n'
    assert _load(tmp_path, base).sources["reducto"].confidence_alert == 0.80  # type: ignore[attr-defined]
    settings = _load(tmp_path, base + "confidence_alert = 0.85\n")
    assert settings.sources["reducto"].confidence_alert == 0.85  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "inf", '"high"'])
def test_confidence_alert_outside_0_to_1_is_refused(tmp_path: Path, value: str) -> None:
    message = _error(tmp_path, SOURCE + f'secrets = ["{SECRET}"]\nconfidence_alert = {value}\n')
    assert "sources.reducto.confidence_alert" in message
    assert "from 0 to 1" in message or "must be a valid number" in message


def test_confidence_fields_must_be_names(tmp_path: Path) -> None:
    base = SOURCE + f'secrets = ["{SECRET}"]\n'
    settings = _load(tmp_path, base + 'confidence_fields = ["total", "Table"]\n')
    assert settings.sources["reducto"].confidence_fields == ("total", "Table")  # type: ignore[attr-defined]
    message = _error(tmp_path, base + 'confidence_fields = ["total", ""]\n')
    assert "sources.reducto.confidence_fields: each field name" in message
