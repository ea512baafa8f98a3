"""``receiver.importer``: one ``"module:attr"`` loader for handlers and providers, exact errors."""

from __future__ import annotations

import importlib
import sys
import uuid
from typing import TYPE_CHECKING

import pytest

from receiver.errors import ConfigError, HandlerLoadError, ProviderLoadError
from receiver.importer import import_from_string

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path where a test writes the modules it imports."""
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.path.remove(str(tmp_path))


def _module(site: Path, text: str) -> str:
    name = f"jobhook_importer_{uuid.uuid4().hex[:8]}"
    (site / f"{name}.py").write_text(text)
    importlib.invalidate_caches()
    return name


def test_a_dotted_attribute_is_followed(site: Path) -> None:
    name = _module(site, "class Outer:\n    class Inner:\n        value = 7\n")
    assert import_from_string(f"{name}:Outer.Inner.value") == 7


@pytest.mark.parametrize("spec", ["no_colon", ":attr", "module:", ""])
def test_a_spec_not_of_the_form_is_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match=r'must be in the form "package.module:attr"'):
        import_from_string(spec)


def test_a_missing_module_says_to_install_it() -> None:
    with pytest.raises(ConfigError) as caught:
        import_from_string("jobhook_no_such_module_jh.sub:X")
    assert str(caught.value) == (
        "module 'jobhook_no_such_module_jh.sub' not found; install the package that provides "
        "it in jobhook's environment, or correct the name"
    )


def test_a_module_whose_own_import_is_missing_names_that_import(site: Path) -> None:
    name = _module(site, "import jobhook_absent_dependency_jh\n")
    with pytest.raises(
        ConfigError,
        match=rf"importing '{name}' failed: No module named 'jobhook_absent_dependency_jh'",
    ):
        import_from_string(f"{name}:X")


def test_a_module_that_raises_on_import_names_the_exception(site: Path) -> None:
    name = _module(site, "raise RuntimeError('config missing')\n")
    with pytest.raises(ConfigError, match=rf"importing '{name}' failed: RuntimeError: config"):
        import_from_string(f"{name}:X")


def test_a_missing_attribute_names_module_and_attribute(site: Path) -> None:
    name = _module(site, "class Outer:\n    pass\n")
    with pytest.raises(ConfigError) as caught:
        import_from_string(f"{name}:Outer.Nope")
    assert str(caught.value) == f"module {name!r} has no attribute 'Outer.Nope'"


@pytest.mark.parametrize("error", [HandlerLoadError, ProviderLoadError])
def test_the_error_is_the_callers_class(error: type[ConfigError]) -> None:
    with pytest.raises(error):
        import_from_string("jobhook_no_such_module_jh:X", error)
