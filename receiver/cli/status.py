"""``jobhook status``: is the service ready, and does each source's confirmation backlog drain
in time at its rate budget (what ``/readyz`` says, for a terminal)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


@click.command()
@click.option("--url", envvar="JOBHOOK_URL", help=f"jobhook's URL [{DEFAULT_URL}].")
@click.option("--json", "as_json", is_flag=True, help="Print /readyz's JSON for scripts.")
def status(url: str | None, as_json: bool) -> None:
    """Readiness, each source's confirmations waiting, budget and drain time, and each
    handler's circuit.

    Exits 0 when ready, 4 when the service is unavailable or cannot be reached.
    """
    base = (url or DEFAULT_URL).rstrip("/")
    try:
        response = httpx.get(f"{base}/readyz", timeout=10.0)
        body: dict[str, Any] = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        click.echo(f"jobhook: cannot read {base}/readyz: {type(exc).__name__}", err=True)
        sys.exit(4)
    if as_json:
        click.echo(json.dumps(body, indent=2))
    else:
        click.echo(f"{base}: {body.get('status', 'unknown')}")
        if "error" in body:
            click.echo(f"  {body['error']}")
        for source, drain in sorted(body.get("confirmations", {}).items()):
            verdict = "SLOW" if drain.get("slow") else "ok"
            click.echo(
                f"  {source}: {drain['confirmations']} confirmations waiting, "
                f"{drain['budget_per_minute']:g}/min, drains in {_duration(drain['eta_seconds'])}"
                f" [{verdict}]"
            )
        for handler, circuit in sorted(body.get("circuits", {}).items()):
            click.echo(
                f"  handler {handler}: circuit {circuit['state']}, "
                f"{circuit['failures']} failures in a row"
            )
    sys.exit(0 if response.status_code == 200 else 4)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
