"""Startup and footprint: from exec to the first ``/readyz`` 200, and the RSS once idle.

``jobhook serve`` (the environment's ``jobhook`` script, as the image and the systemd unit run
it) starts with one Reducto source and a ``file`` handler, on a new data directory (the store
is created) and again on the one it left (the usual restart). The bare Starlette endpoint
(bench.bare) on the same server stack is started the same way in the same round, as the
floor: what Python, uvicorn and Starlette cost before jobhook does anything. Ready time is
polled every 5 ms; RSS is read after ``IDLE_SECONDS`` without a request. One start, not
counted, comes first, so bytecode is cached (as after any first run, or in the image).
``uv run jobhook serve`` adds uv's own start (resolving and checking the environment): it
is shown for information when uv is on PATH.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from typing import TYPE_CHECKING, Any

import psutil  # type: ignore[import-untyped]

from bench import procs, report

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

TARGET_READY_S = 1.0
TARGET_RSS_MB = 80.0
IDLE_SECONDS = 3.0
MB = 1_000_000
SHORT = {
    "bare Starlette": "bare",
    "jobhook, new store": "new store",
    "jobhook, existing store": "existing store",
    "(info) uv run jobhook serve": "uv run",
}


def _measure(service: procs.Service) -> dict[str, float]:
    """Start ``service``, time it to ready, let it idle, read its RSS (and its children's)."""
    children: list[psutil.Process] = []
    try:
        service.start()
        ready = service.wait_ready("/readyz", timeout=30.0)
        time.sleep(IDLE_SECONDS)
        children = service.ps.children(recursive=True)
        # jobhook's and its SQLite writer process's (under ``uv run``, not uv's own).
        rss = procs.tree_rss(service.ps)
        return {"ready_s": ready, "rss_mb": rss / MB}
    finally:
        service.stop()
        for child in children:  # what uv started, should it not have passed SIGTERM on
            with contextlib.suppress(psutil.Error):
                child.kill()


def _jobhook(directory: Path, name: str, *, fresh: bool, uv: str | None = None) -> procs.Service:
    if fresh:
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    port = procs.free_port()
    handler = {"name": "archive", "type": "file", "dir": str(directory / "out")}
    config = procs.jobhook_config(directory, port, handlers=[handler])
    service = procs.jobhook(directory, config, port, name)
    if uv is not None:
        service.argv = [uv, "run", "--project", str(procs.ROOT), "jobhook", "serve",
                        "--config", str(config)]  # fmt: skip
    return service


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = procs.workdir("startup")
    uv = shutil.which("uv")
    kinds = ["bare Starlette", "jobhook, new store", "jobhook, existing store"]
    if uv is not None:
        kinds.append("(info) uv run jobhook serve")
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    _measure(_jobhook(work / "warm", "jobhook", fresh=True))  # bytecode cached; not counted
    for n in range(args.rounds):
        order = kinds if n % 2 == 0 else list(reversed(kinds))
        for kind in order:
            if kind == "bare Starlette":
                service = procs.bare(work)
            elif kind == "jobhook, new store":
                service = _jobhook(work / "new", "jobhook", fresh=True)
            elif kind == "jobhook, existing store":
                service = _jobhook(work / "existing", "jobhook", fresh=False)
            else:
                service = _jobhook(work / "uv", "jobhook-uv", fresh=False, uv=uv)
            figures = _measure(service)
            rounds[kind].append(figures)
        report.console.print(
            f"  round {n + 1}/{args.rounds} ready ms / idle MB: "
            + "; ".join(f"{SHORT[k]} {r[-1]['ready_s'] * 1000:.0f} / {r[-1]['rss_mb']:.1f}"
                        for k, r in rounds.items())
        )  # fmt: skip
    med = {kind: {key: report.median([r[key] for r in runs]) for key in ("ready_s", "rss_mb")}
           for kind, runs in rounds.items()}  # fmt: skip
    worst = {kind: {key: max(r[key] for r in runs) for key in ("ready_s", "rss_mb")}
             for kind, runs in rounds.items()}  # fmt: skip
    report.show(
        f"startup: exec -> /readyz 200, RSS after {IDLE_SECONDS:g} s idle, "
        f"{args.rounds} rounds (medians)",
        ["process", "ready ms", "worst ms", "idle RSS MB", "worst MB"],
        [[kind, m["ready_s"] * 1000, worst[kind]["ready_s"] * 1000, m["rss_mb"],
          worst[kind]["rss_mb"]] for kind, m in med.items()],
    )  # fmt: skip
    jobhook = [med["jobhook, new store"], med["jobhook, existing store"]]
    ready = max(m["ready_s"] for m in jobhook)
    rss = max(m["rss_mb"] for m in jobhook)
    ok = {"ready": ready < TARGET_READY_S, "rss": rss < TARGET_RSS_MB}
    report.show(
        "startup targets",
        ["target", "measured (the slower of new / existing store)", "verdict"],
        [
            [
                f"ready < {TARGET_READY_S:g} s",
                f"{ready * 1000:.0f} ms",
                report.verdict(ok["ready"]),
            ],
            [f"idle RSS < {TARGET_RSS_MB:g} MB", f"{rss:.1f} MB", report.verdict(ok["rss"])],
        ],
    )
    return {"idle_seconds": IDLE_SECONDS, "rounds": rounds, "medians": med, "worst": worst,
            "targets": ok}  # fmt: skip
