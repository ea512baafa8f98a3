"""Drive an endpoint with wrk (closed loop, fixed connections) and pre-signed requests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent / "signed.lua"
THREADS = 2
INSTALL = ["apt-get", "install", "-y", "-q", "wrk"]


def require_wrk() -> str:
    """The wrk binary; installed with apt-get when missing and running as root, else a message
    naming the command."""
    found = shutil.which("wrk")
    if found:
        return found
    if sys.platform.startswith("linux") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("bench: wrk is missing; installing it: apt-get install -y wrk", file=sys.stderr)
        if _quiet(INSTALL) != 0:  # stale package lists: refresh them, once
            _quiet(["apt-get", "update", "-q"])
            _quiet(INSTALL)
        found = shutil.which("wrk")
        if found:
            return found
    raise SystemExit(
        "bench: the ingest benchmark needs wrk: `apt-get install -y wrk` (as root, Debian/Ubuntu)"
        " or `brew install wrk`; or skip it: `uv run python -m bench latency large poller startup`"
    )


def _quiet(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, check=False).returncode


def run(url: str, prefix: Path, *, connections: int, seconds: float) -> dict[str, Any]:
    """One wrk run; the figures its ``done()`` prints (latencies in microseconds)."""
    argv = [require_wrk(), f"-t{THREADS}", f"-c{connections}", f"-d{round(seconds)}s",
            "--timeout", "10s", "-s", str(SCRIPT), url, "--", str(prefix)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            figures: dict[str, Any] = json.loads(line.removeprefix("BENCH_JSON "))
            figures["rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
            return figures
    raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout}")
