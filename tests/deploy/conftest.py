"""One wheel and sdist per test session, built from the checkout as a user's build would."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.dockerfile import REPO


@dataclass(frozen=True)
class Dist:
    """What ``uv build`` made: the sdist, and the wheel built from that sdist."""

    wheel: Path
    sdist: Path


def uv() -> str:
    found = shutil.which("uv")
    assert found is not None, "uv is on PATH wherever the tests run (.ci/run installs it)"
    return found


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``uv build``: the sdist first, then the wheel from the unpacked sdist, so a file the
    sdist leaves out is missing from the wheel too (hatchling, as [build-system] pins it)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [uv(), "build", "--quiet", "--out-dir", str(out), str(REPO)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Dist(wheel, sdist)
