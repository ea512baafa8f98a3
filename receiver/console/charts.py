"""The Overview's charts, drawn on the server as SVG from the store's figures (no script, no
service, nothing the page's CSP has to allow).

A chart has one column per interval from the period's start to now (empty ones included), a
y scale of round steps with their labels, a few time labels on the x axis (UTC), a legend, and
for each column with data the text shown when it is hovered or focused (and listed in the
chart's table of values). Coordinates are in a fixed viewBox the page scales to its width;
every label is text the template escapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from receiver.store.rows import ErrorBucket, OutcomeBucket

WIDTH = 480.0
HEIGHT = 220.0
LEFT = 64.0
"""Room for the y scale's labels."""
RIGHT = WIDTH - 8.0
TOP = 24.0
"""Room for the hovered column's value."""
BOTTOM = 186.0
"""The x axis; its time labels go below."""
CODES = 5
"""Error codes drawn apart; the rest are summed as ``other``."""


@dataclass(frozen=True, slots=True)
class Tick:
    at: float
    """The y (scale) or x (time) coordinate."""
    text: str
    anchor: str = "middle"


@dataclass(frozen=True, slots=True)
class Mark:
    """A bar segment (``width`` > 0) or a point (``width`` 0) of one series."""

    x: float
    y: float
    width: float
    height: float
    kind: str


@dataclass(frozen=True, slots=True)
class Column:
    """One interval: its marks, and what hovering or focusing it says."""

    x: float
    width: float
    marks: tuple[Mark, ...]
    label: str
    tip_anchor: str


