"""Small SVG charts drawn on the server from the store's figures (no script, no service).

A chart is a list of bars or points in a fixed viewBox; the page scales it to its width. Every
label is text the template escapes; numbers are formatted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.store.rows import TimeBucket

WIDTH = 600.0
HEIGHT = 160.0
PAD = 24.0


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    """The hover title: the bucket's start (UTC) and its value."""


@dataclass(frozen=True, slots=True)
class Chart:
    bars: tuple[Bar, ...]
    line: str
    """An SVG polyline's points (empty for a bar chart)."""
    top: str
    """The value at the top of the scale, as shown."""
    first: float | None
    last: float | None
    """The first and last bucket's start, for the axis' ends."""


def _slots(start: float, end: float, width: float) -> list[float]:
    first = start - start % width
    return [first + i * width for i in range(int((end - first) // width) + 1)]


def throughput(buckets: Sequence[TimeBucket], since: float, now: float, width: float) -> Chart:
    """Jobs completed per bucket, one bar per bucket from ``since`` to ``now`` (zero included)."""
    counts = {b.start: b.completed for b in buckets}
    slots = _slots(since, now, width)
    top = max([*counts.values(), 1])
    step = (WIDTH - PAD) / max(len(slots), 1)
    bars = []
    for i, start in enumerate(slots):
        n = counts.get(start, 0)
        h = (HEIGHT - PAD) * n / top
        bars.append(Bar(PAD + i * step + 1, HEIGHT - PAD - h, max(step - 2, 1), h,
                        f"{_stamp(start)}: {n} completed"))  # fmt: skip
    return Chart(
        tuple(bars), "", str(top), slots[0] if slots else None, slots[-1] if slots else None
    )


def latency(buckets: Sequence[TimeBucket], since: float, now: float, width: float) -> Chart:
    """Average seconds from known to terminal per bucket, as a line with a dot per bucket."""
    slots = _slots(since, now, width)
    by_start = {b.start: b.avg_seconds for b in buckets if b.avg_seconds is not None}
    top = max([*by_start.values(), 0.001])
    step = (WIDTH - PAD) / max(len(slots) - 1, 1)
    points, dots = [], []
    for i, start in enumerate(slots):
        value = by_start.get(start)
        if value is None:
            continue
        x, y = PAD + i * step, HEIGHT - PAD - (HEIGHT - PAD) * value / top
        points.append(f"{x:.1f},{y:.1f}")
        dots.append(Bar(x, y, 3, 3, f"{_stamp(start)}: {seconds_text(value)} on average"))
    first, last = (slots[0], slots[-1]) if slots else (None, None)
    return Chart(tuple(dots), " ".join(points), seconds_text(top), first, last)


def seconds_text(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")
