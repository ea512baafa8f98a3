"""Which ``jobhook simulate`` options each simulator uses; any other given on the command line is
refused (``refuse_unused``) rather than ignored, so a run is never quietly not what was asked.

A simulator that gains an option declares it here, beside the others; the tests check that every
option of the command is used by some simulator and that these sets agree with what each
webhook provider's shape does with pages, result sizes, URL lifetimes and native signatures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

if TYPE_CHECKING:
    from collections.abc import Mapping

EVERY = frozenset({"provider", "host", "port", "duration", "speed", "requests_per_minute"})
"""What every simulator takes: each job lasts ``duration`` simulated seconds, ``speed`` times
faster than real time, within the per-key budget."""
WEBHOOK_PROVIDERS = EVERY | {
    "api_key", "webhook_url", "secret", "drop", "seed", "job_count", "failed", "fail_rate",
    "error_code", "result",
}  # fmt: skip
"""What the webhook providers' simulator (``receiver.sim.simulator``) takes for every shape:
jobs at start, their failures, and the signed webhooks it sends (``result`` is checked against
the shape's own result modes)."""
CLOUD = EVERY | {"api_key"}
"""What a polled cloud API's simulator (``receiver.sim.clouds``) takes."""
TEXTRACT = frozenset({"webhook_url", "pages", "topic_arn", "region", "state_dir", "sns_port",
                      "blocks", "throttle_every"})  # fmt: skip
"""Textract's own: SNS (``webhook_url`` is the endpoint subscribed), pages and blocks."""

USED: Mapping[str, frozenset[str]] = {
    "reducto": WEBHOOK_PROVIDERS | {"pages", "result_bytes", "url_ttl"},
    "knowhere": WEBHOOK_PROVIDERS | {"pages", "result_bytes", "url_ttl"},
    "docurift": WEBHOOK_PROVIDERS | {"pages", "native_secret"},
    "docextract": WEBHOOK_PROVIDERS | {"pages", "native_secret"},
    "docling": WEBHOOK_PROVIDERS | {"result_bytes"},
    "textract": EVERY | TEXTRACT,
    "google-docai": EVERY | {"key_out"},
    "azure-docintel": CLOUD,
    "unstructured": CLOUD,
    "landingai": CLOUD,
    "mistral": CLOUD,
    "llamaparse": CLOUD,
}
"""Per ``--provider``: the parameters (``simulate``'s argument names) its simulator uses."""


def refuse_unused(ctx: click.Context, provider: str) -> None:
    """A usage error (exit 2) naming the first option given on the command line that
    ``provider``'s simulator does not use, and the providers that do. Values from the
    environment (``JOBHOOK_SIM_*``) and defaults are not refused: they are shared settings."""
    used = USED[provider]
    for param in ctx.command.params:
        name = param.name
        if name is None or name in used:
            continue
        if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        option = max(param.opts, key=len)
        takers = ", ".join(sorted(p for p, names in USED.items() if name in names))
        raise click.BadOptionUsage(
            option,
            f"{option} does not apply to --provider {provider}: its simulator does not use it "
            f"(it applies to {takers})",
            ctx=ctx,
        )
