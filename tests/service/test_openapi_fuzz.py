"""schemathesis against ``/openapi.json``: no request the schema allows (or breaks) gets a 5xx.

schemathesis' own command line runs against a real server, loading the document clients see;
every operation gets its examples, coverage (boundary and invalid values, one parameter at a
time) and a bounded number of fuzzed cases, positive and negative. ``/events`` is left out: it
streams until the client leaves.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest

from receiver.service.app import create_app
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.support import live_server

MAX_EXAMPLES = 30
# A fuzzed ``POST /jobs`` may track a real job; waiting on it must not take the 300 s it may.
# Webhooks go to the configured source, so fuzzed bodies meet the signature check.
CONFIG = """
headers = {{ Authorization = "{authorization}" }}

[[operations]]
include-path = "/jobs/{{source}}/{{job_id}}/wait"
parameters = {{ "query.timeout" = 0.05 }}

[[operations]]
include-path = "/webhooks/{{source}}"
parameters = {{ "path.source" = "reducto" }}

[[operations]]
include-path = "/webhooks/{{source}}/{{token}}"
parameters = {{ "path.source" = "hinted", "path.token" = "{direct_token}" }}
"""
# A Reducto source taking direct webhooks, so fuzzed hints get past its path token; its job API
# is a port nobody listens on (a hint's look-up fails and is logged).
DIRECT_TOKEN = "fuzz-direct-token-0123456789abcdef"
DIRECT = f"""
[sources.hinted]
provider = "reducto"
webhook_mode = "direct"
direct_tokens = ["{DIRECT_TOKEN}"]
api_base_url = "http://127.0.0.1:9"
api_key = "unused-key"
"""


@pytest.mark.slow
# The fuzzer takes ~20 s alone and several times that beside other work: bounded, not timed.
@pytest.mark.timeout(180)
async def test_no_generated_request_gets_a_server_error(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path, extra=DIRECT))
    async with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            await deliver(client, "job-1", customer="acme")
            await deliver(client, "job-2", status="Failed")
        config = tmp_path / "schemathesis.toml"
        text = CONFIG.format(authorization=AUTH["Authorization"], direct_token=DIRECT_TOKEN)
        config.write_text(text, encoding="utf-8")
        schemathesis = Path(sys.executable).with_name("schemathesis")
        run = await asyncio.create_subprocess_exec(
            str(schemathesis), "--config-file", str(config), "run", f"{url}/openapi.json",
            "--checks", "not_a_server_error",
            "--phases", "examples,coverage,fuzzing",
            "--max-examples", str(MAX_EXAMPLES), "--seed", "1", "--workers", "1",
            "--exclude-path", "/events",
            "--generation-database", "none", "--no-color",
            "--report-dir", str(tmp_path / "schemathesis-report"),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(run.communicate(), 150)
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/readyz")).status_code == 200
    report = output.decode(errors="replace")
    assert run.returncode == 0, report[-6000:]
    assert "Tested: 17" in report, report[-3000:]  # every operation but /events was run
