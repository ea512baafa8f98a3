"""A faithful simulator of the providers' job APIs and webhooks, for trying jobhook and testing.

Names are imported on first use, so ``jobhook --help`` does not pay for the web stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receiver.sim.api import build_app
    from receiver.sim.clock import ManualClock, SystemClock
    from receiver.sim.journal import Entry, key_hash
    from receiver.sim.sender import Delivery
    from receiver.sim.simulator import Simulator

_EXPORTS = {
    "Delivery": "receiver.sim.sender",
    "Entry": "receiver.sim.journal",
    "ManualClock": "receiver.sim.clock",
    "Simulator": "receiver.sim.simulator",
    "SystemClock": "receiver.sim.clock",
    "build_app": "receiver.sim.api",
    "key_hash": "receiver.sim.journal",
}

__all__ = [
    "Delivery",
    "Entry",
    "ManualClock",
    "Simulator",
    "SystemClock",
    "build_app",
    "key_hash",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
