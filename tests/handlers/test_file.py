"""The file handler: layout, exact bytes, atomic replacement, and ids that cannot escape dir."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from handlers.file import FileHandler
from receiver.completion import ResultInfo
from receiver.errors import RetryableError

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.completion import Completion


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


async def test_writes_result_bytes_identical_and_the_completion_document(
    tmp_path: Path, result_file: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    completion = make_completion("job-1", result=result_file)
    await FileHandler(name="files", dir=out).handle(completion)

    assert (out / "reducto" / "job-1.result").read_bytes() == result_file.read_bytes()
    text = (out / "reducto" / "job-1.json").read_text(encoding="utf-8")
    document = json.loads(text)
    assert document == completion.to_dict()
    assert completion.result is not None
    assert document["result"] == {"sha256": completion.result.sha256, "bytes": 5 * 1024**2 + 123}
    assert text.startswith("{\n  ")  # pretty, for people reading the directory
    assert sorted(p.name for p in (out / "reducto").iterdir()) == ["job-1.json", "job-1.result"]


async def test_without_a_result_only_the_json_is_written_with_result_null(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    completion = make_completion("job-f", state="failed", provider_status="Failed", error="boom")
    await FileHandler(name="files", dir=out).handle(completion)

    assert [p.name for p in (out / "reducto").iterdir()] == ["job-f.json"]
    document = json.loads((out / "reducto" / "job-f.json").read_bytes())
    assert document["result"] is None
    assert document["error"] == "boom"
    assert document["state"] == "failed"


async def test_redelivery_overwrites_the_same_files_and_leaves_no_temp_files(
    tmp_path: Path, result_file: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    handler = FileHandler(name="files", dir=out)
    completion = make_completion("job-1", result=result_file)
    await handler.handle(completion)
    first = (out / "reducto" / "job-1.json").read_bytes()
    await handler.handle(completion)

    assert (out / "reducto" / "job-1.json").read_bytes() == first
    assert (out / "reducto" / "job-1.result").read_bytes() == result_file.read_bytes()
    assert sorted(p.name for p in (out / "reducto").iterdir()) == ["job-1.json", "job-1.result"]


async def test_existing_files_are_replaced_only_by_complete_ones_result_first_off_the_loop(
    tmp_path: Path,
    result_file: Path,
    make_completion: Callable[..., Completion],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    json_path, result_path = out / "reducto" / "job-1.json", out / "reducto" / "job-1.result"
    json_path.parent.mkdir(parents=True)
    json_path.write_text('{"old": true}')
    result_path.write_bytes(b"old result")
    completion = make_completion("job-1", result=result_file)
    expected = result_file.read_bytes()
    replaced: list[str] = []
    real_replace = os.replace
    loop_thread = threading.get_ident()

    def checking_replace(src: str | Path, dst: str | Path) -> None:
        target = os.fspath(dst)
        # At the moment of the swap the temp file is already whole and the target still old.
        if target.endswith(".result"):
            assert Path(src).read_bytes() == expected
            assert result_path.read_bytes() == b"old result"
        else:
            assert json.loads(Path(src).read_bytes()) == completion.to_dict()
            assert json.loads(json_path.read_bytes()) == {"old": True}
            assert result_path.read_bytes() == expected, ".result must be in place before .json"
        assert os.path.dirname(src) == os.path.dirname(target)  # same dir: rename is atomic
        assert threading.get_ident() != loop_thread, "file IO must not run on the event loop"
        replaced.append(os.path.basename(target))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", checking_replace)
    await FileHandler(name="files", dir=out).handle(completion)

    assert replaced == ["job-1.result", "job-1.json"]
    assert result_path.read_bytes() == expected
    assert _leftovers(out) == []


async def test_an_unreadable_result_raises_and_keeps_the_previous_files(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    handler = FileHandler(name="files", dir=out)
    src = tmp_path / "r.bin"
    src.write_bytes(b"v1")
    await handler.handle(make_completion("job-1", result=src))
    before = (out / "reducto" / "job-1.json").read_bytes()
    gone = ResultInfo(tmp_path / "missing.bin", "0" * 64, 10)
    completion = dataclasses.replace(make_completion("job-1"), result=gone)

    with pytest.raises(RetryableError, match="writing reducto/'job-1'"):
        await handler.handle(completion)
    assert (out / "reducto" / "job-1.json").read_bytes() == before
    assert (out / "reducto" / "job-1.result").read_bytes() == b"v1"
    assert _leftovers(out) == []


async def test_a_result_file_that_does_not_match_its_sha256_is_not_published(
    tmp_path: Path, result_file: Path, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    good = make_completion("job-1", result=result_file)
    assert good.result is not None
    # The file changed after it was recorded (e.g. truncated by a disk-full copy).
    with result_file.open("r+b") as fh:
        fh.truncate(1000)

    with pytest.raises(RetryableError, match="sha256"):
        await FileHandler(name="files", dir=out).handle(good)
    assert not (out / "reducto" / "job-1.result").exists()
    assert not (out / "reducto" / "job-1.json").exists()
    assert _leftovers(out) == []


@pytest.mark.parametrize(
    "job_id",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..",
        ".",
        "",
        "a\x00b",
        "x" * 5000,
        "a/b/../../c",
        "..\\..\\win",
        "ünïcødé-ジョブ",
        " spaced id ",
    ],
)
async def test_untrusted_job_ids_stay_inside_dir(
    tmp_path: Path, job_id: str, make_completion: Callable[..., Completion]
) -> None:
    out = tmp_path / "out"
    src = tmp_path / "r.bin"
    src.write_bytes(b"payload")
    handler = FileHandler(name="files", dir=out)
    await handler.handle(make_completion(job_id, result=src))

    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != src]
    assert len(written) == 2
    for path in written:
        assert path.resolve().is_relative_to((out / "reducto").resolve())
        assert len(path.name) < 255
    json_path, _ = handler.paths("reducto", job_id)
    assert json.loads(json_path.read_bytes())["job_id"] == job_id


def test_distinct_unsafe_ids_get_distinct_files(tmp_path: Path) -> None:
    handler = FileHandler(name="files", dir=tmp_path)
    ids = ["../a", "/a", "_a", ".a", "a/", "a\x00", "a" * 300, "a" * 301]
    assert len({handler.paths("reducto", i)[0] for i in ids}) == len(ids)


@pytest.mark.parametrize("bad", ["", "   "])
def test_an_empty_dir_is_refused_at_construction(bad: str) -> None:
    with pytest.raises(ValueError, match="dir: must be a non-empty path"):
        FileHandler(name="files", dir=bad)


def test_a_dir_that_is_a_file_is_refused_at_construction(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        FileHandler(name="files", dir=tmp_path / "f")


@pytest.mark.usefixtures("tracer")
async def test_with_tracing_on_the_document_names_the_delivery_trace(
    tmp_path: Path, make_completion: Callable[..., Completion]
) -> None:
    from receiver import tracing

    completion = make_completion("job-t")
    with tracing.span("jobhook.deliver files"):
        sent = tracing.traceparent()
        await FileHandler(name="files", dir=tmp_path).handle(completion)
    document = json.loads((tmp_path / "reducto" / "job-t.json").read_bytes())
    assert document.pop("traceparent") == sent
    assert document == completion.to_dict()  # otherwise unchanged
