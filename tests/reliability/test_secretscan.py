"""The suite-wide secret scan: a test that prints or logs a known secret fails, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.secretscan import known_secrets, leaks
from tests.support import OLD_SECRET, SECRET

REPO = Path(__file__).resolve().parents[2]
API_KEY = "module-level-api-key-1234"

SAMPLE = """
import logging
import structlog
from tests.support import SECRET

TOKEN = "a-module-token-5678"

def test_prints_the_secret():
    print("config", SECRET)

def test_structlog_logs_the_key_material():
    structlog.get_logger().info("loaded", key=SECRET.removeprefix("whsec_"))

def test_stdlib_logs_a_module_token():
    logging.getLogger("x").warning("token %s", TOKEN)

def test_stays_quiet():
    print("nothing to see")
"""


def test_module_level_secrets_keys_and_tokens_are_known() -> None:
    import tests.reliability.test_secretscan as me

    secrets = known_secrets(me)
    assert secrets["tests.reliability.test_secretscan.API_KEY"] == API_KEY
    # A webhook secret is looked for by its key material: found with or without its prefix.
    assert secrets["tests.support.SECRET"] == SECRET.removeprefix("whsec_")
    assert secrets["tests.support.OLD_SECRET"] == OLD_SECRET.removeprefix("whsec_")
    assert not [v for v in secrets.values() if v.startswith("whpk_")]


def test_leaks_name_the_variable_and_the_section_not_the_value() -> None:
    found = leaks([("Captured stderr call", f"x {API_KEY} y")], {"mod.API_KEY": API_KEY})
    assert found == ["mod.API_KEY in 'Captured stderr call'"]


@pytest.mark.timeout(60)
def test_tests_that_print_or_log_a_secret_fail_and_the_quiet_one_passes(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.reliability.secretscan", "-p",
         "no:cacheprovider", "-q", "-rf", "--rootdir", str(tmp_path), "-c",
         str(tmp_path / "pytest.ini"), str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert "3 failed, 1 passed" in out, out
    assert "tests.support.SECRET in 'Captured stdout call'" in out
    assert "test_sample.TOKEN in 'Captured log call'" in out
    assert "test_structlog_logs_the_key_material" in out
    # The report names the secrets; the values appear only in the echoed captured output.
    report = out.split("short test summary info")[-1]
    assert SECRET.removeprefix("whsec_") not in report
    assert "a-module-token-5678" not in report
