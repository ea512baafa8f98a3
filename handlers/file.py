"""The ``file`` handler: ``{dir}/{source}/{job_id}.result`` and ``.json``, each written atomically.

The ``.result`` is written before the ``.json``, so a consumer that watches for ``.json`` files
always finds the matching result complete beside it. Job ids are untrusted: file names come
from ``safe_name`` and never leave ``dir``. Re-delivery rewrites the same two files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio.to_thread
import structlog
from pydantic import BeforeValidator, field_validator

from handlers.options import HandlerOptions
from receiver import tracing
from receiver.errors import RetryableError
from receiver.files import atomic_open, atomic_write, safe_name

if TYPE_CHECKING:
    from receiver.completion import Completion, ResultInfo

log = structlog.get_logger("handlers.file")

CHUNK = 1024 * 1024


def non_empty_path(value: object) -> object:
    """Refuse ``""`` (which a Path would take as ``.``) before a path option is parsed."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("must be a non-empty path")
    return value


class FileOptions(HandlerOptions):
    dir: Annotated[Path, BeforeValidator(non_empty_path)]
    """Where ``{source}/{job_id}.json`` and ``.result`` go; created when missing."""

    @field_validator("dir")
    @classmethod
    def _not_a_file(cls, path: Path) -> Path:
        path = path.expanduser()
        if path.exists() and not path.is_dir():
            raise ValueError(f"{str(path)!r} exists and is not a directory")
        return path


class FileHandler:
    """Writes each completion document, and its result bytes, under ``dir``."""

    options_model = FileOptions

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.dir = FileOptions.parse(options).dir

    def __repr__(self) -> str:
        return f"FileHandler(name={self.name!r}, dir={str(self.dir)!r})"

    def paths(self, source: str, job_id: str) -> tuple[Path, Path]:
        """Where a job's ``.json`` and ``.result`` go; always inside ``dir``."""
        base = self.dir / safe_name(source) / safe_name(job_id)
        return base.with_name(base.name + ".json"), base.with_name(base.name + ".result")

    async def handle(self, completion: Completion) -> None:
        """Write the result (when there is one) and then the completion document."""
        try:
            await anyio.to_thread.run_sync(self._write, completion, tracing.traceparent())
        except OSError as exc:
            raise RetryableError(
                f"writing {completion.source}/{completion.job_id!r} under "
                f"{str(self.dir)!r} failed: {exc.strerror or exc}"
            ) from exc
        log.debug("file_written", handler=self.name, source=completion.source,
                  job_id=completion.job_id)  # fmt: skip

    def _write(self, completion: Completion, traceparent: str | None = None) -> None:
        json_path, result_path = self.paths(completion.source, completion.job_id)
        if completion.result is not None:
            _copy_result(completion.result, result_path)
        fields = completion.to_dict()
        if traceparent is not None:  # only with tracing on: otherwise the document is unchanged
            fields["traceparent"] = traceparent
        document = json.dumps(fields, indent=2, sort_keys=True, ensure_ascii=False)
        atomic_write(json_path, document.encode("utf-8") + b"\n")


def _copy_result(result: ResultInfo, target: Path) -> None:
    """Stream ``result.path`` to ``target``; replace it only if size and sha256 match."""
    digest = hashlib.sha256()
    size = 0
    with result.path.open("rb") as src, atomic_open(target) as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            dst.write(chunk)
        if size != result.bytes or digest.hexdigest() != result.sha256:
            raise RetryableError(
                f"result file {str(result.path)!r} has {size} bytes, sha256 "
                f"{digest.hexdigest()[:12]}...; its record says {result.bytes} bytes, "
                f"{result.sha256[:12]}..."
            )
