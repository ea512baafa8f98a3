"""The cloud providers' simulators: each its own module, with the app ``jobhook simulate`` serves.

They share no code with the webhook providers' simulator (``Simulator``): a cloud API is polled,
not announced, and each has its own auth, errors and storage.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.applications import Starlette

CLOUDS = {
    "azure-docintel": "receiver.sim.azure",
    "google-docai": "receiver.sim.google",
    "unstructured": "receiver.sim.unstructured",
    "landingai": "receiver.sim.landingai",
    "mistral": "receiver.sim.mistral",
    "llamaparse": "receiver.sim.llamaparse",
}
"""``--provider`` name: the module whose ``build(CloudOptions)`` makes its app."""


@dataclass(frozen=True, slots=True)
class CloudOptions:
    """What ``jobhook simulate`` tells a cloud simulator."""

    api_key: str
    duration: float
    requests_per_minute: float | None
    key_out: Path | None = None
    """Google: where to write the service-account key that the simulator's token endpoint
    accepts (its ``token_uri`` is the simulator)."""
    public_url: str = ""
    """The simulator's own URL, as clients reach it."""


def build_cloud(provider: str, options: CloudOptions) -> Starlette:
    """The app of ``provider``'s simulator; KeyError when it has none."""
    module = importlib.import_module(CLOUDS[provider])
    app: Starlette = module.build(options)
    return app
