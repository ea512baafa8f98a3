"""The figures each reliability run reports, printed at the end of the pytest session."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from _pytest.terminal import TerminalReporter

_FIGURES: list[tuple[str, str]] = []


@pytest.fixture
def report_figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Record one line of figures under the test's name, for the session summary."""

    def record(line: str) -> None:
        _FIGURES.append((request.node.nodeid, line))

    return record


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("reliability figures")
        for nodeid, line in _FIGURES:
            terminalreporter.write_line(f"{nodeid}\n    {line}")
