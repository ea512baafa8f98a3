"""A pytest hook that fails any test whose captured output holds a known test secret.

Every phase's captured stdout, stderr and log records (structlog prints, stdlib logging, and
subprocesses writing to the inherited descriptors) are searched for the secrets of the test
suite: tests.support's webhook secrets, the official vectors' secrets, and every module-level
``*SECRET*``, ``*KEY*``, ``*TOKEN*`` or ``*PASSWORD*`` string of the test's own module. The
failure names the secret's variable, never its value. Services started with their output in a
file (tests/reliability/service.py) are checked by the tests that start them.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest

from tests import support

if TYPE_CHECKING:
    from collections.abc import Generator
    from types import ModuleType

_NAME = re.compile(r"SECRET|KEY|TOKEN|PASSWORD")
_MIN_LENGTH = 8
_PUBLIC_PREFIXES = ("whpk_",)  # public keys may be shown


def _needle(value: str) -> str:
    """What to search for: a whsec_/whsk_ secret's key material (found with or without prefix)."""
    for prefix in ("whsec_", "whsk_"):
        if value.startswith(prefix) and len(value) - len(prefix) >= _MIN_LENGTH:
            return value.removeprefix(prefix)
    return value


def _suite_secrets() -> dict[str, str]:
    found = {"tests.support.SECRET": support.SECRET, "tests.support.OLD_SECRET": support.OLD_SECRET}
    vectors = support.FIXTURES / "svix-vectors.json"
    if vectors.exists():
        data = json.loads(vectors.read_text(encoding="utf-8"))
        for n, vector in enumerate(data.get("valid", []) + data.get("invalid", [])):
            found[f"svix-vectors[{n}].secret"] = vector["secret"]
        if "asymmetric_v1a" in data:
            found["svix-vectors.asymmetric_v1a.secret_key"] = data["asymmetric_v1a"]["secret_key"]
    return found


_SUITE = _suite_secrets()


def known_secrets(module: ModuleType | None) -> dict[str, str]:
    """Variable name -> secret text to look for in what a test of ``module`` printed or logged."""
    found = dict(_SUITE)
    for name, value in vars(module).items() if module is not None else ():
        if (
            _NAME.search(name)
            and name.isupper()
            and isinstance(value, str)
            and len(value) >= _MIN_LENGTH
            and not value.startswith(_PUBLIC_PREFIXES)
        ):
            found[f"{module.__name__}.{name}"] = value
    return {label: _needle(value) for label, value in found.items()}


def leaks(sections: list[tuple[str, str]], secrets: dict[str, str]) -> list[str]:
    """``"<variable> in <section>"`` for every secret found in a captured section."""
    return [
        f"{label} in {title!r}"
        for title, content in sections
        for label, value in secrets.items()
        if value in content
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    sections = [(title, content) for title, content in report.sections
                if title.endswith(f" {report.when}")]  # fmt: skip
    if not sections:
        return report
    found = leaks(sections, known_secrets(getattr(item, "module", None)))
    if found:
        report.outcome = "failed"
        report.longrepr = (
            "a known test secret appeared in captured output (values not shown): "
            + "; ".join(sorted(set(found)))
        )
    return report
