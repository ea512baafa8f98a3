"""``jobhook simulate``: serve one simulated provider on loopback, with jobs already running."""

from __future__ import annotations

from pathlib import Path

import click

from receiver.errors import ConfigError
from receiver.sim.clouds import CLOUDS
from receiver.sim.shapes import SHAPES


@click.command()
@click.option(
    "--provider",
    type=click.Choice(sorted([*SHAPES, *CLOUDS])),
    default="reducto",
    show_default=True,
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9100, show_default=True)
@click.option(
    "--api-key",
    envvar="JOBHOOK_SIM_API_KEY",
    help="Key clients must present (literal, env:NAME or file:PATH; default $JOBHOOK_SIM_API_KEY).",
)
@click.option("--webhook-url", help="Receiver URL the webhooks are POSTed to.")
@click.option(
    "--secret",
    envvar="JOBHOOK_SIM_SECRET",
    help="whsec_ signing secret (literal, env:NAME or file:PATH; default $JOBHOOK_SIM_SECRET).",
)
@click.option(
    "--native-secret",
    envvar="JOBHOOK_SIM_NATIVE_SECRET",
    help="Also sign DocuRift/DocExtract webhooks natively with this secret.",
)
@click.option(
    "--drop",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fraction of webhooks lost (never sent), chosen by --seed.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--jobs",
    "job_count",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Jobs to start at once.",
)
@click.option(
    "--failed",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Of --jobs, how many fail.",
)
@click.option(
    "--duration",
    type=click.FloatRange(0),
    default=5.0,
    show_default=True,
    help="Simulated seconds each job takes.",
)
@click.option(
    "--speed",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="How much faster than real time jobs advance.",
)
@click.option("--pages", type=click.IntRange(1), default=3, show_default=True)
@click.option("--result", type=click.Choice(["inline", "url"]), help="Result delivery.")
@click.option(
    "--result-bytes",
    type=click.IntRange(1),
    default=256 * 1024,
    show_default=True,
    help="Size of URL results (streamed, never held in memory).",
)
@click.option(
    "--url-ttl",
    type=click.FloatRange(0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Seconds a presigned result URL stays valid.",
)
@click.option(
    "--requests-per-minute",
    type=click.FloatRange(0, min_open=True),
    help="Per-key budget (default: the provider's).",
)
@click.option(
    "--key-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="google-docai: write the service-account key its token endpoint accepts here.",
)
def simulate(
    provider: str,
    host: str,
    port: int,
    api_key: str | None,
    webhook_url: str | None,
    secret: str | None,
    native_secret: str | None,
    drop: float,
    seed: int,
    job_count: int,
    failed: int,
    duration: float,
    speed: float,
    pages: int,
    result: str | None,
    result_bytes: int,
    url_ttl: float,
    requests_per_minute: float | None,
    key_out: Path | None,
) -> None:
    """Run a simulated provider API (job endpoints, rate limits, signed webhooks)."""
    from receiver.sim.serve import run, run_cloud

    try:
        if provider in CLOUDS:
            run_cloud(provider, host=host, port=port, api_key=api_key, duration=duration,
                      requests_per_minute=requests_per_minute, key_out=key_out)  # fmt: skip
            return
        run(
            provider=provider,
            host=host,
            port=port,
            api_key=api_key,
            webhook_url=webhook_url,
            secret=secret,
            native_secret=native_secret,
            drop=drop,
            seed=seed,
            job_count=job_count,
            failed=failed,
            duration=duration,
            speed=speed,
            pages=pages,
            result=result,
            result_bytes=result_bytes,
            url_ttl=url_ttl,
            requests_per_minute=requests_per_minute,
        )
    except ConfigError as exc:
        click.echo(f"jobhook: {exc}", err=True)
        raise SystemExit(2) from None
