"""Figures out: medians and percentiles, a rich table per benchmark, JSON under bench/results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil  # type: ignore[import-untyped]
from rich.console import Console
from rich.table import Table

from receiver.store.queries import nearest_rank

if TYPE_CHECKING:
    from collections.abc import Sequence

RESULTS = Path(__file__).resolve().parent / "results"
# Wide enough for every table when the output goes to a file or a pipe (rich says 80).
console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100), nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    return sorted(values)[nearest_rank(p / 100, len(values)) - 1]


def machine() -> dict[str, Any]:
    """Where the figures came from."""
    mem = psutil.virtual_memory().total
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem / 1024**3, 1),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def verdict(ok: bool) -> str:
    return "[green]met[/green]" if ok else "[red]MISSED[/red]"


def show(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(fmt(v) for v in row))
    console.print(table)


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def save(name: str, data: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json`` (the latest) and a timestamped copy."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "machine": machine(), **data}  # fmt: skip
    text = json.dumps(doc, indent=2, default=str)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"{name}-{stamp}.json").write_text(text, encoding="utf-8")
    latest = RESULTS / f"{name}.json"
    latest.write_text(text, encoding="utf-8")
    return latest
