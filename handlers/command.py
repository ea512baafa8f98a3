"""The ``command`` handler: run a program (no shell) with the completion JSON on its stdin.

The program also gets ``JOBHOOK_SOURCE``, ``JOBHOOK_JOB_ID``, ``JOBHOOK_STATE``,
``JOBHOOK_PROVIDER_STATUS``, ``JOBHOOK_COMPLETION_ID`` and, when there is a result,
``JOBHOOK_RESULT_PATH`` / ``JOBHOOK_RESULT_SHA256`` / ``JOBHOOK_RESULT_BYTES``, on top of the
service's environment (without its own ``JOBHOOK_*`` settings; ``inherit_env = false`` passes
none of it) and the entry's ``env``. Exit status 0 is done; anything else raises.
It runs in its own session, so a timeout or cancellation kills every process it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import structlog
from pydantic import BeforeValidator, ValidationInfo, WithJsonSchema, field_validator

from handlers.file import non_empty_path
from handlers.options import SECRET_TABLE, STRINGS_SCHEMA, HandlerOptions, Seconds
from receiver import tracing
from receiver.errors import RetryableError
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from receiver.completion import Completion

log = structlog.get_logger("handlers.command")

KEEP_BYTES = 64 * 1024
TAIL_CHARS = 1000
_READ = 64 * 1024


def _argv(command: object, cwd: Path | None) -> tuple[str, ...]:
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"cannot be split into arguments: {exc}") from None
    elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
        argv = list(command)
    else:
        raise ValueError("must be a list of strings or a string")
    if not argv or not argv[0]:
        raise ValueError("must not be empty")
    if any("\0" in arg for arg in argv):
        raise ValueError("arguments cannot contain NUL")
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program).expanduser()
        path = path if path.is_absolute() or cwd is None else cwd / path
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"program {program!r} is not an executable file")
    elif shutil.which(program) is None:
        raise ValueError(f"program {program!r} is not on PATH")
    return tuple(argv)


def _resolve_env(env: object) -> dict[str, Secret]:
    """Values may be secrets (``env:NAME`` / ``file:PATH``): kept hidden until the run."""
    if not isinstance(env, Mapping):
        raise ValueError("must be a table of variable names to values")
    resolved: dict[str, Secret] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid variable name {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"value of {key} must be a string without NUL")
        try:
            resolved[key] = Secret(resolve_secret(value) if value else value)
        except ValueError as exc:
            raise ValueError(f"value of {key}: {exc}") from None
    return resolved


class CommandOptions(HandlerOptions):
    cwd: Annotated[Path | None, BeforeValidator(non_empty_path)] = None
    """The program's working directory (default: the service's)."""
    command: Annotated[
        tuple[str, ...],
        WithJsonSchema(STRINGS_SCHEMA),
    ]
    """The program and its arguments: a list, or a string split as a shell would (no shell runs)."""
    timeout: Seconds = 60.0
    env: Annotated[dict[str, Secret], BeforeValidator(_resolve_env), SECRET_TABLE] = {}
    """Extra environment variables; a value may be a secret (``env:NAME`` / ``file:PATH``)."""
    inherit_env: bool = True
    """Pass the service's environment on (without its own ``JOBHOOK_*`` settings)."""

    @field_validator("cwd")
    @classmethod
    def _a_directory(cls, cwd: Path | None) -> Path | None:
        if cwd is not None and not cwd.expanduser().is_dir():
            raise ValueError(f"{str(cwd.expanduser())!r} is not a directory")
        return None if cwd is None else cwd.expanduser()

    @field_validator("command", mode="before")
    @classmethod
    def _a_program(cls, command: object, info: ValidationInfo) -> tuple[str, ...]:
        return _argv(command, info.data.get("cwd"))


class CommandHandler:
    """Runs ``command`` once per completion; a non-zero exit or a timeout raises."""

    options_model = CommandOptions

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        checked = CommandOptions.parse(options)
        self.cwd, self.argv, self.timeout = checked.cwd, checked.command, checked.timeout
        self._env, self.inherit_env = checked.env, checked.inherit_env

    def __repr__(self) -> str:
        return f"CommandHandler(name={self.name!r}, argv={self.argv!r}, timeout={self.timeout})"

    async def handle(self, completion: Completion) -> None:
        """Run the program; RetryableError on a non-zero exit, a timeout or a failed start."""
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._environment(completion),
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise RetryableError(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}") from exc
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        stdout, stderr = bytearray(), bytearray()
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(
                    _feed(proc.stdin, completion.to_json()),
                    _drain(proc.stdout, stdout),
                    _drain(proc.stderr, stderr),
                    proc.wait(),
                )
        except TimeoutError:
            await _kill_group(proc)
            raise RetryableError(
                f"{self.argv[0]!r} timed out after {self.timeout}s and was killed; "
                f"stderr: {_tail(stderr)!r}"
            ) from None
        except BaseException:
            await _kill_group(proc)
            raise
        elapsed = round(time.monotonic() - started, 3)
        if proc.returncode != 0:
            raise RetryableError(
                f"{self.argv[0]!r} exited with status {proc.returncode}; "
                f"stderr: {_tail(stderr or stdout)!r}"
            )
        log.debug("command_succeeded", handler=self.name, job_id=completion.job_id,
                  seconds=elapsed)  # fmt: skip

    def _environment(self, completion: Completion) -> dict[str, str]:
        # The service's own JOBHOOK_* settings (admin token, config path) are not passed on.
        inherited = os.environ if self.inherit_env else {}
        env = {k: v for k, v in inherited.items() if not k.startswith("JOBHOOK_")}
        env.update((key, value.reveal()) for key, value in self._env.items())
        env.update(
            JOBHOOK_SOURCE=completion.source,
            JOBHOOK_JOB_ID=completion.job_id,
            JOBHOOK_STATE=completion.state,
            JOBHOOK_PROVIDER_STATUS=completion.provider_status,
            JOBHOOK_COMPLETION_ID=completion.message_id,
        )
        # TRACEPARENT (and TRACESTATE): the environment-variable carrier of trace context.
        env.update((key.upper(), value) for key, value in tracing.headers().items())
        if completion.result is not None:
            env.update(
                JOBHOOK_RESULT_PATH=os.path.abspath(completion.result.path),
                JOBHOOK_RESULT_SHA256=completion.result.sha256,
                JOBHOOK_RESULT_BYTES=str(completion.result.bytes),
            )
        return env


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    # A program that does not read its input may exit before taking all of it: not an error.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()


async def _drain(stream: asyncio.StreamReader, keep: bytearray) -> None:
    """Read ``stream`` to its end, keeping only its last KEEP_BYTES."""
    while chunk := await stream.read(_READ):
        keep += chunk
        if len(keep) > KEEP_BYTES:
            del keep[: len(keep) - KEEP_BYTES]


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the program and everything it started (its session's process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def _tail(data: bytearray) -> str:
    return bytes(data).decode("utf-8", "replace").strip()[-TAIL_CHARS:]
