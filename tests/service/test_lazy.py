"""A service without ``server.admin_token`` builds its app without loading the admin routes'
modules, the console's pages or the OpenAPI document: idle memory it would never use."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

# What only a service with an admin token (or a request for /openapi.json) needs.
TOKEN_ONLY = [
    "receiver.admin.bulk",
    "receiver.admin.export",
    "receiver.admin.jobs",
    "receiver.admin.longpoll",
    "receiver.admin.reprocess",
    "receiver.admin.sse",
    "receiver.admin.status",
    "receiver.console.auth",
    "receiver.console.dead",
    "receiver.console.live",
    "receiver.console.overview",
    "receiver.console.pages",
    "receiver.console.web",
    "receiver.service.openapi",
]

BUILD = """
import json, sys
from pathlib import Path
from receiver.config.load import load_settings
from receiver.service.app import create_app
create_app(load_settings(Path(sys.argv[1]), environ={}))
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after_create_app(tmp_path: Path, server: str) -> set[str]:
    """The modules a fresh interpreter holds once it has built the app for this config."""
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
{server}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]

[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(proc.stdout))


def test_an_app_without_an_admin_token_loads_no_admin_console_nor_openapi_module(
    tmp_path: Path,
) -> None:
    loaded = loaded_after_create_app(tmp_path, "")
    assert "receiver.service.app" in loaded
    assert [name for name in TOKEN_ONLY if name in loaded] == []


def test_an_app_with_an_admin_token_loads_the_admin_and_console_routes(tmp_path: Path) -> None:
    loaded = loaded_after_create_app(tmp_path, '[server]\nadmin_token = "a-long-admin-token-0123"')
    assert [name for name in TOKEN_ONLY if name not in loaded] == ["receiver.service.openapi"]
