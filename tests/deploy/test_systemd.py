"""The systemd example agrees with the service: command, paths, secrets by reference."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.config.settings import Settings
from tests.deploy.deployfiles import SECRET_KEYS, is_under, secret_values, written_paths
from tests.support import SECRET, free_port

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "systemd" / "jobhook.service"
SYSTEMD_CONFIG = DEPLOY / "systemd" / "jobhook.toml"
SYSTEMD_ENV = DEPLOY / "systemd" / "jobhook.env.example"
SECRET_ENV = {"REDUCTO_WEBHOOK_SECRET": SECRET, "REDUCTO_API_KEY": "k", "JOBHOOK_ADMIN_TOKEN": "t"}


# systemd


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit as {section: {key: [values, in order]}}; keys may repeat."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if match := re.fullmatch(r"\[(.+)\]", line):
            current = sections.setdefault(match[1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return parse_unit(UNIT)["Service"]


@pytest.fixture(scope="module")
def systemd_settings() -> Settings:
    return load_settings(SYSTEMD_CONFIG, environ=SECRET_ENV)


def test_systemd_unit_starts_jobhook_serve_with_the_example_config(
    service: dict[str, list[str]],
) -> None:
    (exec_start,) = service["ExecStart"]
    assert "jobhook serve --config " in exec_start
    assert exec_start.split()[0].startswith("/"), "systemd needs an absolute path"
    assert exec_start.split("--config ")[1].split()[0] == f"/etc/jobhook/{SYSTEMD_CONFIG.name}"


def test_systemd_service_writes_only_inside_its_state_directory(
    service: dict[str, list[str]], systemd_settings: Settings
) -> None:
    assert service["ProtectSystem"] == ["strict"]  # everything else is read-only
    state_dir = f"/var/lib/{service['StateDirectory'][0]}"
    environment = dict(
        item.split("=", 1) for line in service["Environment"] for item in line.split()
    )
    assert environment["JOBHOOK_DATA_DIR"] == state_dir
    assert str(systemd_settings.data_dir) == state_dir
    for path in written_paths(systemd_settings):
        assert is_under(path, state_dir), f"{path} is read-only under ProtectSystem=strict"


def test_systemd_unit_is_hardened_and_stops_with_sigterm(
    service: dict[str, list[str]], systemd_settings: Settings
) -> None:
    assert service.get("DynamicUser") == ["yes"] or "User" in service
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["Restart"] == ["on-failure"]
    assert service["KillSignal"] == ["SIGTERM"]
    stop_timeout = float(service["TimeoutStopSec"][0].removesuffix("s"))
    assert stop_timeout > systemd_settings.server.shutdown_grace_seconds


def test_systemd_reload_sends_sighup_to_the_main_process(service: dict[str, list[str]]) -> None:
    """``systemctl reload jobhook`` (the docs' runbook) needs an ExecReload=; jobhook reloads
    its secrets on SIGHUP (tests/reliability/test_secret_rotation.py)."""
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]


def test_systemd_secrets_come_from_the_environment_file(service: dict[str, list[str]]) -> None:
    (env_file,) = service["EnvironmentFile"]
    assert env_file.lstrip("-") == "/etc/jobhook/jobhook.env"
    for line in service.get("Environment", []):
        assert not any(word in line.lower() for word in SECRET_KEYS), line
    provided = {
        line.split("=", 1)[0]
        for line in SYSTEMD_ENV.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    references = secret_values(tomllib.loads(SYSTEMD_CONFIG.read_text(encoding="utf-8")))
    assert references
    for reference in references:
        assert reference.startswith("env:"), reference
        assert reference.removeprefix("env:") in provided


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed (Debian's systemd package has it)")
    return found


def verify(text: str, directory: Path) -> str:
    """What ``systemd-analyze verify`` says about a unit reading ``text``, with its ExecStart
    program swapped for this environment's jobhook (verify wants it to exist); it exits 0 even
    for unknown keys and bad values, so its output is the verdict."""
    unit = directory / UNIT.name
    jobhook = Path(sys.executable).parent / "jobhook"
    unit.write_text(text.replace("/opt/jobhook/bin/jobhook", str(jobhook)), encoding="utf-8")
    proc = subprocess.run(
        [systemd_analyze(), "verify", "--man=no", str(unit)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return (proc.stdout + proc.stderr).strip()


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    assert verify(UNIT.read_text(encoding="utf-8"), tmp_path) == ""


def test_systemd_analyze_verify_reports_a_misspelt_setting(tmp_path: Path) -> None:
    """The check above can fail: verify names a key systemd does not know."""
    text = UNIT.read_text(encoding="utf-8").replace("ProtectHome=yes", "ProtectHomes=yes")
    assert "Unknown key 'ProtectHomes'" in verify(text, tmp_path)


def test_systemd_config_passes_check_config_with_the_env_files_secrets(tmp_path: Path) -> None:
    # The unit's StateDirectory /var/lib/jobhook is a temporary directory here; the port, which
    # check-config binds, a free one.
    state = tmp_path / "state"
    config = tmp_path / SYSTEMD_CONFIG.name
    config.write_text(
        SYSTEMD_CONFIG.read_text(encoding="utf-8").replace("/var/lib/jobhook", str(state)), "utf-8"
    )
    lines = SYSTEMD_ENV.read_text(encoding="utf-8").splitlines()
    env = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    env |= {"REDUCTO_WEBHOOK_SECRET": SECRET, "JOBHOOK_DATA_DIR": str(state)}
    env["JOBHOOK_SERVER__PORT"] = str(free_port())
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
