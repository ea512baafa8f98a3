"""``jobhook demo`` runs as a new user would run it: every job reaches its handler, what it
prints can be pasted, and Ctrl-C or SIGTERM stops it promptly, on a terminal or not."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from receiver.cli.demo import run_demo
from receiver.cli.demo_setup import invocation

if TYPE_CHECKING:
    from pathlib import Path

AS_UV_RUN = {**os.environ, "UV_RUN_RECURSION_DEPTH": "1"}  # what `uv run` sets
STOPPED_WITHIN = 10.0


@pytest.mark.timeout(90)
async def test_demo_delivers_every_job_by_webhook_or_poller() -> None:
    output = io.StringIO()
    summary = await run_demo(8, 0.3, 60.0, Console(file=output, width=100))
    assert summary["results_written"] == 8
    assert summary["completed_by_webhook"] + summary["completed_by_poller"] == 8
    assert summary["completed_by_poller"] > 0, "no webhook was lost, so the poller did nothing"
    lines = output.getvalue().splitlines()
    bottom = next(i for i, line in enumerate(lines) if line.startswith("└"))
    assert lines[bottom].endswith("┘"), "the table's border is glued to the summary"
    assert lines[bottom + 1].startswith("All 8/8 jobs delivered")


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "receiver", "demo", *args], env=env or AS_UV_RUN, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _stop(process: subprocess.Popen[str], signum: int) -> tuple[str, str, float]:
    sent = time.monotonic()
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    return out, err, time.monotonic() - sent


def _read_until(process: subprocess.Popen[str], marker: str, within: float) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    process.kill()
    raise AssertionError(f"{marker!r} not printed within {within} s:\n" + "\n".join(lines))


@pytest.mark.timeout(90)
def test_console_demo_without_a_terminal_prints_whole_commands_and_stops_on_ctrl_c() -> None:
    process = _start("--console", "--jobs", "2", "--drop", "0", "--seconds", "40")
    printed = _read_until(process, "Still serving", within=60)
    out, err, took = _stop(process, signal.SIGINT)
    assert process.returncode == 0, err
    assert took < STOPPED_WITHIN
    assert out.rstrip().endswith("jobhook demo: stopped (SIGINT)")
    heading = next(line for line in printed if line.startswith("Console: "))
    token = heading.split("(admin token: ")[1].removesuffix(")")
    assert len(token) >= 32, heading  # the token whole on its line
    assert " " not in token, heading
    commands = [line.strip() for line in printed if line.strip().startswith("JOBHOOK_URL=")]
    assert commands, printed
    for command in commands:
        assert f"JOBHOOK_ADMIN_TOKEN={token} uv run jobhook jobs " in command
    assert all(
        not line.startswith("└") or line.endswith("┘") for line in [*printed, *out.splitlines()]
    )
    assert "Traceback" not in err


@pytest.mark.timeout(60)
def test_demo_stopped_by_sigterm_exits_at_once_with_128_plus_the_signal() -> None:
    process = _start("--jobs", "2", "--drop", "1", "--seconds", "60")
    _read_until(process, "2 job(s) submitted", within=60)  # every webhook will be lost
    out, err, took = _stop(process, signal.SIGTERM)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert took < STOPPED_WITHIN
    lines = out.splitlines()
    assert lines[-1] == "jobhook demo: stopped (SIGTERM)"
    assert lines[-2].startswith("└")
    assert lines[-2].endswith("┘")
    assert "Traceback" not in err


def test_commands_are_printed_the_way_jobhook_was_started(tmp_path: Path) -> None:
    executable = tmp_path / "jobhook"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    script, on_path = str(executable), {"PATH": str(tmp_path)}
    assert invocation(script, {"UV_RUN_RECURSION_DEPTH": "1"}) == "uv run jobhook"
    assert invocation(script, on_path) == "jobhook"
    assert invocation(script, {"PATH": "/nonexistent"}) == script
    assert invocation("/src/receiver/__main__.py", {}) == "python -m receiver"
    assert invocation("/venv/bin/pytest", {}) == "uv run jobhook"
