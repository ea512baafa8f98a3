"""A third-party provider installed as an entry point: it passes the shared contract suite with
its own simulator, check-config accepts a source naming it, and a webhook of its simulator's
reaches a file handler with the result fetched through its job API. It has the built-ins'
powers: its own settings table (validated by its model, errors at the key's path), its own
signature scheme, and its own reading of fields and confidence.

The package is ``tests/fixtures/provider_plugin`` (the example of docs/write-a-provider.md),
installed as its wheel would lay it out: the package beside a ``dist-info`` whose
``entry_points.txt`` is what its pyproject declares.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import shutil
import sys
import tomllib
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.pipeline.fields import extract_fields
from receiver.providers import ENTRY_POINT_GROUP, provider_class
from receiver.service.app import create_app
from tests.support import FIXTURES, SECRET, live_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PLUGIN = FIXTURES / "provider_plugin"
API_KEY = "acme-key-1"


def install(project: Path, site: Path) -> None:
    """Lay ``project`` out in ``site`` as installing its wheel does (package + dist-info)."""
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    name, version = meta["project"]["name"], meta["project"]["version"]
    for package in meta["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        shutil.copytree(project / package, site / package)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    groups = meta["project"]["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
            for group, points in groups.items()
        ),
        encoding="utf-8",
    )


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    install(PLUGIN, site)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site
    for module in [m for m in sys.modules if m == "jobhook_acme" or m.startswith("jobhook_acme.")]:
        del sys.modules[module]


class Outcomes:
    """A pytest plugin that keeps each test's outcome."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = report.outcome


def test_the_installed_package_declares_the_entry_point(installed: Path) -> None:
    assert provider_class("acme").__module__ == "jobhook_acme.provider"
    text = next(installed.glob("*.dist-info")).joinpath("entry_points.txt").read_text()
    assert f"[{ENTRY_POINT_GROUP}]\nacme = jobhook_acme.provider:Acme\n" in text


