"""The demos' shared setup: jobhook's configuration on loopback, and tracking the jobs that a
simulated provider was given (``jobhook demo`` and ``jobhook demo --console``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.config.settings import Settings
from receiver.models import Event, State

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.applications import Starlette


def demo_config(
    data_dir: Path, sim_url: str, secret: str, api_key: str, admin_token: str | None = None
) -> dict[str, Any]:
    """The demo's configuration as data (the console demo adds a source and a handler)."""
    return {
            "data_dir": str(data_dir),
            "server": {"admin_token": admin_token} if admin_token else {},
            "results": {"allowed_hosts": ["127.0.0.1"], "allow_http": True,
                        "allow_private_networks": True},
            "sources": {"reducto": {
                "provider": "reducto", "secrets": [secret], "api_base_url": sim_url,
                "api_key": api_key,
                "poll": {"grace_seconds": 2.0, "initial_delay": 0.5, "max_delay": 2.0,
                         "requests_per_minute": 600},
            }},
            "handlers": [{"name": "files", "type": "file", "dir": str(data_dir / "out")}],
            "log": {"level": "warning"},
        }  # fmt: skip


def demo_settings(
    data_dir: Path, sim_url: str, secret: str, api_key: str, admin_token: str | None = None
) -> Settings:
    config = demo_config(data_dir, sim_url, secret, api_key, admin_token)
    return Settings.model_validate(config, context={"env": {}})


async def track(app: Starlette, source: str, job_ids: list[str]) -> None:
    """Tell jobhook about jobs submitted elsewhere, as ``POST /jobs`` would."""
    for job_id in job_ids:
        await app.state.ingestor.ingest(
            Event(source=source, job_id=job_id, state=State.QUEUED,
                  provider_status="tracked", via="track")
        )  # fmt: skip
