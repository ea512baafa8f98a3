"""How the job commands draw the admin API's documents in a terminal (rich tables, a bar)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from types import TracebackType

PIPE_WIDTH = 200
STATE_STYLES = {
    "queued": "cyan",
    "running": "blue",
    "succeeded": "green",
    "partial": "yellow",
    "failed": "red",
    "cancelled": "magenta",
    "expired": "red",
}


def _out() -> Console:
    # Piped into a file or another program, rows are not cut to a terminal's 80 columns.
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


def _state(state: str) -> str:
    return f"[{STATE_STYLES.get(state, 'white')}]{state}[/]"


def _when(iso: str | None) -> str:
    return "" if not iso else iso[:19].replace("T", " ")


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min" if value < 7200 else f"{value / 3600:.1f} h"


def _pages(progress: dict[str, Any] | None) -> str:
    if not progress or progress.get("total") is None:
        return ""
    return f"{progress.get('done') or 0}/{progress['total']}"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def job_table(page: dict[str, Any]) -> None:
    """``jobs ls``: one row per job (columns nobody has are left out), then the next cursor."""
    jobs = page["jobs"]
    columns: list[tuple[str, Any]] = [
        ("source", lambda j: j["source"]),
        ("job id", lambda j: j["job_id"]),
        ("state", lambda j: _state(j["state"])),
        ("provider", lambda j: j["provider_status"]),
        ("created (UTC)", lambda j: _when(j["created_at"])),
        ("took", lambda j: _seconds(j["processing_seconds"])),
        ("pages", lambda j: _pages(j["progress"])),
        ("confidence", lambda j: _text(j["confidence"])),
        ("error", lambda j: (j["error"] or "")[:60]),
    ]
    shown = [(name, cell) for name, cell in columns if any(cell(j) for j in jobs)]
    table = Table(*(name for name, _ in shown))
    for job in jobs:
        table.add_row(*(cell(job) for _, cell in shown))
    console = _out()
    if jobs:
        console.print(table)
    else:
        console.print("no jobs match")
    if page.get("next_cursor"):
        console.print(f"more: --cursor {page['next_cursor']}")


def _link(link: dict[str, Any] | None) -> str:
    """One end of a reprocess link: the other job, or how its submission is going."""
    if not link:
        return ""
    if link["job_id"]:
        note = "" if link["state"] == "submitted" else f" ({link['state']})"
        return f"{link['source']}/{link['job_id']}{note}"
    return str(link["state"]) + (f": {link['error']}" if link["error"] else "")


def job_detail(detail: dict[str, Any]) -> None:
    """``jobs show``: the job's fields, then its deliveries and dispatches."""
    job, completion = detail["job"], detail["completion"]
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    result = job["result"]
    for name, value in (
        ("job", f"{job['source']}/{job['job_id']}"),
        ("state", f"{_state(job['state'])} ({job['provider_status']})"),
        ("created", _when(job["created_at"])),
        ("terminal", _when(job["terminal_at"])),
        ("took", _seconds(job["processing_seconds"])),
        ("pages", _pages(job["progress"]) or _text(job["expected_pages"])),
        ("confidence", _text(job["confidence"])),
        ("metadata", ", ".join(f"{k}={v}" for k, v in job["metadata"].items())),
        ("error code", _text(job.get("error_code"))),
        ("reprocessed from", _link(job.get("reprocessed_from"))),
        ("reprocessed as", _link(job.get("reprocessed_as"))),
        ("error", _text(job["error"])),
        ("completion", "" if completion is None else completion["phase"]),
        ("result", "" if not result else
         f"{result['bytes']} bytes, sha256 {result['sha256'][:16]}…"
         + ("" if result["available"] else " (deleted)")),
    ):  # fmt: skip
        if value:
            fields.add_row(name, value)
    console = _out()
    console.print(fields)
    deliveries = Table("message id", "state", "provider", "received (UTC)", title="deliveries")
    for d in detail["deliveries"]:
        deliveries.add_row(d["message_id"], _state(d["state"]), d["provider_status"],
                           _when(d["received_at"]))  # fmt: skip
    dispatches = Table("handler", "state", "attempts", "next attempt", "last error",
                       title="handlers")  # fmt: skip
    for d in detail["dispatches"]:
        dispatches.add_row(d["handler"], d["state"], str(d["attempts"]),
                           _when(d["next_attempt_at"]), (d["last_error"] or "")[:80])  # fmt: skip
    extracted = Table("field", "confidence", title="fields")
    for name, confidence in (job.get("fields") or {}).items():
        extracted.add_row(name, "" if confidence is None else f"{confidence:.2f}")
    if job.get("fields"):
        console.print(extracted)
    if detail["deliveries"]:
        console.print(deliveries)
    if detail["dispatches"]:
        console.print(dispatches)


