"""docs/pipeline.md's code, run as written with a ``track`` token (the least role the page says
a pipeline needs): the Reducto SDK submits to the simulator (``jobhook simulate``'s app), whose
Svix-signed webhooks reach a real jobhook on loopback; the pipeline's ``track`` + ``wait``
returns the job, and the consumer (its own process) reacts to the completion through
``events`` and keeps its position."""

from __future__ import annotations

import asyncio
import io
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from receiver.cli.demo_setup import demo_config
from receiver.config.settings import Settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.client.helpers import until
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PAGE = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"
API_KEY = "sim-key-pipeline-docs"
TRACK_TOKEN = "pipeline-track-token-3c5e"
BLOCK = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> dict[str, str]:
    """The page's Python blocks by title (``title="pipeline.py"``), untitled ones by position."""
    found: dict[str, str] = {}
    for n, match in enumerate(BLOCK.finditer(PAGE.read_text(encoding="utf-8"))):
        title = re.search(r'title="([^"]+)"', match["info"])
        found[title[1] if title else f"block-{n}"] = match["code"]
    return found


@pytest.fixture
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, str]]:
    """The simulator and jobhook on loopback, and the variables the page's code reads."""
    port = free_port()
    sim = Simulator("reducto", api_key=API_KEY, secret=SECRET, duration=0.3,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto")  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        config = demo_config(tmp_path / "data", sim_url, SECRET, API_KEY)
        config["server"] = {
            "tokens": [{"name": "pipeline", "role": "track", "secrets": [TRACK_TOKEN]}]
        }
        settings = Settings.model_validate(config, context={"env": {}})
        async with live_server(create_app(settings), port=port) as url:
            env = {"JOBHOOK_URL": url, "JOBHOOK_ADMIN_TOKEN": TRACK_TOKEN,
                   "REDUCTO_API_KEY": API_KEY, "REDUCTO_BASE_URL": sim_url}  # fmt: skip
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            yield env


def script(code: str, out: io.StringIO) -> dict[str, Any]:
    """A block of the page as a module, its ``print`` writing to ``out`` (stdout would mix
    in the servers' logs, which share this process)."""

    def printing(*args: Any, **kwargs: Any) -> None:
        print(*args, **{**kwargs, "file": out})

    namespace: dict[str, Any] = {"__name__": "__main__", "print": printing}
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def run(code: str) -> str:
    """Run a block of the page as a script would (in a thread: the servers share this loop)."""
    out = io.StringIO()
    script(code, out)
    return out.getvalue()


def test_every_python_block_of_the_page_compiles() -> None:
    code = blocks()
    assert {"pipeline.py", "consumer.py"} <= set(code)
    for name, text in code.items():
        compile(text, f"{PAGE}:{name}", "exec")


async def test_the_pipeline_and_the_consumer_of_the_page_work_as_written(
    stack: dict[str, str], tmp_path: Path
) -> None:
    code = blocks()
    position = tmp_path / "last-event-id"
    position.write_text("0")  # resume from the start: however late the consumer connects
    consumer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code["consumer.py"], cwd=tmp_path,
        env={**os.environ, **stack}, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        printed = await asyncio.to_thread(run, code["pipeline.py"])
        job_id, state, status = printed.split()
        assert (state, status) == ("succeeded", "Completed")
        assert consumer.stdout is not None
        line = await asyncio.wait_for(consumer.stdout.readline(), 15)
        assert line.decode() == f"ready: reducto {job_id}\n"
        await until(lambda: position.read_text() != "0")
        assert int(position.read_text()) > 0
    finally:
        consumer.kill()
        await consumer.wait()


async def test_the_async_flow_and_the_listing_of_the_page_work_as_written(
    stack: dict[str, str],
) -> None:
    code = [text for name, text in blocks().items() if "AsyncReducto" in text]
    assert len(code) == 1
    out = io.StringIO()
    await script(code[0], out)["parse"]("https://example.com/a.pdf")
    assert out.getvalue() == "succeeded\n"
    (listing,) = [text for text in blocks().values() if "jobhook.list(" in text]
    assert await asyncio.to_thread(run, listing) == ""  # no failed job of batch 42