def test_the_plugin_passes_the_contract_suite_in_its_own_test_run(
    installed: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(PLUGIN / "tests", project / "tests")
    shutil.copy(PLUGIN / "pyproject.toml", project / "pyproject.toml")
    seen = Outcomes()
    code = pytest.main(
        ["-q", "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", str(project),
         "-c", str(project / "pyproject.toml"), str(project / "tests")],
        plugins=[seen],
    )  # fmt: skip
    assert code == 0, seen.outcomes
    passed = sorted(n.split("::")[-1] for n, o in seen.outcomes.items() if o == "passed")
    assert len(passed) >= 12
    assert "test_a_429_with_retry_after_defers_the_budget" in passed
    assert "test_a_webhook_parses_to_its_job_state_and_metadata" in passed


def acme_config(tmp_path: Path, sim_url: str, extra: str = "", table: str = "") -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.acme]
provider = "acme"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
{extra}
{table}
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""",
        encoding="utf-8",
    )
    return config


def test_check_config_accepts_a_source_naming_the_plugin(installed: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["check-config", "--config", str(acme_config(tmp_path, "http://127.0.0.1:9"))]
    )
    assert result.exit_code == 0, result.output
    assert "1 source(s), 1 handler(s)" in result.output


@pytest.mark.parametrize(("word", "state"), [("done", "succeeded"), ("partial", "partial")])
async def test_a_webhook_of_the_plugin_reaches_the_file_handler_with_its_result(
    installed: Path, tmp_path: Path, word: str, state: str
) -> None:
    from jobhook_acme.simulator import AcmeSimulator  # installed by the fixture

    sim = AcmeSimulator(API_KEY)
    async with live_server(sim.app()) as sim_url:
        sim.base_url = sim_url
        task = sim.add(word, labels={"batch": "b-1"})
        settings = load_settings(acme_config(tmp_path, sim_url), environ={})
        async with live_server(create_app(settings)) as url:
            response = await sim.deliver(f"{url}/webhooks/acme", SECRET, task)
            assert response.status_code == 200, response.text
            done = tmp_path / "out" / "acme" / f"{task}.json"
            async with asyncio.timeout(20):
                while not done.exists():
                    await asyncio.sleep(0.02)
    completion: dict[str, Any] = json.loads(done.read_text())
    stored = (tmp_path / "out" / "acme" / f"{task}.result").read_bytes()
    assert stored == sim.outputs[task]
    assert (completion["source"], completion["job_id"]) == ("acme", task)
    assert (completion["state"], completion["provider_status"]) == (state, word)
    assert completion["metadata"] == {"batch": "b-1"}
    assert completion["result"] == {"sha256": hashlib.sha256(stored).hexdigest(),
                                    "bytes": len(stored)}  # fmt: skip


async def test_a_forged_webhook_for_the_plugin_is_refused(installed: Path, tmp_path: Path) -> None:
    from jobhook_acme.simulator import AcmeSimulator

    sim = AcmeSimulator(API_KEY)
    task = sim.add("done")
    settings = load_settings(acme_config(tmp_path, "http://127.0.0.1:9"), environ={})
    async with live_server(create_app(settings)) as url:
        response = await sim.deliver(f"{url}/webhooks/acme", "whsec_" + "A" * 32, task)
    assert response.status_code == 401
    assert not (tmp_path / "out" / "acme").exists()


HMAC_KEY = "acme-signing-key-0123456789abcdef"
TEAM = '[sources.acme.acme]\nworkspace = "team-a"\n'


def test_the_plugins_table_is_read_by_its_model(installed: Path, tmp_path: Path) -> None:
    settings = load_settings(acme_config(tmp_path, "http://127.0.0.1:9", table=TEAM), environ={})
    table = settings.sources["acme"].table
    assert type(table).__name__ == "AcmeSettings"
    assert table.workspace == "team-a"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("table", "says"),
    [('[sources.acme.acme]\nworkspace = "Team A"\n', "sources.acme.acme.workspace: "),
     ('[sources.acme.acme]\nworkspce = "team-a"\n',
      "sources.acme.acme.workspce: unknown key; did you mean 'workspace'?"),
     ('[sources.acme.aws]\nregion = "eu-west-1"\n', "aws table is only for provider 'textract'")],
    ids=["bad-value", "misspelt", "another-providers-table"],
)  # fmt: skip
def test_a_bad_plugin_table_is_refused_at_its_key(
    installed: Path, tmp_path: Path, table: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(acme_config(tmp_path, "http://127.0.0.1:9", table=table), environ={})
    assert says in str(info.value)


def test_the_plugins_own_scheme_is_open_to_it_alone(installed: Path, tmp_path: Path) -> None:
    scheme = f'signature = "acme-hmac"\nsecrets = ["{HMAC_KEY}"]'
    with_scheme = (
        acme_config(tmp_path, "http://127.0.0.1:9")
        .read_text()
        .replace(f'secrets = ["{SECRET}"]', scheme)
    )
    config = tmp_path / "scheme.toml"
    config.write_text(with_scheme, encoding="utf-8")
    assert load_settings(config, environ={}).sources["acme"].signature == "acme-hmac"
    config.write_text(with_scheme.replace('provider = "acme"', 'provider = "reducto"'))
    with pytest.raises(ConfigError, match="unknown signature scheme 'acme-hmac'"):
        load_settings(config, environ={})


def test_the_plugin_reads_the_fields_of_its_output(installed: Path) -> None:
    from jobhook_acme.simulator import AcmeSimulator

    sim = AcmeSimulator(API_KEY)
    output = json.loads(sim.outputs[sim.add("done")])
    fields = {f.field: (f.confidence, f.value) for f in
              extract_fields(output, provider_class("acme")())}  # fmt: skip
    assert fields == {"total": (0.97, "1280.00"), "due_date": (0.64, "2026-12-01")}


async def test_a_webhook_in_the_plugins_own_scheme_reaches_the_handler(
    installed: Path, tmp_path: Path
) -> None:
    from jobhook_acme.simulator import AcmeSimulator

    sim = AcmeSimulator(API_KEY, workspace="team-a")
    async with live_server(sim.app()) as sim_url:
        sim.base_url = sim_url
        task = sim.add("done")
        config = (
            acme_config(tmp_path, sim_url, table=TEAM)
            .read_text()
            .replace(
                f'secrets = ["{SECRET}"]', f'signature = "acme-hmac"\nsecrets = ["{HMAC_KEY}"]'
            )
        )
        (tmp_path / "jobhook.toml").write_text(config, encoding="utf-8")
        settings = load_settings(tmp_path / "jobhook.toml", environ={})
        async with live_server(create_app(settings)) as url:
            forged = await sim.deliver(f"{url}/webhooks/acme", SECRET, task, scheme="acme-hmac")
            assert forged.status_code == 401
            response = await sim.deliver(f"{url}/webhooks/acme", HMAC_KEY, task, scheme="acme-hmac")
            assert response.status_code == 200, response.text
            done = tmp_path / "out" / "acme" / f"{task}.json"
            async with asyncio.timeout(20):
                while not done.exists():
                    await asyncio.sleep(0.02)
    assert json.loads(done.read_text())["state"] == "succeeded"
    assert (tmp_path / "out" / "acme" / f"{task}.result").read_bytes() == sim.outputs[task]