def stats(figures: dict[str, Any]) -> None:
    """``jobs stats``: the headline figures, then counts by state, source and handler."""
    times = figures["processing_seconds"]
    rate = figures["success_rate"]
    summary = Table("period", "jobs", "terminal", "success rate", "avg", "p50", "p95")
    summary.add_row(
        figures["period"], str(figures["total"]), str(figures["terminal"]),
        "" if rate is None else f"{rate:.1%}",
        _seconds(times["avg"]), _seconds(times["p50"]), _seconds(times["p95"]),
    )  # fmt: skip
    console = _out()
    console.print(summary)
    for title, counts in (("by state", figures["by_state"]), ("by source", figures["by_source"])):
        table = Table(title.removeprefix("by "), "jobs", title=title)
        for name, count in counts.items():
            table.add_row(_state(name) if title == "by state" else name, str(count))
        if counts:
            console.print(table)
    failures = Table("handler", "dead", "retrying", title="handler failures")
    for handler, counts in figures["handler_failures"].items():
        failures.add_row(handler, str(counts["dead"]), str(counts["retrying"]))
    if figures["handler_failures"]:
        console.print(failures)
    errors = figures.get("errors") or {}
    by_code = Table("code", "count", title="errors by code")
    for code, count in errors.get("by_code", {}).items():
        by_code.add_row(code, str(count))
    if errors.get("by_code"):
        console.print(by_code)
        where = Table("where", "count", title="errors by where")
        for name, count in errors["by_where"].items():
            where.add_row(name, str(count))
        console.print(where)
        by_handler = Table("handler", "code", "count", title="errors by handler")
        for handler, codes in errors["by_handler"].items():
            for code, count in codes.items():
                by_handler.add_row(handler, code, str(count))
        if errors["by_handler"]:
            console.print(by_handler)
    confidence = Table(
        "source",
        "field",
        "count",
        "mean",
        "p10",
        "below",
        "threshold",
        title=f"field confidence (job average {_text(figures.get('avg_confidence'))})",
    )
    for f in figures.get("fields") or ():
        confidence.add_row(
            f["source"],
            f["field"],
            str(f["count"]),
            f"{f['mean']:.2f}",
            f"{f['p10']:.2f}",
            f"{f['below']:.1%}",
            f"{f['threshold']:.2f}",
        )
    if figures.get("fields"):
        console.print(confidence)


def wait_summary(detail: dict[str, Any]) -> None:
    job = detail["job"]
    where = f"{job['source']}/{job['job_id']}"
    if not job["terminal"]:
        _out().print(f"{where} is still {_state(job['state'])}: timed out")
        return
    took = _seconds(job["processing_seconds"])
    error = f": {job['error']}" if job["error"] else ""
    _out().print(f"{where} {_state(job['state'])} ({job['provider_status']}) in {took}{error}")


class JobProgress:
    """A progress bar (on stderr) of pages done, once the provider reports a total."""

    def __init__(self, label: str) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[pages]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )  # fmt: skip
        self._label = label
        self._task = self._progress.add_task(label, total=None, pages="")

    def __enter__(self) -> JobProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def update(self, job: dict[str, Any]) -> None:
        progress = job["progress"] or {}
        total, done = progress.get("total"), progress.get("done")
        description = f"{self._label} {job['state']}"
        if total:
            pages = f"{done or 0}/{total} pages"
            self._progress.update(
                self._task, total=total, completed=done or 0, description=description, pages=pages
            )
        else:
            self._progress.update(self._task, description=description)
