"""``import jobhook``: the Python client for pipeline code, under the distribution's own name.

    import jobhook

    with jobhook.Client() as client:               # JOBHOOK_URL, JOBHOOK_ADMIN_TOKEN
        client.track("reducto", job_id)

Every name of ``receiver.client.__all__``, imported on first use, so ``import jobhook`` costs
nothing until then. The service's own code lives in ``receiver`` and ``handlers``.
"""

from __future__ import annotations

import importlib
from typing import Any

_CLIENT = "receiver.client"


def __getattr__(name: str) -> Any:
    if name.startswith("_") and name != "__all__":
        raise AttributeError(f"module 'jobhook' has no attribute {name!r}")
    client = importlib.import_module(_CLIENT)
    exported: list[str] = client.__all__
    if name == "__all__":
        return list(exported)
    if name not in exported:
        raise AttributeError(f"module 'jobhook' has no attribute {name!r}")
    value = getattr(client, name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    exported: list[str] = importlib.import_module(_CLIENT).__all__
    return sorted({*globals(), *exported})
