"""The Kubernetes kit (deploy/kubernetes): each overlay rendered by ``kubectl kustomize``,
checked against the API's schemas (kubernetes-validate), by a policy scanner (checkov, from its
own virtual environment) and against the service: config, ports, probes, volumes, secrets.

Needs kubectl with kustomize v5 (the machine's) and checkov (``JOBHOOK_CHECKOV``, or
``.venv-checkov`` which .ci/run makes); skips naming what is missing, except under
JOBHOOK_REQUIRE_SERVICES=1, where it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

import kubernetes_validate
import pytest
import yaml

from receiver.config.load import load_settings
from receiver.config.settings import Settings
from tests.deploy.deployfiles import is_under, secret_values, written_paths
from tests.deploy.dockerfile import REPO, image_env
from tests.support import SECRET

KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAYS = ("sidecar", "postgres")
KUBERNETES_VERSION = "1.30.0"  # the oldest release the kit is meant for; schemas are bundled
SECRETS_MOUNT = "/run/secrets/jobhook"


def _unusable(reason: str) -> NoReturn:
    if os.environ.get("JOBHOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (JOBHOOK_REQUIRE_SERVICES=1: the Kubernetes checks must run)")
    pytest.skip(reason)


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        _unusable("kubectl is not installed, so the kustomize overlays cannot be rendered")
    version = subprocess.run(
        [found, "version", "--client", "--output=json"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    kustomize = json.loads(version.stdout or "{}").get("kustomizeVersion", "v0")
    if int(kustomize.lstrip("v").split(".")[0]) < 5:
        _unusable(f"kubectl's kustomize is {kustomize}; the overlays need v5 (labels, patches)")
    return found


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


RENDERED: dict[str, list[dict[str, Any]]] = {}


def render(overlay: str) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of the overlay, once per run."""
    if overlay not in RENDERED:
        proc = subprocess.run(
            [kubectl(), "kustomize", str(KUBERNETES / "overlays" / overlay)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        RENDERED[overlay] = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    return RENDERED[overlay]


def one(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in documents if doc["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def documents(overlay: str) -> list[dict[str, Any]]:
    return render(overlay)


@pytest.fixture(scope="module")
def deployment(documents: list[dict[str, Any]]) -> dict[str, Any]:
    return one(documents, "Deployment")


@pytest.fixture(scope="module")
def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def container(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["containers"] if c["name"] == "jobhook")
    return found


@pytest.fixture(scope="module")
def config_path(container: dict[str, Any]) -> PurePosixPath:
    """The path ``serve --config`` names inside the container."""
    args = container["args"]
    return PurePosixPath(args[args.index("--config") + 1])


@pytest.fixture(scope="module")
def config_text(documents: list[dict[str, Any]], config_path: PurePosixPath) -> str:
    text: str = one(documents, "ConfigMap")["data"][config_path.name]
    return text


def created_secret_keys(overlay: str) -> set[str]:
    """The keys the overlay's ``kubectl create secret generic`` instructions give the Secret."""
    text = (KUBERNETES / "overlays" / overlay / "kustomization.yaml").read_text(encoding="utf-8")
    return set(re.findall(r"--from-literal=([a-z0-9-]+)=", text))


@pytest.fixture(scope="module")
def settings(
    overlay: str,
    config_text: str,
    container: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Settings:
    """The settings jobhook runs with: the ConfigMap's file, the Secret's keys as files (the
    mount moved into a temporary directory) and the image's and the container's environment."""
    root = tmp_path_factory.mktemp(f"k8s-{overlay}")
    secrets = root / "secrets"
    secrets.mkdir()
    for key in created_secret_keys(overlay):
        (secrets / key).write_text(SECRET if "webhook" in key else f"{key}-value", encoding="utf-8")
    config = root / "jobhook.toml"
    config.write_text(config_text.replace(f"file:{SECRETS_MOUNT}/", f"file:{secrets}/"), "utf-8")
    environ = {**image_env(), **{e["name"]: "from-secret" for e in container.get("env", [])}}
    return load_settings(config, environ=environ)


def mount(container: dict[str, Any], path: str) -> dict[str, Any]:
    found = [m for m in container["volumeMounts"] if m["mountPath"] == path]
    assert found, f"{container['name']} mounts nothing at {path}"
    return found[0]


def volume_at(pod: dict[str, Any], container: dict[str, Any], path: str) -> dict[str, Any]:
    """The pod volume that ``container`` mounts at ``path``."""
    name = mount(container, path)["name"]
    volume: dict[str, Any] = next(v for v in pod["volumes"] if v["name"] == name)
    return volume


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    number: int = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    return number


def test_every_rendered_resource_passes_the_kubernetes_schemas(
    documents: list[dict[str, Any]],
) -> None:
    for document in documents:
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{document['kind']} {document['metadata']['name']}: {exc.message}")


def test_a_misspelt_field_fails_the_schema_check(documents: list[dict[str, Any]]) -> None:
    """The check above can fail: a typo in a probe is refused in strict mode."""
    broken = json.loads(json.dumps(one(documents, "Deployment")))
    jobhook = next(c for c in broken["spec"]["template"]["spec"]["containers"]
                   if c["name"] == "jobhook")  # fmt: skip
    jobhook["readinessProbe"]["periodSecond"] = 5
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_overlay_holds_the_resources_of_its_store(
    overlay: str, documents: list[dict[str, Any]], deployment: dict[str, Any], settings: Settings
) -> None:
    kinds = sorted(doc["kind"] for doc in documents)
    assert kinds == sorted(
        ["Namespace", "ConfigMap", "Service", "PersistentVolumeClaim", "Deployment",
         "PodDisruptionBudget", "NetworkPolicy"]
    )  # fmt: skip
    assert "Secret" not in kinds  # created by the operator, never written in the kit
    assert {doc["metadata"].get("namespace", "jobhook") for doc in documents} == {"jobhook"}
    claim = one(documents, "PersistentVolumeClaim")["spec"]
    if overlay == "sidecar":
        assert settings.store.url.startswith("sqlite:///")
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"]["type"] == "Recreate"  # one SQLite writer
        assert claim["accessModes"] == ["ReadWriteOnce"]
    else:
        assert settings.store.url.startswith("postgresql://")
        assert deployment["spec"]["replicas"] > 1
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        # The replica that downloads a result is not always the one that delivers it.
        assert claim["accessModes"] == ["ReadWriteMany"]


def test_config_is_the_generated_configmap_mounted_where_serve_reads_it(
    documents: list[dict[str, Any]],
    pod: dict[str, Any],
    container: dict[str, Any],
    config_path: PurePosixPath,
) -> None:
    volume = volume_at(pod, container, str(config_path.parent))
    assert volume["configMap"]["name"] == one(documents, "ConfigMap")["metadata"]["name"]
    assert mount(container, str(config_path.parent))["readOnly"] is True


def test_config_agrees_with_the_images_environment(config_text: str, settings: Settings) -> None:
    # The image's JOBHOOK_* variables win over the file: the file must not say otherwise.
    config = tomllib.loads(config_text)
    assert config["data_dir"] == str(settings.data_dir) == image_env()["JOBHOOK_DATA_DIR"]
    assert config["server"]["port"] == settings.server.port
    assert settings.server.host == "0.0.0.0"


def test_probes_use_healthz_and_readyz_on_the_served_port(
    container: dict[str, Any], settings: Settings
) -> None:
    expected = {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    for probe, path in expected.items():
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        assert port_number(container, get["port"]) == settings.server.port, probe


def test_service_networkpolicy_and_budget_select_the_pods(
    documents: list[dict[str, Any]], deployment: dict[str, Any], container: dict[str, Any],
    settings: Settings,
) -> None:  # fmt: skip
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(documents, "Service")["spec"]
    assert service["selector"].items() <= labels.items()
    assert port_number(container, service["ports"][0]["targetPort"]) == settings.server.port
    budget = one(documents, "PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert budget["maxUnavailable"] == 1  # a drain may proceed even with one replica
    policy = one(documents, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = policy["ingress"]
    assert [port_number(container, p["port"]) for p in rule["ports"]] == [settings.server.port]


def test_every_container_has_requests_and_a_memory_limit(pod: dict[str, Any]) -> None:
    for each in pod["containers"]:
        assert {"cpu", "memory"} <= each["resources"]["requests"].keys(), each["name"]
        assert "memory" in each["resources"]["limits"], each["name"]


def test_runs_non_root_on_a_read_only_root_writing_only_its_volumes(
    pod: dict[str, Any], container: dict[str, Any], settings: Settings
) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["automountServiceAccountToken"] is False
    for each in pod["containers"]:
        assert each["securityContext"]["readOnlyRootFilesystem"] is True, each["name"]
        assert each["securityContext"]["allowPrivilegeEscalation"] is False, each["name"]
        assert each["securityContext"]["capabilities"]["drop"] == ["ALL"], each["name"]
    assert "emptyDir" in volume_at(pod, container, "/tmp")
    data = volume_at(pod, container, str(settings.data_dir))
    assert "persistentVolumeClaim" in data
    assert not mount(container, str(settings.data_dir)).get("readOnly")
    for path in written_paths(settings):
        assert is_under(path, str(settings.data_dir)), f"{path} is on the read-only root"


def test_secrets_are_the_secrets_files_named_in_the_config(
    overlay: str, pod: dict[str, Any], container: dict[str, Any], config_text: str
) -> None:
    volume = volume_at(pod, container, SECRETS_MOUNT)
    assert volume["secret"]["secretName"] == "jobhook-secrets"
    # No subPath: an edited Secret reaches the mounted files.
    assert "subPath" not in mount(container, SECRETS_MOUNT)
    references = secret_values(tomllib.loads(config_text))
    assert references
    keys = created_secret_keys(overlay)
    for reference in references:
        assert reference.startswith(f"file:{SECRETS_MOUNT}/"), reference
        assert reference.removeprefix(f"file:{SECRETS_MOUNT}/") in keys, reference
    for each in pod["containers"]:
        for env in each.get("env", []):
            assert "value" not in env or not any(
                word in env["name"].lower() for word in ("secret", "password")
            ), f"{env['name']} is inlined"
            if "valueFrom" in env:
                assert env["valueFrom"]["secretKeyRef"]["key"] in keys, env["name"]


def checkov() -> str:
    found = os.environ.get("JOBHOOK_CHECKOV") or str(REPO / ".venv-checkov" / "bin" / "checkov")
    if not Path(found).is_file():
        _unusable(
            f"checkov is not installed at {found} (.ci/run installs requirements/checkov.txt)"
        )
    return found


@pytest.mark.slow
def test_policy_scan_finds_nothing_that_is_not_skipped_with_a_reason(tmp_path: Path) -> None:
    for overlay in OVERLAYS:
        (tmp_path / f"{overlay}.yaml").write_text(yaml.safe_dump_all(render(overlay)), "utf-8")
    proc = subprocess.run(
        [checkov(), "--directory", str(tmp_path), "--framework", "kubernetes",
         "--skip-download", "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
        # Offline: no policy metadata download, no mapping from the platform, no version check.
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"},
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    results = report["results"]
    failed = [f"{c['check_id']} {c['resource']}" for c in results["failed_checks"]]
    assert not failed, "\n".join(failed)
    assert results["passed_checks"], "checkov checked nothing"
    # A skip is an annotation ``checkov.io/skipN: CHECK=reason`` on the resource it concerns.
    reasons = {
        value.split("=", 1)[0]: value.split("=", 1)[1]
        for overlay in OVERLAYS
        for doc in render(overlay)
        for key, value in doc["metadata"].get("annotations", {}).items()
        if key.startswith("checkov.io/skip")
    }
    for check in results["skipped_checks"]:
        reason = reasons.get(check["check_id"], "")
        assert len(reason) > 40, f"{check['check_id']} is skipped without a reason"
