"""requirements/*.txt (written by scripts/lock): the constraint pins, hash-checked, no host named.

The image installs requirements/runtime.txt and CI requirements/ci.txt with hashes required, so
these files are what actually runs; pyproject.toml's [tool.uv] constraint-dependencies is where
a version is chosen. A pin changed in one place only fails here until scripts/lock is run.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.dockerfile import REPO

REQUIREMENTS = REPO / "requirements"
FILES = ["runtime.txt", "ci.txt"]
# checkov's own environment: hash-checked pins too, resolved apart from the constraints.
HASHED = [*FILES, "checkov.txt"]
# A dotted name ending in a top-level domain: a host, wherever it appears.
HOST = re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:org|com|net|io|dev|app|cloud)\b", re.I)


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def constraint_pins() -> set[tuple[str, str]]:
    """(name, version) of every [tool.uv] constraint-dependencies entry."""
    pins = set()
    for line in _pyproject()["tool"]["uv"]["constraint-dependencies"]:  # type: ignore[index]
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"constraint not an exact pin: {line}"
        pins.add((canonicalize_name(req.name), spec.version))
    return pins


def entries(name: str) -> list[tuple[Requirement, list[str]]]:
    """Each requirement of requirements/NAME with the --hash options under it."""
    result: list[tuple[Requirement, list[str]]] = []
    for raw in (REQUIREMENTS / name).read_text(encoding="utf-8").splitlines():
        line = raw.strip().removesuffix("\\").strip()
        if not line or line.startswith("#"):
            continue
        if raw[0].isspace():
            result[-1][1].append(line)
        else:
            result.append((Requirement(line), []))
    return result


def pins(name: str) -> set[tuple[str, str]]:
    return {(canonicalize_name(req.name), next(iter(req.specifier)).version)
            for req, _ in entries(name)}  # fmt: skip


@pytest.mark.parametrize("name", HASHED)
def test_every_requirement_is_an_exact_pin_with_sha256_hashes_only(name: str) -> None:
    for req, options in entries(name):
        assert req.url is None, f"{name}: {req} is a direct reference"
        assert [spec.operator for spec in req.specifier] == ["=="], f"{name}: {req}"
        assert options, f"{name}: {req.name} has no --hash (--require-hashes would refuse it)"
        assert all(option.startswith("--hash=sha256:") for option in options), (name, options)


@pytest.mark.parametrize("name", HASHED)
def test_no_index_or_host_is_named(name: str) -> None:
    # The machine's pip/uv configuration says where packages come from; the hashes fix what.
    for line in (REQUIREMENTS / name).read_text(encoding="utf-8").splitlines():
        option = line.strip()
        assert not option.startswith("-") or option.startswith("--hash=sha256:"), line
        assert "://" not in line, line
        assert not HOST.search(line), line


@pytest.mark.parametrize("name", FILES)
def test_pins_agree_with_the_constraints(name: str) -> None:
    disagree = pins(name) - constraint_pins()
    assert not disagree, f"{name} pins what pyproject does not (run scripts/lock): {disagree}"


def test_checkov_txt_pins_exactly_what_checkov_in_names() -> None:
    wanted = {
        (canonicalize_name(req.name), next(iter(req.specifier)).version)
        for req, _ in entries("checkov.in")
    }
    assert wanted
    assert wanted <= pins("checkov.txt"), "checkov.txt is older than checkov.in (scripts/lock)"


def test_ci_installs_every_pin() -> None:
    # runtime, every extra and the dev group together use every constraint; one left out of
    # ci.txt is either missing from CI or a constraint nothing needs any more.
    missing = constraint_pins() - pins("ci.txt")
    assert not missing, f"ci.txt lacks constraint pins (run scripts/lock): {sorted(missing)}"


def _closure(requirements: list[Requirement]) -> set[str]:
    """The distributions ``requirements`` need on this interpreter, read from what is installed."""
    needed: set[str] = set()
    visited: set[tuple[str, str]] = set()  # (distribution, extra) already expanded
    todo = [(req, "") for req in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        for wanted in ("", *sorted(req.extras)):
            if (name, wanted) in visited:
                continue
            visited.add((name, wanted))
            needed.add(name)
            try:
                requires = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                pytest.fail(f"{name} is not installed here, so its dependencies cannot be read")
            todo += [(Requirement(line), wanted) for line in requires]
    return needed


def test_runtime_is_exactly_what_the_service_and_its_extras_need() -> None:
    project = _pyproject()["project"]
    direct = [Requirement(line) for line in project["dependencies"]]  # type: ignore[index]
    for extra in project["optional-dependencies"].values():  # type: ignore[index]
        direct += [Requirement(line) for line in extra]
    needed = _closure(direct)
    listed = {canonicalize_name(req.name) for req, _ in entries("runtime.txt")
              if req.marker is None or req.marker.evaluate()}  # fmt: skip
    assert listed - needed == set(), "runtime.txt installs what the service does not need"
    assert needed - listed == set(), "runtime.txt lacks what the service needs (scripts/lock)"
