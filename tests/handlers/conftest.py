from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

import pytest

from receiver.completion import Completion, ResultInfo

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def result_info(path: Path) -> ResultInfo:
    data = path.read_bytes()
    return ResultInfo(path, hashlib.sha256(data).hexdigest(), len(data))


@pytest.fixture
def result_file(tmp_path: Path) -> Path:
    """A 5 MiB result with random bytes, as the fetcher leaves it under results.dir."""
    path = tmp_path / "results" / "reducto" / "job-1.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(os.urandom(5 * 1024 * 1024 + 123))
    return path


@pytest.fixture
def make_completion() -> Callable[..., Completion]:
    def make(job_id: str = "job-1", result: Path | None = None, **kw: Any) -> Completion:
        fields: dict[str, Any] = {
            "id": 1,
            "source": "reducto",
            "job_id": job_id,
            "state": "succeeded",
            "provider_status": "Completed",
            "metadata": {"customer": "acme", "pages": 3},
        }
        fields.update(kw)
        return Completion(result=result_info(result) if result else None, **fields)

    return make