@dataclass(frozen=True, slots=True)
class Line:
    kind: str
    points: str


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    unit: str
    """What the y scale counts, said in the caption."""
    columns: tuple[Column, ...]
    lines: tuple[Line, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    legend: tuple[tuple[str, str], ...]
    """(kind, name) of each series."""
    summary: str
    """The chart's figures in one sentence (the latest interval's, or that there are none)."""

    @property
    def empty(self) -> bool:
        return not any(c.marks for c in self.columns)


def slots(since: float, now: float, width: float) -> list[float]:
    """The start of every interval of ``width`` seconds from the one holding ``since`` to now."""
    first = since - since % width
    return [first + i * width for i in range(int((now - first) // width) + 1)]


def interval_name(width: float) -> str:
    return {3600.0: "hour", 6 * 3600.0: "6 hours", 86400.0: "day"}.get(width, f"{width:g} s")


def scale(top: float, whole: bool) -> tuple[float, list[float]]:
    """A scale's end and its ticks: 4 or 5 round steps (1, 2, 2.5 or 5 x 10^n) from 0 that
    reach ``top``; whole numbers only when ``whole`` (counts)."""
    top = top if top > 0 else 1.0
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if whole:
        step = float(max(1, math.ceil(step)))
    count = max(1, math.ceil(top / step - 1e-9))
    return step * count, [step * i for i in range(count + 1)]


def _y(value: float, end: float) -> float:
    return BOTTOM - (BOTTOM - TOP) * value / end


def _y_ticks(ticks: Sequence[float], end: float, text: Callable[[float], str]) -> tuple[Tick, ...]:
    return tuple(Tick(_y(t, end), text(t), "end") for t in ticks)


def _x_ticks(starts: Sequence[float], width: float) -> tuple[Tick, ...]:
    """Up to three time labels: the first interval, the middle one, the last."""
    if not starts:
        return ()
    step = (RIGHT - LEFT) / len(starts)
    picks = sorted({0, len(starts) // 2, len(starts) - 1})
    fmt = "%d %b" if width >= 86400 else "%d %b %H:%M"
    ticks = []
    for i in picks:
        anchor = "start" if i == 0 else "end" if i == len(starts) - 1 else "middle"
        x = LEFT + i * step + (0 if anchor == "start" else step if anchor == "end" else step / 2)
        ticks.append(Tick(x, datetime.fromtimestamp(starts[i], UTC).strftime(fmt), anchor))
    return tuple(ticks)


def _tip_anchor(i: int, n: int) -> str:
    return "start" if i < n / 4 else "end" if i >= n * 3 / 4 else "middle"


def _stacked(
    starts: Sequence[float],
    values: dict[float, list[tuple[str, int]]],
    labels: dict[float, str],
    end: float,
) -> tuple[Column, ...]:
    step = (RIGHT - LEFT) / max(len(starts), 1)
    columns = []
    for i, start in enumerate(starts):
        x = LEFT + i * step
        base = 0
        marks = []
        for kind, n in values.get(start, []):
            if n <= 0:
                continue
            top, bottom = _y(base + n, end), _y(base, end)
            marks.append(Mark(x + step * 0.12, top, step * 0.76, bottom - top, kind))
            base += n
        label = labels.get(start, "") if marks else ""
        columns.append(Column(x, step, tuple(marks), label, _tip_anchor(i, len(starts))))
    return tuple(columns)


def outcomes(buckets: Sequence[OutcomeBucket], since: float, now: float, width: float) -> Chart:
    """Jobs that became terminal per interval, stacked: succeeded, failed, other (partial)."""
    starts = slots(since, now, width)
    by_start = {b.start: b for b in buckets}
    end, ticks = scale(max([b.completed for b in buckets] or [0]), whole=True)
    values: dict[float, list[tuple[str, int]]] = {}
    labels: dict[float, str] = {}
    for b in buckets:
        other = b.completed - b.succeeded - b.failed
        values[b.start] = [("ok", b.succeeded), ("bad", b.failed), ("other", other)]
        parts = [f"{b.succeeded} succeeded", f"{b.failed} failed"]
        if other:
            parts.append(f"{other} partial")
        labels[b.start] = f"{stamp(b.start)}: {b.completed} finished ({', '.join(parts)})"
    latest = by_start.get(starts[-1]) if starts else None
    summary = (
        "No job finished in this period."
        if not buckets
        else f"This {interval_name(width)}: {latest.completed} finished, {latest.failed} failed."
        if latest is not None
        else f"{sum(b.completed for b in buckets)} finished in the period, none this "
        f"{interval_name(width)}."
    )
    return Chart(
        "Jobs finished",
        f"jobs per {interval_name(width)}",
        _stacked(starts, values, labels, end),
        (),
        _y_ticks(ticks, end, lambda t: f"{t:g}"),
        _x_ticks(starts, width),
        (("ok", "succeeded"), ("bad", "failed"), ("other", "partial")),
        summary,
    )


def latency(buckets: Sequence[OutcomeBucket], since: float, now: float, width: float) -> Chart:
    """p50 and p95 seconds from known to terminal per interval: two lines, a point per interval
    that has terminal jobs."""
    starts = slots(since, now, width)
    index = {start: i for i, start in enumerate(starts)}
    timed = [b for b in buckets if b.p50_seconds is not None and b.start in index]
    end, ticks = scale(max([b.p95_seconds or 0.0 for b in timed] or [0.0]), whole=False)
    step = (RIGHT - LEFT) / max(len(starts), 1)
    by_start = {b.start: b for b in timed}
    columns = []
    lines: dict[str, list[str]] = {"p50": [], "p95": []}
    for i, start in enumerate(starts):
        x = LEFT + i * step
        b = by_start.get(start)
        marks: list[Mark] = []
        label = ""
        if b is not None:
            for kind, value in (("p95", b.p95_seconds), ("p50", b.p50_seconds)):
                y = _y(value or 0.0, end)
                marks.append(Mark(x + step / 2, y, 0, 0, kind))
                lines[kind].append(f"{x + step / 2:.1f},{y:.1f}")
            label = (f"{stamp(start)}: p50 {seconds_text(b.p50_seconds or 0.0)}, "
                     f"p95 {seconds_text(b.p95_seconds or 0.0)} ({b.completed} jobs)")  # fmt: skip
        columns.append(Column(x, step, tuple(marks), label, _tip_anchor(i, len(starts))))
    last = timed[-1] if timed else None
    summary = (
        "No job finished in this period."
        if last is None
        else f"Latest ({stamp(last.start)}): p50 {seconds_text(last.p50_seconds or 0.0)}, "
        f"p95 {seconds_text(last.p95_seconds or 0.0)}."
    )
    return Chart(
        "Time from known to terminal",
        "seconds, p50 and p95 per " + interval_name(width),
        tuple(columns),
        tuple(Line(kind, " ".join(points)) for kind, points in lines.items() if points),
        _y_ticks(ticks, end, seconds_text),
        _x_ticks(starts, width),
        (("p50", "p50"), ("p95", "p95")),
        summary,
    )


def errors(buckets: Sequence[ErrorBucket], since: float, now: float, width: float) -> Chart:
    """Errors per interval stacked by code: the CODES most frequent apart, the rest as other."""
    starts = slots(since, now, width)
    totals: dict[str, int] = {}
    for e in buckets:
        totals[e.code] = totals.get(e.code, 0) + e.count
    ranked = sorted(totals, key=lambda code: (-totals[code], code))
    kinds = {code: f"code-{i}" for i, code in enumerate(ranked[:CODES])}
    per: dict[float, dict[str, int]] = {}
    for e in buckets:
        name = e.code if e.code in kinds else "other"
        counts = per.setdefault(e.start, {})
        counts[name] = counts.get(name, 0) + e.count
    end, ticks = scale(max([sum(c.values()) for c in per.values()] or [0]), whole=True)
    values = {
        start: [(kinds.get(name, "code-other"), n) for name, n in sorted(
            counts.items(), key=lambda kv: ranked.index(kv[0]) if kv[0] in kinds else CODES)]
        for start, counts in per.items()
    }  # fmt: skip
    labels = {
        start: f"{stamp(start)}: "
        + ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        for start, counts in per.items()
    }
    legend = [(kinds[code], f"{code} ({totals[code]})") for code in ranked[:CODES]]
    if len(ranked) > CODES:
        legend.append(("code-other", f"other ({sum(totals[c] for c in ranked[CODES:])})"))
    summary = (
        "No errors in this period."
        if not totals
        else f"{sum(totals.values())} errors in the period; the most: {ranked[0]} "
        f"({totals[ranked[0]]})."
    )
    return Chart(
        "Errors by code",
        f"failed jobs and failed handler attempts per {interval_name(width)}",
        _stacked(starts, values, labels, end),
        (),
        _y_ticks(ticks, end, lambda t: f"{t:g}"),
        _x_ticks(starts, width),
        tuple(legend),
        summary,
    )


def seconds_text(value: float) -> str:
    if value == 0:
        return "0 s"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")
