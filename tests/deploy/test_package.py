"""jobhook installed from its wheel, outside a checkout: serve, check-config, console, schema.

The wheel goes into a new virtual environment holding requirements/runtime.txt (hash-checked,
as the image installs it) and nothing else; every command runs from a temporary directory with
a clean environment, so nothing of the repository is on sys.path.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import sqlite3
import subprocess
import tarfile
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS
from tests.deploy.conftest import uv
from tests.deploy.dockerfile import REPO
from tests.support import SECRET, free_port, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.deploy.conftest import Dist

pytestmark = pytest.mark.package

ADMIN_TOKEN = "package-test-admin-token"
STATIC = REPO / "receiver" / "console" / "static"


def install(venv: Path, *wheels: Path) -> None:
    """A new virtual environment with the pinned runtime dependencies, then ``wheels`` one
    after the other, each without dependencies."""
    runtime = REPO / "requirements" / "runtime.txt"
    for args in (
        ["venv", "--quiet", str(venv)],
        ["pip", "sync", "--quiet", "--python", str(venv), "--require-hashes", str(runtime)],
        *(["pip", "install", "--quiet", "--python", str(venv), "--no-deps", str(wheel)]
          for wheel in wheels),
    ):  # fmt: skip
        proc = subprocess.run(
            [uv(), *args], capture_output=True, text=True, timeout=180, check=False
        )
        assert proc.returncode == 0, f"uv {' '.join(args[:2])}: {proc.stderr}"


def clean_env(**extra: str) -> dict[str, str]:
    """PATH and HOME only (no PYTHONPATH, no virtual environment), plus ``extra``."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    return {**keep, **extra}


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("installed") / "venv"
    install(path, dist.wheel)
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty directory to run from, so the current directory holds no jobhook code."""
    path = tmp_path / "run"
    path.mkdir()
    return path


def jobhook(
    venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "jobhook"), *args],
        cwd=cwd, env=env or clean_env(), capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip


def write_config(workdir: Path, port: int) -> Path:
    path = workdir / "jobhook.toml"
    path.write_text(
        f"""
data_dir = "{workdir / "data"}"

[server]
port = {port}
admin_token = "env:JOBHOOK_ADMIN_TOKEN"

[sources.reducto]
provider = "reducto"
secrets = ["env:REDUCTO_WEBHOOK_SECRET"]

[[handlers]]
name = "archive"
type = "file"
dir = "{workdir / "out"}"
""",
        encoding="utf-8",
    )
    return path


SECRETS = {"REDUCTO_WEBHOOK_SECRET": SECRET, "JOBHOOK_ADMIN_TOKEN": ADMIN_TOKEN}


def test_sdist_carries_what_the_wheel_is_built_from(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "receiver/__init__.py", "handlers/__init__.py"} <= names
    assert not {name for name in names if name.startswith((".venv", "data/", "site/"))}


def test_wheel_holds_the_console_assets_templates_and_migrations(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("jobhook-0.1.0.dist-info/entry_points.txt").decode()
    for asset in STATIC.iterdir():
        assert f"receiver/console/static/{asset.name}" in names
    assert "receiver/console/templates/login.html" in names
    assert {"receiver/store/sqlite/migrations.py", "receiver/store/postgres/migrations.py"} <= names
    assert "jobhook = receiver.cli.main:main" in entry_points


def test_check_config_accepts_a_config_from_the_installed_package(
    venv: Path, workdir: Path
) -> None:
    config = write_config(workdir, free_port())
    proc = jobhook(venv, "check-config", "--config", str(config), cwd=workdir,
                   env=clean_env(**SECRETS))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "configuration OK: 1 source(s), 1 handler(s), store sqlite" in proc.stdout


def test_check_config_names_a_missing_secret_from_the_installed_package(
    venv: Path, workdir: Path
) -> None:
    config = write_config(workdir, free_port())
    proc = jobhook(venv, "check-config", "--config", str(config), cwd=workdir)
    assert proc.returncode == 2
    assert "REDUCTO_WEBHOOK_SECRET" in proc.stderr


@pytest.fixture(scope="module")
def served_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("served")


@pytest.fixture(scope="module")
def served(venv: Path, served_in: Path) -> Iterator[str]:
    """``jobhook serve`` from the installed package on a fresh SQLite file; yields its URL."""
    workdir = served_in
    port = free_port()
    config = write_config(workdir, port)
    process = subprocess.Popen(
        [str(venv / "bin" / "jobhook"), "serve", "--config", str(config)],
        cwd=workdir, env=clean_env(**SECRETS), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()[0].decode()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2, trust_env=False).status_code == 200:
                    break
            assert time.monotonic() < deadline, "/readyz did not answer 200 within 30 s"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode()
    assert process.returncode == 0, output[-3000:]


def test_serve_from_the_installed_package_accepts_a_signed_webhook(served: str) -> None:
    body = reducto_body("job-wheel")
    response = httpx.post(f"{served}/webhooks/reducto", content=body, trust_env=False,
                          headers=signed_headers(body, msg_id="msg_wheel"))  # fmt: skip
    assert (response.status_code, response.json()["status"]) == (200, "accepted")
    forged = httpx.post(f"{served}/webhooks/reducto", content=body, trust_env=False,
                        headers=signed_headers(body, secret="whsec_" + "A" * 32))  # fmt: skip
    assert forged.status_code == 401


def test_serve_creates_the_schema_on_a_fresh_sqlite_file(served: str, served_in: Path) -> None:
    with contextlib.closing(sqlite3.connect(served_in / "data" / "jobhook.db")) as db:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert version == len(SQLITE_MIGRATIONS)
    assert {"jobs", "deliveries"} <= tables


def test_console_login_page_and_its_assets_come_from_the_wheel(served: str) -> None:
    css = (STATIC / "console.css").read_text(encoding="utf-8")
    with httpx.Client(base_url=served, trust_env=False) as browser:
        page = browser.get("/ui/login")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert '<form method="post" action="/ui/login">' in page.text
        assert css in page.text  # the login page inlines the stylesheet
        login = browser.post("/ui/login", data={"token": ADMIN_TOKEN, "next": "/ui/jobs"})
        assert (login.status_code, login.headers["location"]) == (303, "/ui/jobs")
        jobs = browser.get("/ui/jobs")
        assert jobs.status_code == 200
        assets = re.findall(r'(?:href|src)="(/ui/static/[^"]+)"', jobs.text)
        assert {Path(asset).name for asset in assets} == {p.name for p in STATIC.iterdir()}
        for asset in assets:
            response = browser.get(asset)
            assert response.status_code == 200, asset
            assert response.content == (STATIC / Path(asset).name).read_bytes()


def python(venv: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_import_jobhook_loads_nothing_of_the_service_until_a_name_is_used(
    venv: Path, workdir: Path
) -> None:
    code = """
