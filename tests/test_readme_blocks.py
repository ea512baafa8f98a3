"""The shell blocks of README.md and docs/getting-started.md run as pasted, on a fresh clone.

Each document is run in its own temporary copy of the repository (the files ``git ls-files``
names, so nothing local leaks in), block by block, in order, each ``sh`` block by a new
``bash``. A block's treatment is said by an HTML comment on the line before it:

- ``<!-- run: skip (REASON) -->``: not run; the reason is required.
- ``<!-- run: background (REASON) -->``: a service in the foreground. It is started, must answer
  ``/readyz`` within the time limit, and is then stopped with SIGTERM.
- ``<!-- run: file NAME -->``: the block is written to ``NAME`` in the copy (a ``python`` or
  ``toml`` block that a later block uses).
- no comment: an ``sh`` block is run and must exit 0 within the time limit. The comment after a
  ``uv run`` command (``uv run python sign.py   # {"status":"accepted",...}``) is the output it
  promises: the lines the block prints must hold each such output, in order; a promise ending
  in ``...`` or ``...}`` is a prefix. When the block ends, nothing it started may still run (a
  service it put in the background must have been stopped).

A ``python`` block without a ``file`` or ``skip`` comment fails the test, so every runnable block
is treated explicitly; blocks in other languages (``toml``, ``mermaid``, plain text) are not run
unless a ``file`` comment writes them. The one rewrite: ports 8000 (jobhook) and 9100 (the
simulator) become free ports (``127.0.0.1:8000`` and ``--port 9100`` in the blocks,
``JOBHOOK_SERVER__PORT`` for the service), so the test never meets another server.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "docs/getting-started.md", "docs/offline.md"]
BLOCK = re.compile(
    r"(?:^<!-- run: (?P<rule>[^>]*?) -->\n)?^```(?P<lang>[a-z]*)\n(?P<code>.*?)^```$", re.M | re.S
)
PROMISE = re.compile(r"^uv run [^#]*#\s*(.+?)\s*$")
RUN_SECONDS = 240  # one block: a fresh copy's first `uv run` installs its environment
READY_SECONDS = 120


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    rule: str  # "run", "skip ...", "background ...", "file NAME"
    line: int


def blocks(document: str) -> list[Block]:
    text = (REPO / document).read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        rule = match["rule"] or "run"
        line = text.count("\n", 0, match.start("code"))
        found.append(Block(match["lang"], match["code"], rule, line))
    return found


def promises(code: str) -> list[str]:
    """The outputs promised by the comments after ``uv run`` commands."""
    return [m[1] for line in code.splitlines() if (m := PROMISE.match(line))]


def kept(line: str, promise: str) -> bool:
    for ellipsis in ("...}", "..."):
        if promise.endswith(ellipsis):
            return line.startswith(promise[: -len(ellipsis)])
    return line == promise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_copy(dest: Path) -> Path:
    """The files of a fresh clone: what git tracks, as the work tree has them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def environment(port: int) -> dict[str, str]:
    """This environment without the test run's own venv, uv modes and jobhook settings.

    A user's shell has none of them: CI's ``UV_NO_SYNC=1`` (its venv comes from the hashed
    requirements) would leave the fresh copy without the environment its blocks install.
    """
    keep_uv = (
        "UV_CACHE_DIR",
        "UV_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_EXTRA_INDEX_URL",
        "UV_OFFLINE",
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if (
            not k.startswith(("JOBHOOK_", "UV_", "VIRTUAL_ENV", "PYTEST"))
            and k not in ("REDUCTO_WEBHOOK_SECRET", "PYTHONPATH")
        )
        or k in keep_uv
    }
    return env | {"JOBHOOK_SERVER__PORT": str(port), "NO_COLOR": "1"}


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the block's whole process group, SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_background(code: str, cwd: Path, env: dict[str, str], port: int, where: str) -> None:
    process = subprocess.Popen(
        ["bash", "-c", code], cwd=cwd, env=env, start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            stop(process)
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"{where}: never answered /readyz (exit {process.poll()}):\n{output}")
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()


def run_block(code: str, cwd: Path, env: dict[str, str], where: str) -> tuple[str, str]:
    """The block's standard output and error (the error shown when a promise is not kept)."""
    process = subprocess.Popen(
        ["bash", "-c", code], cwd=cwd, env=env, start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = process.communicate(timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        stop(process)
        out, err = process.communicate()
        pytest.fail(f"{where}: still running after {RUN_SECONDS} s\n{out}\n{err}")
    try:
        os.killpg(process.pid, 0)
        left = "a process it started is still running"
    except ProcessLookupError:
        left = ""
    finally:
        stop(process)  # anything the block left behind in the background
    assert process.returncode == 0, f"{where}: exit {process.returncode}\n{out}\n{err}"
    assert not left, f"{where}: {left}\n{out}\n{err}"
    return out, err


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_block_says_how_it_is_treated(document: str) -> None:
    for block in blocks(document):
        where = f"{document}:{block.line}"
        kind = block.rule.split(" ", 1)[0]
        assert kind in ("run", "skip", "background", "file"), f"{where}: rule {block.rule!r}"
        if kind in ("skip", "background"):
            assert re.search(r"\(.+\)", block.rule), f"{where}: say why: {block.rule!r}"
        if block.lang == "python":
            assert kind in ("file", "skip"), f"{where}: a python block needs a file or skip rule"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl (the blocks' wait) is missing")
@pytest.mark.parametrize("document", DOCUMENTS)
def test_shell_blocks_run_as_pasted(document: str, tmp_path: Path) -> None:
    copy = fresh_copy(tmp_path / "clone")
    port, sim_port = free_port(), free_port()
    env = environment(port)
    ran = 0
    for block in blocks(document):
        where = f"{document}:{block.line}"
        code = block.code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        code = code.replace("127.0.0.1:9100", f"127.0.0.1:{sim_port}")
        code = code.replace("--port 9100", f"--port {sim_port}")
        kind, _, argument = block.rule.partition(" ")
        if kind == "file":
            (copy / argument.strip()).write_text(code, encoding="utf-8")
        elif kind == "background":
            run_background(code, copy, env, port, where)
            ran += 1
        elif kind == "run" and block.lang == "sh":
            out, err = run_block(code, copy, env, where)
            lines = out.splitlines()
            for promise in promises(block.code):
                index = next((i for i, line in enumerate(lines) if kept(line, promise)), None)
                assert index is not None, (
                    f"{where}: no line {promise!r} in\n{out}\nstandard error:\n{err}"
                )
                lines = lines[index + 1 :]
            ran += 1
    assert ran, f"{document}: no block was run"


def test_readme_links_lead_to_files() -> None:
    """README is not part of the mkdocs build, so its links into docs/ are checked here."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://|#)([^)#]+)", text)
    assert targets, "README.md links to no file"
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
