"""docs/write-a-provider.md shows the example package's files as they are, so the guide is
the code the plugin tests run."""

from __future__ import annotations

import re

import pytest

from tests.support import FIXTURES

GUIDE = FIXTURES.parents[1] / "docs" / "write-a-provider.md"
PLUGIN = FIXTURES / "provider_plugin"
BLOCK = re.compile(r"^<!-- file: (\S+) -->\n```\w+\n(.*?)^```$", re.M | re.S)


def test_the_guide_shows_the_package_s_files() -> None:
    shown = dict(BLOCK.findall(GUIDE.read_text(encoding="utf-8")))
    assert set(shown) == {"pyproject.toml", "jobhook_acme/provider.py", "tests/check_acme.py"}


@pytest.mark.parametrize(
    "name", ["pyproject.toml", "jobhook_acme/provider.py", "tests/check_acme.py"]
)
def test_each_file_in_the_guide_is_the_package_s_own(name: str) -> None:
    shown = dict(BLOCK.findall(GUIDE.read_text(encoding="utf-8")))
    assert shown[name] == (PLUGIN / name).read_text(encoding="utf-8")