import sys
import jobhook
assert not [name for name in sys.modules if name.split(".")[0] in ("receiver", "handlers")]
try:
    jobhook._private
except AttributeError:
    print("no private names")
assert "receiver" not in sys.modules
"""
    proc = python(venv, code, workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no private names"


def test_import_jobhook_gives_the_clients_names(venv: Path, workdir: Path) -> None:
    if not (REPO / "receiver" / "client" / "__init__.py").is_file():
        pytest.skip("receiver/client (the Python client) is not in this checkout")
    code = """
import jobhook
import receiver.client as client
assert jobhook.__all__ == client.__all__, (jobhook.__all__, client.__all__)
for name in client.__all__:
    assert getattr(jobhook, name) is getattr(client, name), name
assert set(client.__all__) <= set(dir(jobhook))
try:
    jobhook.not_a_client_name
except AttributeError as exc:
    print(exc)
"""
    proc = python(venv, code, workdir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'jobhook' has no attribute 'not_a_client_name'"


def _digest(data: bytes) -> str:
    """A RECORD file's hash: urlsafe base64 of the sha256, without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _other_wheel(directory: Path, package: str) -> Path:
    """A wheel of another distribution that also installs the top-level package ``package``."""
    # Importing it fails, so the check must come before anything imports the package.
    files = {f"{package}/__init__.py": b'raise ImportError("not jobhook\'s")\n'}
    info = "other_package-1.0.dist-info"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: other-package\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
    files[f"{info}/top_level.txt"] = f"{package}\n".encode()
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    path = directory / "other_package-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_another_distributions_handlers_package_stops_serve_with_the_cause(
    dist: Dist, tmp_path: Path, workdir: Path
) -> None:
    venv = tmp_path / "venv"
    install(venv, dist.wheel, _other_wheel(tmp_path, "handlers"))
    for command in ("serve", "check-config"):
        proc = jobhook(venv, command, cwd=workdir, env=clean_env(**SECRETS))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "handlers/__init__.py: changed since jobhook was installed" in proc.stderr
        assert "install jobhook into an environment of its own" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_handlers_directory_on_sys_path_stops_check_config_with_the_cause(
    venv: Path, workdir: Path
) -> None:
    shadow = workdir / "shadow" / "handlers"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")
    env = clean_env(PYTHONPATH=str(shadow.parent), **SECRETS)
    proc = jobhook(venv, "check-config", cwd=workdir, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"handlers: imported from {shadow.resolve() / '__init__.py'}, not from" in proc.stderr
