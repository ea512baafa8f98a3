"""The processes a benchmark runs: jobhook serve, the anchors, the simulator; their CPU and RSS."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psutil  # type: ignore[import-untyped]

from bench.report import RESULTS
from receiver.service.serving import free_port as free_port  # re-exported for the benchmarks
from tests.support import SECRET as SECRET  # the README example secret: loopback only

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

API_KEY = "bench-api-key"
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


def workdir(name: str) -> Path:
    """A fresh scratch directory on the repository's disk (not tmpfs: fsync must cost)."""
    path = RESULTS / "work" / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def cli(*args: str) -> list[str]:
    """The ``jobhook`` command of this environment (the script itself: no ``uv run`` between)."""
    script = BIN / "jobhook"
    prefix = [str(script)] if script.exists() else [sys.executable, "-m", "receiver"]
    return [*prefix, *args]


SOURCE = "reducto"
"""The bench's one source: its provider is the workload's (``bench.workload``'s bodies are that
provider's ``async.update``), so the config, the simulator and the senders name it here."""
WEBHOOK_PATH = f"/webhooks/{SOURCE}"


def jobhook_config(
    directory: Path,
    port: int,
    *,
    api_base_url: str | None = None,
    poll: dict[str, Any] | None = None,
    handlers: Sequence[dict[str, Any]] = (),
    admin_token: str | None = None,
    store_url: str | None = None,
) -> Path:
    """A jobhook.toml with the one ``SOURCE`` (secret and key from the environment); its
    store is ``directory``/jobhook.db unless ``store_url`` names another."""
    lines = [
        f'data_dir = "{directory}"',
        *(["[store]", f'url = "{store_url}"'] if store_url else []),
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        "shutdown_grace_seconds = 2",
        *([f'admin_token = "{admin_token}"'] if admin_token else []),
        "[log]",
        'level = "info"',
        'format = "json"',
        f"[sources.{SOURCE}]",
        f'provider = "{SOURCE}"',
        'secrets = ["env:BENCH_WEBHOOK_SECRET"]',
    ]
    if api_base_url:
        lines += [f'api_base_url = "{api_base_url}"', 'api_key = "env:BENCH_API_KEY"']
    if poll:
        lines.append(f"[sources.{SOURCE}.poll]")
        lines += [f"{k} = {_toml(v)}" for k, v in poll.items()]
    for handler in handlers:
        lines.append("[[handlers]]")
        lines += [f"{k} = {_toml(v)}" for k, v in handler.items()]
    path = directory / "jobhook.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _toml(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str | Path) else str(value)


def environment(**extra: str) -> dict[str, str]:
    """The children's environment: no stray JOBHOOK_* settings, the bench's secrets, and
    bytecode cached under bench/results/pycache (as after any first run, or in the image)
    even where PYTHONDONTWRITEBYTECODE is set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOOK_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        BENCH_WEBHOOK_SECRET=SECRET,
        BENCH_API_KEY=API_KEY,
        PYTHONPYCACHEPREFIX=str(RESULTS / "pycache"),
        # The jobhook process imports bench.stamp (the latency benchmark's handler).
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    env.update(extra)
    return env


@dataclass
class Service:
    """A child process serving HTTP on ``port``; stderr goes to ``log``."""

    name: str
    argv: list[str]
    port: int
    log: Path
    env: dict[str, str] = field(default_factory=environment)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    job_ids: Callable[[int], list[str]] | None = None
    """Where this row's new jobs get their ids (``count`` of them), when a job API must know
    them; None: the workload's own random ids."""
    beside: Service | None = None
    """A process this row needs (the simulated job API), its CPU counted apart from the row's."""
    probe: Callable[[], dict[str, float]] | None = None
    """Figures read before and after each of this row's runs (``<name>_before``/``_after``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ps(self) -> psutil.Process:
        assert self.proc is not None
        return psutil.Process(self.proc.pid)

    def start(self) -> Service:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as err:
            self.started_at = time.perf_counter()
            self.proc = subprocess.Popen(
                self.argv, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=self.env
            )
        return self

    def wait_ready(self, path: str = "/readyz", timeout: float = 30.0) -> float:
        """Seconds from process start to the first 200 on ``path``."""
        deadline = time.perf_counter() + timeout
        with httpx.Client(trust_env=False, timeout=1.0) as client:
            while time.perf_counter() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited ({self.proc.returncode}); see {self.log}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.url + path).status_code == 200:
                        return time.perf_counter() - self.started_at
                time.sleep(0.005)
        raise RuntimeError(f"{self.name} not ready within {timeout} s; see {self.log}")

    def cpu_seconds(self) -> float:
        """CPU time of the process and of its children, live (jobhook's SQLite writer process)
        and reaped; a child that exits between two readings takes its time out of the sum."""
        parent = self.ps
        times = parent.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in parent.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
        return float(total)

    def rss(self) -> int:
        """Resident memory of the process and its children (jobhook's SQLite writer process)."""
        return tree_rss(self.ps)

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def tree_rss(process: psutil.Process) -> int:
    """RSS of ``process`` and its children, uv's own process left out (``uv run``)."""
    total = 0
    for each in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            if each.name() != "uv":
                total += int(each.memory_info().rss)
    return total


@contextlib.contextmanager
def running(*services: Service, ready: str = "/readyz") -> Iterator[tuple[Service, ...]]:
    """Start ``services`` (each ready before the next starts); stop them all on the way out."""
    try:
        for service in services:
            service.start().wait_ready(ready)
        yield services
    finally:
        for service in reversed(services):
            service.stop()


def jobhook(directory: Path, config: Path, port: int, name: str = "jobhook") -> Service:
    return Service(name, cli("serve", "--config", str(config)), port, directory / f"{name}.log")


def nullstore(directory: Path, config: Path, port: int) -> Service:
    """bench.nullstore: jobhook serve on a store that stores nothing (its config, its port)."""
    argv = [sys.executable, "-m", "bench.nullstore", str(config)]
    return Service("nullstore", argv, port, directory / "nullstore.log")


def bare(directory: Path, port: int | None = None) -> Service:
    """bench.bare, the ceiling: a bare Starlette endpoint on the same server stack."""
    port = free_port() if port is None else port
    argv = [sys.executable, "-m", "bench.bare", str(port)]
    return Service("bare", argv, port, directory / "bare.log")


def simulator(directory: Path, port: int, *options: str) -> Service:
    """``jobhook simulate`` for the bench's ``SOURCE`` with the bench key (and signing secret)."""
    argv = cli("simulate", "--provider", SOURCE, "--port", str(port),
               "--api-key", "env:BENCH_API_KEY", *options)  # fmt: skip
    return Service("simulator", argv, port, directory / "simulator.log")


class FsyncProbe:
    """Times a small write + fsync every ``interval`` on the bench's disk, in a thread.

    The machine may be shared: a stall of the disk shows here as well as in the figures.
    """

    def __init__(self, directory: Path, interval: float = 0.02) -> None:
        self._path = directory / "fsync-probe"
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[float] = []
        self.stamps: list[float] = []
        """When each sample was taken (``time.time()``)."""

    def __enter__(self) -> FsyncProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while not self._stop.wait(self._interval):
                started = time.perf_counter()
                os.pwrite(fd, b"x" * 4096, 0)
                os.fsync(fd)
                self.samples.append((time.perf_counter() - started) * 1000)
                self.stamps.append(time.time())
        finally:
            os.close(fd)
