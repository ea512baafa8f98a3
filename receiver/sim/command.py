"""``jobhook simulate``: serve one simulated provider on loopback, with jobs already running."""

from __future__ import annotations

from pathlib import Path

import click

from receiver.errors import ConfigError
from receiver.sim.clouds import CLOUDS
from receiver.sim.options import refuse_unused
from receiver.sim.shapes import SHAPES


@click.command(short_help="Run a simulated provider API, for tests without an account.")
@click.pass_context
@click.option(
    "--provider",
    type=click.Choice(sorted([*SHAPES, *CLOUDS, "textract"])),
    default="reducto",
    show_default=True,
    help="Which provider's API to simulate.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=9100, show_default=True, help="Port to listen on.")
@click.option(
    "--api-key",
    envvar="JOBHOOK_SIM_API_KEY",
    show_envvar=True,
    help="Key clients must present (literal, env:NAME or file:PATH).",
)
@click.option("--webhook-url", help="Receiver URL the webhooks are POSTed to.")
@click.option(
    "--secret",
    envvar="JOBHOOK_SIM_SECRET",
    show_envvar=True,
    help="whsec_ signing secret (literal, env:NAME or file:PATH).",
)
@click.option(
    "--native-secret",
    envvar="JOBHOOK_SIM_NATIVE_SECRET",
    show_envvar=True,
    help="Also sign DocuRift/DocExtract webhooks natively with this secret.",
)
@click.option(
    "--drop",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fraction of webhooks lost (never sent), chosen by --seed.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of every random choice (which webhooks --drop loses), for repeatable runs.",
)
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
    "--fail-rate",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fraction of submitted jobs that fail, chosen by --seed.",
)
@click.option(
    "--error-code",
    help="The error code failed jobs carry (default: the provider's first documented one).",
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
@click.option(
    "--pages",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Pages of each job's document (its progress counts them; textract: a PAGE block each).",
)
@click.option(
    "--result",
    type=click.Choice(["inline", "url"]),
    help="How every job's result is delivered, submitted ones too (default: the provider's "
    "usual way).",
)
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
@click.option("--topic-arn", help="textract: the SNS topic that --webhook-url is subscribed to.")
@click.option("--region", default="us-east-1", show_default=True, help="textract: its region.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("sim-textract"),
    show_default=True,
    help="textract: where the SNS CA bundle (ca.pem) is written for the receiver to trust.",
)
@click.option(
    "--sns-port", type=int, default=9443, show_default=True, help="textract: SNS's https port."
)
@click.option(
    "--blocks",
    type=click.IntRange(1),
    default=2500,
    show_default=True,
    help="textract: blocks in each analysed document (1,000 a page).",
)
@click.option(
    "--throttle-every",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="textract: answer every Nth Get* with a ThrottlingException (0: never).",
)
@click.option(
    "--key-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="google-docai: write the service-account key its token endpoint accepts here.",
)
def simulate(
    ctx: click.Context,
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
    fail_rate: float,
    error_code: str | None,
    duration: float,
    speed: float,
    pages: int,
    result: str | None,
    result_bytes: int,
    url_ttl: float,
    requests_per_minute: float | None,
    topic_arn: str | None,
    region: str,
    state_dir: Path,
    sns_port: int,
    blocks: int,
    throttle_every: int,
    key_out: Path | None,
) -> None:
    """Run a simulated provider API (job endpoints, rate limits, signed webhooks).

    An option the chosen provider's simulator does not use is refused (exit 2), not ignored.
    """
    refuse_unused(ctx, provider)
    from receiver.sim.serve import run, run_cloud

    try:
        if provider == "textract":
            from receiver.sim.textract import run_textract

            run_textract(
                host=host,
                port=port,
                sns_port=sns_port,
                state_dir=state_dir,
                region=region,
                topic_arn=topic_arn,
                sns_endpoint=webhook_url,
                duration=duration / speed,
                blocks=blocks,
                pages=pages,
                throttle_every=throttle_every,
                requests_per_second=(requests_per_minute or 600.0) / 60,
            )
            return
        if provider in CLOUDS:
            run_cloud(provider, host=host, port=port, api_key=api_key, duration=duration / speed,
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
            fail_rate=fail_rate,
            error_code=error_code,
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
