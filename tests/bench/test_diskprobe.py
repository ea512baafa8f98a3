"""bench.diskprobe's one case, run short on a small file: commits timed, passes timed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench import diskprobe

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_case_times_the_commits_and_the_passes_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(diskprobe, "SIZE", 4 << 20)  # a 4 MiB file: the test writes it at once
    alone = diskprobe.case(tmp_path, 0, False, 1.0, 0.3)
    assert alone["commit_p50_ms"] > 0
    assert alone["pass_max_ms"] == 0.0  # no passes without pages
    beside = diskprobe.case(tmp_path, 50, False, 0.05, 0.5)
    assert beside["pass_p50_ms"] > 0  # at least one pass of 50 pages, written and fsynced
    assert beside["commit_max_ms"] >= beside["commit_p99_ms"] >= beside["commit_p50_ms"] > 0
    assert (tmp_path / "big").stat().st_size == 4 << 20


def test_the_sweep_writes_one_rate_of_random_pages_in_passes_of_each_size() -> None:
    passes = [(pages, interval) for pages, side_by_side, interval in diskprobe.SWEEP if pages]
    assert not any(side_by_side for _, side_by_side, _ in diskprobe.SWEEP)
    assert {round(pages / interval) for pages, interval in passes} == {6000}
    assert sorted(pages for pages, _ in passes) == [pages for pages, _ in passes]
    assert len(passes) >= 5
    assert diskprobe.SWEEP[0][0] == 0  # the commits alone first
