"""The deployment examples agree with the service: ports, probes, paths, secrets by reference."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from receiver.config.load import load_settings
from receiver.config.settings import Settings
from tests.deploy.dockerfile import image_env
from tests.support import SECRET

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "kubernetes" / "jobhook-sidecar.yaml"
UNIT = DEPLOY / "systemd" / "jobhook.service"
SYSTEMD_CONFIG = DEPLOY / "systemd" / "jobhook.toml"
SYSTEMD_ENV = DEPLOY / "systemd" / "jobhook.env.example"
SECRET_ENV = {"REDUCTO_WEBHOOK_SECRET": SECRET, "REDUCTO_API_KEY": "k", "JOBHOOK_ADMIN_TOKEN": "t"}
SECRET_KEYS = ("secret", "token", "key", "password")


def secret_values(config: Any) -> list[str]:
    """Every value in a config whose key names a secret (``secrets``, ``api_key``, ...)."""
    found: list[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            if any(word in key for word in SECRET_KEYS):
                found += value if isinstance(value, list) else [value]
            else:
                found += secret_values(value)
    elif isinstance(config, list):
        for item in config:
            found += secret_values(item)
    return found


def written_paths(settings: Settings) -> list[PurePosixPath]:
    """Where the service writes: its database, its results and every handler ``dir``."""
    paths = [PurePosixPath(settings.store.url.removeprefix("sqlite:///")).parent]
    paths.append(PurePosixPath(settings.results.dir))
    paths += [PurePosixPath(h.options["dir"]) for h in settings.handlers if "dir" in h.options]
    return paths


def is_under(path: PurePosixPath, root: str) -> bool:
    return path == PurePosixPath(root) or PurePosixPath(root) in path.parents


# Kubernetes


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    docs = [doc for doc in yaml.safe_load_all(K8S.read_text(encoding="utf-8")) if doc]
    return {doc["kind"]: doc for doc in docs}


@pytest.fixture(scope="module")
def pod(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = documents["Deployment"]["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == "jobhook")
    return container


@pytest.fixture(scope="module")
def k8s_config(sidecar: dict[str, Any]) -> PurePosixPath:
    """The path ``serve --config`` names inside the container."""
    args = sidecar["args"]
    return PurePosixPath(args[args.index("--config") + 1])


@pytest.fixture(scope="module")
def k8s_settings(
    documents: dict[str, dict[str, Any]],
    k8s_config: PurePosixPath,
    tmp_path_factory: pytest.TempPathFactory,
) -> Settings:
    """The settings the sidecar runs with: the ConfigMap's file plus the image's environment."""
    local = tmp_path_factory.mktemp("k8s") / k8s_config.name
    local.write_text(documents["ConfigMap"]["data"][k8s_config.name], encoding="utf-8")
    return load_settings(local, environ={**image_env(), **SECRET_ENV})


def test_sidecar_config_agrees_with_the_images_environment(
    documents: dict[str, dict[str, Any]], k8s_config: PurePosixPath, k8s_settings: Settings
) -> None:
    # The image's JOBHOOK_* variables win over the file: the file must not say otherwise.
    config = tomllib.loads(documents["ConfigMap"]["data"][k8s_config.name])
    assert config.get("data_dir", str(k8s_settings.data_dir)) == str(k8s_settings.data_dir)
    assert config.get("server", {}).get("port", k8s_settings.server.port) == (
        k8s_settings.server.port
    )


def mount_of(container: dict[str, Any], volume: str) -> dict[str, Any]:
    mount: dict[str, Any] = next(m for m in container["volumeMounts"] if m["name"] == volume)
    return mount


def volume_at(pod: dict[str, Any], container: dict[str, Any], path: str) -> dict[str, Any]:
    """The pod volume that ``container`` mounts at ``path``."""
    names = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == path]
    assert names, f"{container['name']} mounts nothing at {path}"
    volume: dict[str, Any] = next(v for v in pod["volumes"] if v["name"] == names[0])
    return volume


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    number: int = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    return number


def test_kubernetes_example_holds_configmap_volume_deployment_and_service(
    documents: dict[str, dict[str, Any]],
) -> None:
    assert set(documents) == {"ConfigMap", "PersistentVolumeClaim", "Deployment", "Service"}
    assert documents["Deployment"]["spec"]["strategy"]["type"] == "Recreate"  # one SQLite writer


def test_sidecar_config_is_the_configmap_mounted_where_serve_reads_it(
    documents: dict[str, dict[str, Any]],
    pod: dict[str, Any],
    sidecar: dict[str, Any],
    k8s_config: PurePosixPath,
) -> None:
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == documents["ConfigMap"]["metadata"]["name"]
    assert mount_of(sidecar, volume["name"])["mountPath"] == str(k8s_config.parent)
    assert k8s_config.name in documents["ConfigMap"]["data"]


def test_sidecar_probes_use_healthz_and_readyz_on_the_served_port(
    sidecar: dict[str, Any], k8s_settings: Settings
) -> None:
    liveness = sidecar["livenessProbe"]["httpGet"]
    readiness = sidecar["readinessProbe"]["httpGet"]
    assert liveness["path"] == "/healthz"
    assert readiness["path"] == "/readyz"
    assert port_number(sidecar, liveness["port"]) == k8s_settings.server.port
    assert port_number(sidecar, readiness["port"]) == k8s_settings.server.port


def test_service_targets_the_sidecars_port(
    documents: dict[str, dict[str, Any]],
    pod: dict[str, Any],
    sidecar: dict[str, Any],
    k8s_settings: Settings,
) -> None:
    service = documents["Service"]["spec"]
    labels = documents["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert service["selector"].items() <= labels.items()
    assert port_number(sidecar, service["ports"][0]["targetPort"]) == k8s_settings.server.port
    assert k8s_settings.server.host == "0.0.0.0"


def test_sidecar_data_volume_is_mounted_at_the_configured_data_dir(
    pod: dict[str, Any], sidecar: dict[str, Any], k8s_settings: Settings
) -> None:
    data = volume_at(pod, sidecar, str(k8s_settings.data_dir))
    assert "persistentVolumeClaim" in data or "emptyDir" in data
    assert not mount_of(sidecar, data["name"]).get("readOnly")
    for path in written_paths(k8s_settings):
        assert is_under(path, str(k8s_settings.data_dir)), f"{path} is outside the data volume"
    pipeline = next(c for c in pod["containers"] if c["name"] != "jobhook")
    assert any(m["name"] == data["name"] for m in pipeline["volumeMounts"])


def test_sidecar_runs_non_root_on_a_read_only_root_with_a_writable_tmp(
    pod: dict[str, Any], sidecar: dict[str, Any]
) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert sidecar["securityContext"]["allowPrivilegeEscalation"] is False
    assert "emptyDir" in volume_at(pod, sidecar, "/tmp")


def test_kubernetes_secrets_are_referenced_never_inlined(
    documents: dict[str, dict[str, Any]], pod: dict[str, Any], k8s_config: PurePosixPath
) -> None:
    assert "Secret" not in documents
    config = tomllib.loads(documents["ConfigMap"]["data"][k8s_config.name])
    from_secrets = {
        env["name"]
        for container in pod["containers"]
        for env in container.get("env", [])
        if "secretKeyRef" in env.get("valueFrom", {})
    }
    for container in pod["containers"]:
        for env in container.get("env", []):
            if any(word in env["name"].lower() for word in SECRET_KEYS):
                assert "value" not in env, f"{env['name']} is inlined"
    references = secret_values(config)
    assert references
    for reference in references:
        assert reference.startswith("env:"), reference
        assert reference.removeprefix("env:") in from_secrets


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
