"""What the disk does to a commit while a checkpoint writes: ``python -m bench.diskprobe``.

Two threads, as a SQLite store has them: one appends 16 KiB to a small file and fsyncs it every
5 ms (a group commit's WAL write), the other writes N 4 KiB pages into a 2 GiB file and fsyncs
it every interval (a checkpoint pass copying N frames), the pages either at random places (a
large store: each frame a page of its own, anywhere in the file) or side by side (a small one);
``--sweep`` writes one rate of random pages in passes of several sizes instead.
Each case prints the commits' fsync p50/p99/max and the passes' p50/max: how long a pass takes
for its number of pages, which is what the writes wait for when a pass is made under a hold,
and how much the passes slow the commits beside them. The 2 GiB file is written once under
``bench/results/diskprobe/`` and reused; each case runs ``--seconds`` (default 8).
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
from pathlib import Path

from bench import report

SIZE = 2 << 30
PAGE = 4096
CASES = (
    (0, False, 1.0),
    (250, False, 1.0),
    (250, True, 1.0),
    (1000, False, 1.0),
    (1000, True, 1.0),
    (4000, False, 1.0),
    (4000, True, 1.0),
    (100, False, 0.1),
    (400, False, 0.1),
)
"""(pages a pass, side by side, seconds between passes); 0 pages: the commits alone."""
SWEEP_RATE = 6000
SWEEP = (
    (0, False, 1.0),
    *((pages, False, pages / SWEEP_RATE) for pages in (15, 30, 60, 120, 300, 600)),
)
"""``--sweep``: random pages at one nominal rate, ``SWEEP_RATE`` a second, in passes of 15 to
600 pages: how the size of a checkpoint's pass, not how much it writes, makes the commits' fsync
tail. Each pass waits its interval after the one before ended, so a pass that takes longer (a
larger one) writes somewhat fewer pages a second than the nominal rate: its time is printed."""


def _big(directory: Path) -> Path:
    path = directory / "big"
    if not path.exists() or path.stat().st_size != SIZE:
        chunk = os.urandom(1 << 20)
        with open(path, "wb") as out:
            for _ in range(SIZE >> 20):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    return path


def _commits(path: Path, stop: threading.Event, out: list[float]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        offset = 0
        while not stop.is_set():
            started = time.perf_counter()
            os.pwrite(fd, b"w" * 16384, offset)
            os.fdatasync(fd)
            out.append((time.perf_counter() - started) * 1000)
            offset = (offset + 16384) % (64 << 20)
            time.sleep(0.005)
    finally:
        os.close(fd)


def _passes(path: Path, pages: int, side_by_side: bool, interval: float,
            stop: threading.Event, out: list[float]) -> None:  # fmt: skip
    fd = os.open(path, os.O_WRONLY)
    page = os.urandom(PAGE)
    try:
        while not stop.wait(interval):
            started = time.perf_counter()
            if side_by_side:
                first = random.randrange(SIZE // PAGE - pages)
                offsets = [(first + n) * PAGE for n in range(pages)]
            else:  # in page order, as a checkpoint copies them
                offsets = sorted(random.randrange(SIZE // PAGE) * PAGE for _ in range(pages))
            for offset in offsets:
                os.pwrite(fd, page, offset)
            os.fsync(fd)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)


def case(directory: Path, pages: int, side_by_side: bool, interval: float,
         seconds: float) -> dict[str, float]:  # fmt: skip
    """One case's figures (ms): the commits' p50/p99/max, the passes' p50/max."""
    stop = threading.Event()
    commits: list[float] = []
    passes: list[float] = []
    threads = [threading.Thread(target=_commits, args=(directory / "wal", stop, commits))]
    if pages:
        work = (_big(directory), pages, side_by_side, interval, stop, passes)
        threads.append(threading.Thread(target=_passes, args=work))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return {
        "commit_p50_ms": report.percentile(commits, 50),
        "commit_p99_ms": report.percentile(commits, 99),
        "commit_max_ms": max(commits),
        "pass_p50_ms": report.percentile(passes, 50) if passes else 0.0,
        "pass_max_ms": max(passes, default=0.0),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.diskprobe", description=__doc__)
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds a case")
    parser.add_argument(
        "--sweep", action="store_true", help="one rate of random pages, passes of each size"
    )
    args = parser.parse_args(argv)
    directory = Path(__file__).resolve().parent / "results" / "diskprobe"
    directory.mkdir(parents=True, exist_ok=True)
    _big(directory)
    rows = []
    for pages, side_by_side, interval in SWEEP if args.sweep else CASES:
        figures = case(directory, pages, side_by_side, interval, args.seconds)
        where = "-" if not pages else ("side by side" if side_by_side else "random")
        rows.append([pages or "none", where, f"{interval:g}" if pages else "-",
                     figures["commit_p50_ms"], figures["commit_p99_ms"], figures["commit_max_ms"],
                     figures["pass_p50_ms"], figures["pass_max_ms"]])  # fmt: skip
        report.console.print(
            f"  {where} {pages} pages: commit p99 {figures['commit_p99_ms']:.1f} ms, max "
            f"{figures['commit_max_ms']:.1f} ms; pass p50 {figures['pass_p50_ms']:.1f} ms"
        )
    report.show(
        "a commit's fsync beside checkpoint passes (ms)",
        ["pages a pass", "where", "every s", "commit p50", "commit p99", "commit max",
         "pass p50", "pass max"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
