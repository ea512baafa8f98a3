"""What a SQLite store's checkpoints did while a run lasted, read from jobhook's ``/metrics``,
and how long a small fsync took on the store's disk meanwhile.

Each sustained minute and each fixed-rate phase of ``bench ingest`` reports them beside its
latency, so a tail can be told apart: the writes held while the WAL starts over (the holds,
their total and the longest), the checkpoint passes' own time and frames, and the disk itself
(a 4 KiB write + fsync of a file beside the store every 20 ms: when it stalls, so does every
commit's fsync).
"""

from __future__ import annotations

import bisect
import time
from typing import TYPE_CHECKING, Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench import report
from bench.polled import Polled

if TYPE_CHECKING:
    from collections.abc import Sequence

HOLD = "jobhook_store_write_hold_seconds"


def read(url: str) -> dict[str, float]:
    """The ``jobhook_store_*`` samples of the service at ``url`` (a histogram's buckets as
    ``<name>_bucket:<le>``); empty when it has none (a PostgreSQL store) or does not answer."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=5).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("jobhook_store_"):
            continue
        for sample in family.samples:
            le = sample.labels.get("le")
            out[sample.name if le is None else f"{sample.name}:{le}"] = sample.value
    return out


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What happened between two readings: holds (count, seconds, the longest's bucket bound
    in ms, inf when one passed the last), restarts, checkpoint passes (those that copied
    frames), their seconds and frames."""
    if not before or not after:
        return {}

    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    bounds = sorted(
        (float(key.split(":", 1)[1]), grew(key))
        for key in after
        if key.startswith(f"{HOLD}_bucket:")
    )
    holds = grew(f"{HOLD}_count")
    longest = next((bound for bound, count in bounds if count >= holds), float("inf"))
    return {
        "holds": holds,
        "held_seconds": grew(f"{HOLD}_sum"),
        "longest_hold_ms": longest * 1000 if holds else 0.0,
        "restarts": grew("jobhook_store_wal_restarts_total"),
        "checkpoints": grew("jobhook_store_checkpoints_total"),
        "checkpoint_seconds": grew("jobhook_store_checkpoint_seconds_total"),
        "checkpoint_frames": grew("jobhook_store_checkpoint_frames_total"),
    }


def line(figures: dict[str, Any]) -> str:
    """The figures of ``delta`` and the fsync probe, as one line of text."""
    parts = []
    if "holds" in figures:
        parts.append(
            f"holds {figures['holds']:,.0f} ({figures['held_seconds']:.2f} s, longest "
            f"<= {figures['longest_hold_ms']:g} ms), checkpoints "
            f"{figures.get('checkpoints', 0):,.0f} / {figures['checkpoint_seconds']:.1f} s / "
            f"{figures['checkpoint_frames']:,.0f} frames"
        )
    if "fsync_p99_ms" in figures:
        parts.append(
            f"fsync p50 {figures['fsync_p50_ms']:.1f} / p99 {figures['fsync_p99_ms']:.1f} / "
            f"max {figures['fsync_max_ms']:.1f} ms"
        )
    return "; ".join(parts)


def fsync_figures(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of fsync probe samples (ms)."""
    if not samples:
        return {}
    return {
        "fsync_p50_ms": report.percentile(list(samples), 50),
        "fsync_p99_ms": report.percentile(list(samples), 99),
        "fsync_max_ms": max(samples),
    }


class Readings(Polled):
    """``read(url)`` every ``interval`` seconds from a thread, each stamped with ``time.time()``;
    per phase, the ``delta`` over it."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        self._url = url
        self.samples: list[tuple[float, dict[str, float]]] = []
        super().__init__(interval)

    def _sample(self) -> None:
        self.samples.append((time.time(), read(self._url)))

    def per_phase(self, start: float, phases: int, seconds: float) -> list[dict[str, float]]:
        stamps = [s[0] for s in self.samples]
        out = []
        for k in range(phases):
            lo = max(bisect.bisect_right(stamps, start + k * seconds) - 1, 0)
            hi = min(bisect.bisect_left(stamps, start + (k + 1) * seconds),
                     len(self.samples) - 1)  # fmt: skip
            out.append(delta(self.samples[lo][1], self.samples[hi][1]))
        return out
