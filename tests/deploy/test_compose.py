"""deploy/compose: the Compose file read as YAML (``docker compose config`` needs an engine),
its jobhook config accepted by ``check-config`` with the environment the file sets, and its
Prometheus config checked by ``promtool`` with the mounts the file gives it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from receiver.cli.main import main
from tests.deploy.dockerfile import REPO, image_env
from tests.support import SECRET, free_port

COMPOSE_DIR = REPO / "deploy" / "compose"
COMPOSE = COMPOSE_DIR / "compose.yaml"
ENV_EXAMPLE = COMPOSE_DIR / ".env.example"
# ${NAME}, ${NAME:-default}, ${NAME:?error}: compose's interpolation forms.
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Z_][A-Z0-9_]*)(?::?[-?](?P<rest>[^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def env_example() -> dict[str, str]:
    lines = ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's substitution of ``${NAME...}`` from ``env``; a missing name fails the test."""

    def one(match: re.Match[str]) -> str:
        assert match["name"] in env, f"{match['name']} is not in {ENV_EXAMPLE.name}"
        return env[match["name"]]

    return INTERPOLATION.sub(one, value)


def bind_mounts(service: dict[str, Any]) -> dict[PurePosixPath, Path]:
    """Container path -> host path of a service's ``./file:/path[:ro]`` volumes."""
    mounts: dict[PurePosixPath, Path] = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            mounts[PurePosixPath(target)] = (COMPOSE_DIR / source).resolve()
    return mounts


def named_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Volume name -> container path of a service's named volumes."""
    pairs = (volume.split(":")[:2] for volume in service.get("volumes", []))
    return {source: target for source, target in pairs if not source.startswith(".")}


def test_compose_runs_jobhook_postgres_and_prometheus_each_with_a_healthcheck(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    assert set(services) == {"jobhook", "postgres", "prometheus"}
    for name, service in services.items():
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD", name  # exec form: no shell needed
        assert len(test) > 1, name
        assert service["restart"] == "unless-stopped", name
        assert ":" in service["image"], name
        assert not service["image"].endswith(":latest"), name
    used = {name for service in services.values() for name in named_mounts(service)}
    assert used == set(compose["volumes"]), "every named volume declared and used"
    for service in services.values():
        for source in bind_mounts(service).values():
            assert source.is_file(), f"{source} is mounted but does not exist"


def test_jobhook_is_built_from_this_repository_and_waits_for_a_healthy_postgres(
    services: dict[str, dict[str, Any]],
) -> None:
    jobhook = services["jobhook"]
    assert (COMPOSE_DIR / jobhook["build"]["context"]).resolve() == REPO
    assert (REPO / "Dockerfile").is_file()
    assert jobhook["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "/readyz" in jobhook["healthcheck"]["test"][-1]
    assert jobhook["read_only"] is True
    assert jobhook["tmpfs"] == ["/tmp"]
    assert named_mounts(jobhook)["jobhook-data"] == image_env()["JOBHOOK_DATA_DIR"]
    published = jobhook["ports"][0].rsplit(":", 1)[1]
    assert published == image_env()["JOBHOOK_SERVER__PORT"]
    stop = float(jobhook["stop_grace_period"].removesuffix("s"))
    assert stop > 10  # server.shutdown_grace_seconds


def jobhook_config(services: dict[str, dict[str, Any]]) -> tuple[PurePosixPath, Path]:
    """The path ``serve --config`` names in the container and the file mounted there."""
    command = services["jobhook"]["command"]
    path = PurePosixPath(command[command.index("--config") + 1])
    return path, bind_mounts(services["jobhook"])[path]


def test_jobhook_config_is_accepted_by_check_config_with_the_composed_environment(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    _, config = jobhook_config(services)
    values = {**env_example(), "REDUCTO_WEBHOOK_SECRET": SECRET}
    environment = {
        name: interpolate(value, values)
        for name, value in services["jobhook"]["environment"].items()
    }
    image = image_env()
    # The data volume is /data in the container: here a temporary directory stands for it, and
    # a free port for the container's own 8000 (the port check binds it on this machine).
    data = tmp_path / "data"
    text = config.read_text(encoding="utf-8").replace('"/data', f'"{data}')
    local = tmp_path / "jobhook.toml"
    local.write_text(text, encoding="utf-8")
    env = {
        **{k: v for k, v in image.items() if k.startswith("JOBHOOK_")},
        **environment,
        "JOBHOOK_DATA_DIR": str(data),
        "JOBHOOK_SERVER__PORT": str(free_port()),
    }
    result = CliRunner().invoke(main, ["check-config", "--config", str(local)], env=env)
    assert result.exit_code == 0, result.output
    assert "1 source(s), 1 handler(s), store postgresql" in result.output
    settings = tomllib.loads(config.read_text(encoding="utf-8"))
    assert settings["data_dir"] == image["JOBHOOK_DATA_DIR"]
    assert settings["server"]["port"] == int(image["JOBHOOK_SERVER__PORT"])
    host = settings["store"]["url"].split("@", 1)[1].split(":")[0]
    assert host in services, "the store URL names the compose service"
    assert ":" not in settings["store"]["url"].split("//", 1)[1].split("@")[0], "no password"


def test_every_secret_comes_from_env_and_the_env_example_names_them_all(
    services: dict[str, dict[str, Any]],
) -> None:
    _, config = jobhook_config(services)
    names = set(INTERPOLATION.findall(COMPOSE.read_text(encoding="utf-8")))
    required = {name for name, rest in names}
    assert required == set(env_example()), ".env.example names exactly what compose.yaml reads"
    for name, _ in names:
        assert "${" + name + ":?" in COMPOSE.read_text(encoding="utf-8"), f"{name} not required"
    text = config.read_text(encoding="utf-8")
    for reference in re.findall(r'"env:([A-Z_]+)"', text):
        assert reference in services["jobhook"]["environment"], reference
    assert not re.search(r"(secret|token|password|key)\s*=\s*\"(?!env:)", text, re.I)


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("JOBHOOK_REQUIRE_SERVICES") == "1":
            pytest.fail("promtool is not installed (.ci/run installs Debian's prometheus)")
        pytest.skip("promtool is not installed (Debian's prometheus package has it)")
    return found


def test_prometheus_config_passes_promtool_with_the_alert_rules_mounted(
    services: dict[str, dict[str, Any]], tmp_path: Path, promtool: str
) -> None:
    prometheus = services["prometheus"]
    flag = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    config_path = PurePosixPath(flag.split("=", 1)[1])
    mounts = bind_mounts(prometheus)
    for target, source in mounts.items():  # the container's files, at their paths under tmp
        local = tmp_path / target.relative_to("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, local)
    assert (
        mounts[config_path.parent / "alerts.yml"] == REPO / "deploy" / "prometheus" / "alerts.yml"
    )
    proc = subprocess.run(
        [promtool, "check", "config", str(tmp_path / config_path.relative_to("/"))],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout
    assert "rules found" in proc.stdout


def test_prometheus_loads_the_alert_rules_and_scrapes_jobhooks_metrics(
    services: dict[str, dict[str, Any]],
) -> None:
    mounts = bind_mounts(services["prometheus"])
    config_file = next(
        source for target, source in mounts.items() if target.name == "prometheus.yml"
    )
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    assert host == "jobhook"
    assert host in services
    assert port == image_env()["JOBHOOK_SERVER__PORT"]
