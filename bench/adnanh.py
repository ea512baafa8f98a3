"""adnanh/webhook, the Go receiver people reach for: the same requests, nothing stored.

Debian packages it as ``webhook`` (``apt-get install -y webhook``; installed automatically
when run as root, as wrk is). One hook, ``reducto``, under the ``/webhooks/`` prefix, runs
``/bin/true`` for each request and answers at once without waiting for it (its default): the
least it does for a webhook. It cannot check a Svix signature (its rules hash the body only),
so it verifies nothing either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from bench import procs

if TYPE_CHECKING:
    from pathlib import Path

INSTALL = ["apt-get", "install", "-y", "-q", "webhook"]


def binary() -> str | None:
    """The webhook binary, installed with apt-get when missing and running as root; None
    (the row is left out, and the report says why) when it cannot be had."""
    found = shutil.which("webhook")
    if found or not (sys.platform.startswith("linux") and os.geteuid() == 0):
        return found
    if shutil.which("apt-get"):
        print("bench: adnanh/webhook is missing; installing it: apt-get install -y webhook",
              file=sys.stderr)  # fmt: skip
        if subprocess.run(INSTALL, capture_output=True, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
            subprocess.run(INSTALL, capture_output=True, check=False)
    return shutil.which("webhook")


def service(directory: Path, port: int, exe: str) -> procs.Service:
    hooks = directory / "adnanh-hooks.json"
    hooks.write_text(json.dumps([{
        "id": "reducto",
        "execute-command": "/bin/true",
        "response-message": '{"status": "accepted"}',
        "response-headers": [{"name": "Content-Type", "value": "application/json"}],
    }]), "utf-8")  # fmt: skip
    argv = [exe, "-hooks", str(hooks), "-ip", "127.0.0.1", "-port", str(port),
            "-urlprefix", "webhooks"]  # fmt: skip
    return procs.Service("adnanh", argv, port, directory / "adnanh.log")
