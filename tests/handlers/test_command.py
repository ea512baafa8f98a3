"""The command handler with real programs: stdin, environment, exit status, timeout, kill."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import sys
import time
from typing import TYPE_CHECKING

import psutil
import pytest

from handlers.command import CommandHandler
from receiver.errors import RetryableError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from receiver.completion import Completion

PY = sys.executable

RECORDER = """
import hashlib, json, os, sys
doc = json.load(sys.stdin)
env = {k: v for k, v in os.environ.items() if k.startswith(("JOBHOOK_", "EXTRA"))}
path = os.environ.get("JOBHOOK_RESULT_PATH")
digest = hashlib.sha256(open(path, "rb").read()).hexdigest() if path else None
with open(os.environ["OUT"], "w") as fh:
    json.dump({"stdin": doc, "env": env, "digest": digest, "cwd": os.getcwd()}, fh)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_the_program_gets_the_completion_on_stdin_and_in_its_environment(
    tmp_path: Path,
    result_file: Path,
    make_completion: Callable[..., Completion],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBHOOK_ADMIN_TOKEN", "admin-secret")
    out = tmp_path / "seen.json"
    workdir = tmp_path / "work"
    workdir.mkdir()
    completion = make_completion("job-7", result=result_file)
    handler = CommandHandler(name="run", command=[PY, "-c", RECORDER], cwd=workdir,
                             env={"OUT": str(out), "EXTRA_FLAG": "yes"})  # fmt: skip
    await handler.handle(completion)

    seen = json.loads(out.read_text())
    assert seen["stdin"] == completion.to_dict()
    assert completion.result is not None
    assert seen["env"] == {
        "JOBHOOK_SOURCE": "reducto",
        "JOBHOOK_JOB_ID": "job-7",
        "JOBHOOK_STATE": "succeeded",
        "JOBHOOK_PROVIDER_STATUS": "Completed",
        "JOBHOOK_COMPLETION_ID": completion.message_id,
        "JOBHOOK_RESULT_PATH": str(result_file),
        "JOBHOOK_RESULT_SHA256": completion.result.sha256,
        "JOBHOOK_RESULT_BYTES": str(completion.result.bytes),
        "EXTRA_FLAG": "yes",
    }
    assert seen["digest"] == hashlib.sha256(result_file.read_bytes()).hexdigest()
    assert seen["cwd"] == str(workdir)


async def test_without_a_result_no_result_variables_are_set(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "seen.json"
    handler = CommandHandler(name="run", command=[PY, "-c", RECORDER], env={"OUT": str(out)})
    await handler.handle(make_completion("job-8", state="failed", provider_status="Failed"))
    env = json.loads(out.read_text())["env"]
    assert env["JOBHOOK_STATE"] == "failed"
    assert not [k for k in env if k.startswith("JOBHOOK_RESULT_")]


async def test_env_values_can_be_secret_references_hidden_from_the_repr(
    tmp_path: Path, make_completion: Callable[..., Completion], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOWNSTREAM_KEY", "k-very-secret")
    out = tmp_path / "seen.json"
    handler = CommandHandler(name="run", command=[PY, "-c", RECORDER],
                             env={"OUT": str(out), "EXTRA_KEY": "env:DOWNSTREAM_KEY"})  # fmt: skip
    await handler.handle(make_completion())
    assert json.loads(out.read_text())["env"]["EXTRA_KEY"] == "k-very-secret"
    assert "k-very-secret" not in repr(handler)


async def test_a_command_string_is_split_like_a_shell_would_without_a_shell(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    marker = tmp_path / "with space.txt"
    code = f"import sys; open({str(marker)!r}, 'w').write(sys.argv[1])"
    command = f"{shlex.quote(PY)} -c {shlex.quote(code)} 'one arg; rm -rf /'"
    await CommandHandler(name="run", command=command).handle(make_completion())
    assert marker.read_text() == "one arg; rm -rf /"


async def test_a_non_zero_exit_raises_with_the_status_and_the_tail_of_stderr(
    make_completion: Callable[..., Completion],
) -> None:
    code = "import sys; sys.stderr.write('noise\\n' * 200000 + 'last words'); sys.exit(3)"
    handler = CommandHandler(name="run", command=[PY, "-c", code])
    with pytest.raises(RetryableError, match=r"exited with status 3; stderr: '.*last words'$") as e:
        await handler.handle(make_completion())
    assert len(str(e.value)) < 1500


async def test_a_chatty_program_that_ignores_stdin_does_not_deadlock(
    make_completion: Callable[..., Completion],
) -> None:
    code = (
        "import sys\n"
        "for _ in range(200):\n"
        "    sys.stdout.write('o' * 65536); sys.stderr.write('e' * 65536)\n"
    )
    big = make_completion(metadata={"blob": "m" * 2_000_000})  # more than a pipe buffer
    await CommandHandler(name="run", command=[PY, "-c", code], timeout=30).handle(big)


async def test_a_program_that_exits_before_reading_stdin_is_fine(
    make_completion: Callable[..., Completion],
) -> None:
    big = make_completion(metadata={"blob": "m" * 2_000_000})
    await CommandHandler(name="run", command=[PY, "-c", "pass"]).handle(big)


async def test_a_timeout_kills_the_program_and_everything_it_started(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    pids = tmp_path / "pids"
    code = (
        "import os, subprocess\n"
        "child = subprocess.Popen(['sleep', '30'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "child.wait()\n"
    )
    handler = CommandHandler(name="run", command=[PY, "-c", code], timeout=1.0)
    started = time.monotonic()
    with pytest.raises(RetryableError, match=r"timed out after 1.0s and was killed"):
        await handler.handle(make_completion())
    assert time.monotonic() - started < 10
    parent, sleeper = map(int, pids.read_text().split())
    assert await _wait_gone(parent)
    assert await _wait_gone(sleeper), "the grandchild `sleep 30` survived the timeout"


async def test_cancelling_the_handler_kills_the_program(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(30)"
    task = asyncio.create_task(
        CommandHandler(name="run", command=[PY, "-c", code]).handle(make_completion())
    )
    while not pid_file.exists() or not pid_file.read_text():
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _wait_gone(int(pid_file.read_text()))


@pytest.mark.parametrize(
    ("options", "reason"),
    [({"command": []}, "command: must not be empty"),
     ({"command": ""}, "command: must not be empty"),
     ({"command": [PY, 3]}, "list of strings"),
     ({"command": "echo 'unterminated"}, "cannot be split"),
     ({"command": ["no-such-program-jobhook"]}, "not on PATH"),
     ({"command": ["./missing.sh"]}, "not an executable file"),
     ({"command": [PY], "timeout": 0}, "timeout: "),
     ({"command": [PY], "cwd": "/no/such/dir"}, "cwd: "),
     ({"command": [PY], "env": {"A=B": "x"}}, "invalid variable name"),
     ({"command": [PY], "env": {"A": 1}}, "must be a string"),
     ({"command": [PY], "env": {"A": "env:JOBHOOK_TEST_UNSET"}}, "is not set")],
)  # fmt: skip
def test_bad_options_are_refused_at_construction(options: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        CommandHandler(name="run", **options)


@pytest.mark.usefixtures("tracer")
async def test_with_tracing_on_the_program_gets_traceparent_in_its_environment(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    from receiver import tracing

    out = tmp_path / "seen.json"
    recorder = RECORDER.replace('("JOBHOOK_", "EXTRA")', '("JOBHOOK_", "TRACE")')
    handler = CommandHandler(name="run", command=[PY, "-c", recorder], env={"OUT": str(out)})
    with tracing.span("jobhook.deliver run"):
        sent = tracing.traceparent()
        await handler.handle(make_completion("job-t"))
    assert sent is not None
    assert json.loads(out.read_text())["env"]["TRACEPARENT"] == sent
