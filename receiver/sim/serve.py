"""Serve a simulator under uvicorn for ``jobhook simulate``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
import uvicorn

from receiver.errors import ConfigError
from receiver.ops.log import configure_logging
from receiver.secret import resolve_secret
from receiver.sim.api import build_app
from receiver.sim.journal import safe_url
from receiver.sim.simulator import Simulator

if TYPE_CHECKING:
    from pathlib import Path

log = structlog.get_logger("receiver.sim")


def _resolve(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    try:
        return resolve_secret(value)
    except ValueError as exc:
        raise ConfigError(f"simulator: {name}: {exc}") from None


def run(
    *,
    provider: str,
    host: str,
    port: int,
    api_key: str | None,
    secret: str | None,
    native_secret: str | None,
    job_count: int,
    failed: int,
    result: Any,
    **options: Any,
) -> None:
    """Build the simulator, start ``job_count`` jobs and serve until SIGINT/SIGTERM."""
    configure_logging()
    key = _resolve(api_key, "api key")
    if key is None:
        raise ConfigError("simulator: set --api-key or JOBHOOK_SIM_API_KEY (clients must send it)")
    sim = Simulator(
        provider,
        api_key=key,
        secret=_resolve(secret, "secret"),
        native_secret=_resolve(native_secret, "native secret"),
        **options,
    )
    if failed > job_count:
        raise ConfigError("simulator: --failed cannot exceed --jobs")
    try:
        if job_count - failed:
            sim.create_jobs(job_count - failed, result=result)
        if failed:
            sim.create_jobs(failed, outcome="failed", result=result)
    except ValueError as exc:
        raise ConfigError(f"simulator: {exc}") from None
    log.info(
        "sim_serving",
        provider=provider,
        url=f"http://{host}:{port}",
        job_route=sim.shape.job_route,
        jobs=len(sim.jobs),
        webhook_url=safe_url(sim.sender.settings.url),
    )
    uvicorn.run(
        build_app(sim), host=host, port=port, log_config=None, access_log=False, server_header=False
    )


def run_cloud(
    provider: str,
    *,
    host: str,
    port: int,
    api_key: str | None,
    duration: float,
    requests_per_minute: float | None,
    key_out: Path | None,
) -> None:
    """Serve a cloud provider's simulator (``receiver.sim.clouds``) until SIGINT/SIGTERM."""
    from receiver.sim.clouds import CloudOptions, build_cloud

    configure_logging()
    key = _resolve(api_key, "api key")
    if key is None and provider == "azure-docintel":
        raise ConfigError("simulator: set --api-key or JOBHOOK_SIM_API_KEY (clients must send it)")
    url = f"http://{host}:{port}"
    options = CloudOptions(
        key or "", duration, requests_per_minute, key_out=key_out, public_url=url
    )
    app = build_cloud(provider, options)
    log.info("sim_serving", provider=provider, url=url)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, server_header=False)
