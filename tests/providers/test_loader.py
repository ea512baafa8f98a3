"""The provider loader: built-ins, "module:attr", entry points, and one test per failure,
each reported by check-config as a problem of the source's ``provider`` key."""

from __future__ import annotations

import importlib
import sys
import uuid
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.errors import ProviderLoadError
from receiver.providers import ENTRY_POINT_GROUP, PROVIDERS, get_provider, provider_class
from receiver.providers.reducto import Reducto
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PLUGIN = '''
from receiver.providers.reducto import Reducto


class Acme(Reducto):
    """A third-party provider: Reducto's format under another name."""

    name = "acme"


class Nameless(Reducto.__base__):
    status_words = {}


class NotAProvider:
    name = "nope"


namespace = type("Namespace", (), {"acme": Acme})
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A directory on sys.path holding a provider module with a unique name."""
    module = f"jobhook_provider_{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    yield site, module
    sys.modules.pop(module, None)


def install_entry_point(site: Path, dist: str, name: str, target: str) -> None:
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")
    importlib.invalidate_caches()


def check_config(tmp_path: Path, provider: str) -> tuple[int, str]:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[sources.s1]\nprovider = "{provider}"\nsecrets = ["{SECRET}"]\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_builtin_names_load_their_class(name: str) -> None:
    assert provider_class(name) is PROVIDERS[name]
    assert provider_class(name).name == name


def test_a_module_attr_spec_loads(plugin: tuple[Path, str]) -> None:
    _, module = plugin
    cls = provider_class(f"{module}:Acme")
    assert issubclass(cls, Reducto)
    assert cls.name == "acme"
    assert get_provider(f"{module}:Acme").name == "acme"


def test_a_dotted_attr_loads(plugin: tuple[Path, str]) -> None:
    _, module = plugin
    assert provider_class(f"{module}:namespace.acme").__name__ == "Acme"


def test_an_entry_point_in_the_providers_group_loads(plugin: tuple[Path, str]) -> None:
    site, module = plugin
    name = f"acme-{uuid.uuid4().hex[:6]}"
    install_entry_point(site, f"{module}_dist", name, f"{module}:Acme")
    assert provider_class(name).__name__ == "Acme"


def test_a_config_selects_an_entry_point_provider_by_name(
    plugin: tuple[Path, str], tmp_path: Path
) -> None:
    site, module = plugin
    name = f"acme-{uuid.uuid4().hex[:6]}"
    install_entry_point(site, f"{module}_ok", name, f"{module}:Acme")
    code, output = check_config(tmp_path, name)
    assert code == 0, output
    assert "1 source(s)" in output


def test_an_unknown_name_is_a_config_problem(tmp_path: Path) -> None:
    with pytest.raises(ProviderLoadError, match=r"unknown provider 'nope': not built in \("):
        provider_class("nope")
    code, output = check_config(tmp_path, "nope")
    assert code == 2
    builtins = ", ".join(sorted(PROVIDERS))
    assert f"sources.s1.provider: unknown provider 'nope': not built in ({builtins})" in output
    assert f"not an entry point in '{ENTRY_POINT_GROUP}'" in output


def test_a_missing_module_is_a_config_problem(tmp_path: Path) -> None:
    with pytest.raises(ProviderLoadError, match=r"module 'no_such_provider_jh' not found"):
        provider_class("no_such_provider_jh:Acme")
    code, output = check_config(tmp_path, "no_such_provider_jh:Acme")
    assert code == 2
    assert "sources.s1.provider: provider 'no_such_provider_jh:Acme': module " in output


def test_a_module_whose_import_fails_names_the_cause(plugin: tuple[Path, str]) -> None:
    site, _ = plugin
    name = f"jobhook_badprovider_{uuid.uuid4().hex[:8]}"
    (site / f"{name}.py").write_text("import no_such_dependency_jh\n")
    (site / f"{name}_raises.py").write_text("raise RuntimeError('config missing')\n")
    importlib.invalidate_caches()
    with pytest.raises(
        ProviderLoadError, match=rf"importing '{name}' failed: No module named 'no_such_d"
    ):
        provider_class(f"{name}:X")
    with pytest.raises(
        ProviderLoadError, match=rf"importing '{name}_raises' failed: RuntimeError: conf"
    ):
        provider_class(f"{name}_raises:X")


def test_a_missing_attribute_is_a_config_problem(plugin: tuple[Path, str], tmp_path: Path) -> None:
    _, module = plugin
    with pytest.raises(ProviderLoadError, match=rf"module '{module}' has no attribute 'Nope'"):
        provider_class(f"{module}:Nope")
    code, output = check_config(tmp_path, f"{module}:Nope")
    assert code == 2
    assert "has no attribute 'Nope'" in output


@pytest.mark.parametrize(
    ("attr", "what"), [("NotAProvider", "the class NotAProvider"), ("PLUGIN", "a str")]
)
def test_what_is_not_a_provider_subclass_is_refused(
    plugin: tuple[Path, str], tmp_path: Path, attr: str, what: str
) -> None:
    _, module = plugin
    (plugin[0] / f"{module}.py").write_text(PLUGIN + f"PLUGIN = {PLUGIN!r}\n")
    message = (
        f"provider '{module}:{attr}' is {what}, not a subclass of receiver.providers.base.Provider"
    )
    with pytest.raises(ProviderLoadError) as caught:
        provider_class(f"{module}:{attr}")
    assert str(caught.value) == message
    code, output = check_config(tmp_path, f"{module}:{attr}")
    assert code == 2
    assert message in output


def test_a_provider_without_a_name_is_refused(plugin: tuple[Path, str]) -> None:
    _, module = plugin
    with pytest.raises(ProviderLoadError, match=r"\(Nameless\) sets no name"):
        provider_class(f"{module}:Nameless")


def test_an_entry_point_that_fails_to_load_names_it(plugin: tuple[Path, str]) -> None:
    site, module = plugin
    name = f"broken-{uuid.uuid4().hex[:6]}"
    install_entry_point(site, f"{module}_broken", name, f"{module}:Missing")
    with pytest.raises(ProviderLoadError, match=rf"provider entry point '{name}' \({module}:Miss"):
        provider_class(name)


def test_a_spec_without_an_attr_is_refused() -> None:
    with pytest.raises(ProviderLoadError, match=r'must be in the form "package.module:attr"'):
        provider_class("somemodule:")


def test_a_builtin_name_wins_over_an_entry_point(plugin: tuple[Path, str]) -> None:
    site, module = plugin
    install_entry_point(site, f"{module}_shadow", "reducto", f"{module}:Acme")
    assert provider_class("reducto") is Reducto
