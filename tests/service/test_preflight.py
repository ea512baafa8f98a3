"""check-config and serve share one preflight: what one refuses the other refuses with the same
lines (``key: what is wrong; how to fix it``), exit code 2 and no traceback; what check-config
accepts, serve starts.

``serve`` runs as a real process (``python -m receiver serve``). The read-only results and data
directories are a tmpfs remounted read-only when the tests run as root (root ignores a directory's
mode bits), else a directory of mode 0o500.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from tests.reliability import mounts
from tests.support import SECRET, free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[2]
PUBLIC_KEY = "whpk_" + "A" * 43 + "="
SOURCE = f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n'
FILES = '[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp}/out"\n'


@dataclass(frozen=True)
class Case:
    """A broken configuration and the one line both commands must print for it."""

    id: str
    expected: str
    top: str = ""
    data_dir: str = "{tmp}/data"
    port: str = "{port}"
    server: str = ""
    tables: str = ""
    source: str = SOURCE
    handlers: str = FILES
    env: dict[str, str] = field(default_factory=dict)

    def text(self, **values: object) -> str:
        return (
            f'data_dir = "{self.data_dir}"\n{self.top}[server]\nport = {self.port}\n{self.server}'
            f"{self.tables}{self.source}{self.handlers}"
        ).format(**values)


CASES = [
    Case("port-string", "server.port: must be a valid integer", port='"eighty"'),
    Case("port-range", "server.port: must be less than or equal to 65535", port="70000"),
    Case("unknown-server-key", "server.prot: unknown key; did you mean 'port'?",
         server="prot = 1\n"),
    Case("body-bytes-zero", "server.max_body_bytes: must be greater than 0",
         server="max_body_bytes = 0\n"),
    Case("timeout-text", "server.body_timeout_seconds: must be a valid number",
         server='body_timeout_seconds = "fast"\n'),
    Case("host-not-here", "server.host: '192.0.2.1' is not an address of this machine",
         server='host = "192.0.2.1"\n'),
    Case("port-in-use", "server.port: 127.0.0.1:{busy} is already in use by another process; "
         "pick a free one with --port or JOBHOOK_SERVER__PORT"),
    Case("port-env-text", "JOBHOOK_SERVER__PORT (server.port): must be a valid integer",
         env={"JOBHOOK_SERVER__PORT": "abc"}),
    Case("unknown-top-key", "data_dri: unknown key; did you mean 'data_dir'?",
         top='data_dri = "x"\n'),
    Case("store-scheme", "store.url: must start with sqlite:/// or postgresql://",
         tables='[store]\nurl = "mysql://db/jobs"\n'),
    Case("store-port", "store.url: the port is not a number",
         tables='[store]\nurl = "postgresql://jobhook@db:fivefour/jobs"\n'),
    Case("hosts-star", "results.allowed_hosts: '*' would let a presigned URL reach any host; "
         'list the provider\'s storage hosts, e.g. ["*.s3.amazonaws.com"]',
         tables='[results]\nallowed_hosts = ["*"]\n'),
    Case("hosts-bad-name", "results.allowed_hosts: 'a b' is not a host name",
         tables='[results]\nallowed_hosts = ["a b"]\n'),
    Case("hosts-url", "results.allowed_hosts: 'https://x.example' is a URL",
         tables='[results]\nallowed_hosts = ["https://x.example"]\n'),
    Case("hosts-string", 'results.allowed_hosts: must be a list, e.g. ["a", "b"]',
         tables='[results]\nallowed_hosts = "x.example"\n'),
    Case("max-bytes-negative", "results.max_bytes: must be greater than 0",
         tables="[results]\nmax_bytes = -1\n"),
    Case("allow-http-text", "results.allow_http: must be a valid boolean",
         tables='[results]\nallow_http = "maybe"\n'),
    Case("results-read-only", "results.dir: the results directory {ro}/results (in {ro}) is "
         "on a read-only filesystem", tables='[results]\ndir = "{ro}/results"\n'),
    Case("store-read-only", "store.url: the database's directory {ro}/data (in {ro}) is on a "
         "read-only filesystem", top='[store]\nurl = "sqlite:///{ro}/data/jobhook.db"\n'),
    Case("data-dir-read-only", "data_dir: the database's directory {ro}/data (in {ro}) is on a "
         "read-only filesystem", data_dir="{ro}/data", tables='[results]\ndir = "{tmp}/r"\n'),
    Case("data-dir-under-a-file", "is a file, not a directory",
         tables='[results]\ndir = "{tmp}/a-file/results"\n'),
    Case("confidence-alert-range", "sources.reducto.confidence_alert: must be a number from 0 "
         "to 1 (0.8 means 80 % confident)", source=SOURCE + "confidence_alert = 1.5\n"),
    Case("unknown-provider", "sources.reducto.provider: unknown provider 'nope'",
         source=f'[sources.reducto]\nprovider = "nope"\nsecrets = ["{SECRET}"]\n'),
    Case("secret-not-secrets", "sources.reducto.secret: unknown key; did you mean 'secrets'?",
         source=f'[sources.reducto]\nprovider = "reducto"\nsecret = ["{SECRET}"]\n'),
    Case("public-key-under-secrets", "sources.reducto.secrets: secret #1 is a whpk_ public key; "
         "move it from secrets to public_keys",
         source=f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{PUBLIC_KEY}"]\n'),
    Case("secret-under-public-keys", "public key #1 is a whsec_ signing secret; move it from "
         "public_keys to secrets",
         source=f'[sources.reducto]\nprovider = "reducto"\npublic_keys = ["{SECRET}"]\n'),
    Case("signing-key-under-secrets", "secret #1 is a whsk_ private signing key",
         source='[sources.reducto]\nprovider = "reducto"\nsecrets = ["whsk_abc"]\n'),
    Case("unreadable-file-secret", "cannot read secret file {tmp}: Is a directory",
         source='[sources.reducto]\nprovider = "reducto"\nsecrets = ["file:{tmp}"]\n'),
    Case("unset-env-secret", "environment variable JOBHOOK_TEST_NOPE is not set or empty",
         source='[sources.reducto]\nprovider = "reducto"\nsecrets = ["env:JOBHOOK_TEST_NOPE"]\n'),
    Case("no-secret", "sources.reducto.secrets: a signed source needs at least one secret",
         source='[sources.reducto]\nprovider = "reducto"\nsecrets = []\n'),
    Case("short-secret", "secret #1 is too short (5 bytes, need 16)",
         source='[sources.reducto]\nprovider = "reducto"\nsecrets = ["whsec_c2hvcnQ="]\n'),
    Case("unknown-scheme", "sources.reducto.signature: unknown signature scheme 'rsa'",
         source=SOURCE + 'signature = "rsa"\n'),
    Case("poll-zero", "sources.reducto.poll.initial_delay: must be greater than 0",
         source=SOURCE + "[sources.reducto.poll]\ninitial_delay = 0\n"),
    Case("poll-typo", "sources.reducto.poll.intial_delay: unknown key; did you mean "
         "'initial_delay'?", source=SOURCE + "[sources.reducto.poll]\nintial_delay = 1\n"),
    Case("generic-without-table", "needs a [sources.NAME.generic] table",
         source=f'[sources.reducto]\nprovider = "generic"\nsecrets = ["{SECRET}"]\n'),
    Case("bad-source-name", "source name 'Big' must be 1-64 lowercase letters",
         source=f'[sources.Big]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n'),
    Case("handler-no-type", "handlers #1.type: required, and missing; add it",
         handlers='[[handlers]]\nname = "files"\n'),
    Case("handler-unknown-type", "handlers #1: handler 'files': unknown handler type 'nope'",
         handlers='[[handlers]]\nname = "files"\ntype = "nope"\n'),
    Case("redis-without-stream", "handlers #1: handler 'q' (redis): stream: required, and "
         "missing; add it", handlers='[[handlers]]\nname = "q"\ntype = "redis"\n'),
    Case("file-option-typo", "handlers #1: handler 'files' (file): dirr: unknown key; did you "
         "mean 'dir'?", handlers=FILES + 'dirr = "x"\n'),
    Case("plugin-missing", "handlers #1: handler 'p': module 'nope.module' not found; install",
         handlers='[[handlers]]\nname = "p"\ntype = "nope.module:thing"\n'),
    Case("handler-twice", "handler name 'files' is used twice", handlers=FILES + FILES),
    Case("handler-unknown-source", "handler 'files' names unknown source 'other'; known: reducto",
         handlers=FILES + 'sources = ["other"]\n'),
    Case("log-level", "log.level: unknown level; use one of debug, info, warning, error",
         tables='[log]\nlevel = "loud"\n'),
    Case("log-format", "log.format: must be 'auto', 'json' or 'console'",
         tables='[log]\nformat = "xml"\n'),
    Case("retention-too-short", "retention.max_age_days: must be greater than or equal to 2",
         tables="[retention]\nmax_age_days = 1\n"),
    Case("concurrency-zero", "dispatch.concurrency: must be greater than or equal to 1",
         tables="[dispatch]\nconcurrency = 0\n"),
]  # fmt: skip


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no one may write: a read-only tmpfs for root, mode 0o500 for anyone else."""
    path = tmp_path / "ro"
    if os.geteuid() != 0:
        path.mkdir()
        path.chmod(0o500)
        yield path
        path.chmod(0o700)
        return
    with mounts.tmpfs(path, "1m"):
        remounted = mounts.remount(path, "ro")
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
        yield path


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _serve(config: Path, env: dict[str, str], cwd: Path, *extra: str) -> subprocess.Popen[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("JOBHOOK_")}
    return subprocess.Popen(
        [sys.executable, "-m", "receiver", "serve", "--config", str(config), *extra],
        env={**clean, **env, "PYTHONPATH": str(REPO)},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_check_config_and_serve_refuse_with_the_same_line(
    case: Case, tmp_path: Path, busy_port: int, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    port = busy_port if case.id == "port-in-use" else 0
    read_only = request.getfixturevalue("read_only_dir") if "{ro}" in case.expected else None
    values = {"tmp": tmp_path, "ro": read_only, "port": port, "busy": busy_port}
    config = tmp_path / "jobhook.toml"
    config.write_text(case.text(**values), encoding="utf-8")
    expected = case.expected.format(**values)

    checked = CliRunner().invoke(main, ["check-config", "--config", str(config)], env=case.env)
    served = _serve(config, case.env, tmp_path)
    out, err = served.communicate(timeout=30)

    assert checked.exit_code == 2, checked.output
    lines = checked.output.splitlines()
    assert lines[0] == f"jobhook: invalid config {config}:"
    assert any(expected in line for line in lines[1:]), checked.output
    assert len(lines) == 2, f"one problem, one line: {checked.output}"
    assert served.returncode == 2, err
    assert "Traceback" not in out + err
    assert err == checked.output
    assert SECRET.removeprefix("whsec_") not in checked.output


def test_every_problem_is_listed_at_once(tmp_path: Path, busy_port: int) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}/data"\n[server]\nport = {busy_port}\n'
        '[results]\nallowed_hosts = ["a b"]\n'
        + SOURCE
        + '[[handlers]]\nname = "q"\ntype = "redis"\n[[handlers]]\nname = "p"\ntype = "no.pe:x"\n'
        + '[[handlers]]\nname = "f"\ntype = "file"\ndirr = "x"\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert [line.split(":")[0].strip() for line in result.output.splitlines()[1:]] == [
        "handlers #1", "handlers #2", "handlers #3", "handlers #3", "results.allowed_hosts",
        "server.port",
    ]  # fmt: skip
    assert "  handlers #3: handler 'f' (file): dir: required, and missing; add it" in result.output
    assert "  handlers #3: handler 'f' (file): dirr: unknown key; did you mean 'dir'?" in (
        result.output
    )


def test_serve_names_its_own_port_option_when_the_port_is_taken(
    tmp_path: Path, busy_port: int
) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(f'data_dir = "{tmp_path}/data"\n' + SOURCE)
    served = _serve(config, {}, tmp_path, "--port", str(busy_port))
    _, err = served.communicate(timeout=30)
    assert served.returncode == 2
    assert f"  --port: 127.0.0.1:{busy_port} is already in use" in err


def test_a_config_check_config_accepts_starts(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "jobhook.toml"
    config.write_text(Case("ok", "").text(tmp=tmp_path, port=port))
    checked = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert checked.exit_code == 0, checked.output
    served = _serve(config, {}, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and served.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            time.sleep(0.1)
        else:
            pytest.fail(f"serve did not start: {served.communicate(timeout=5)}")
    finally:
        served.terminate()
        served.communicate(timeout=30)


def test_a_store_that_cannot_be_opened_fails_startup_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        '[server]\nport = 0\n[store]\nurl = "postgresql://jobhook:pw-8f2e@127.0.0.1:1/jobs"\n'
    )
    served = _serve(config, {}, tmp_path)
    out, err = served.communicate(timeout=30)
    assert served.returncode != 0
    assert "Traceback" not in out + err
    assert "startup failed: cannot open PostgreSQL store postgresql://jobhook:***@" in err
    assert "pw-8f2e" not in out + err


def test_a_settings_typo_and_a_handler_option_typo_come_in_one_run(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}/data"\n[server]\nprot = 8000\n'
        + SOURCE
        + '[[handlers]]\nname = "archive"\ntype = "file"\ndri = "out"\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    served = _serve(config, {}, tmp_path)
    _, err = served.communicate(timeout=30)
    assert result.exit_code == 2
    assert result.output.splitlines()[1:] == [
        "  server.prot: unknown key; did you mean 'port'?",
        "  handlers #1: handler 'archive' (file): dir: required, and missing; add it",
        "  handlers #1: handler 'archive' (file): dri: unknown key; did you mean 'dir'?",
    ]
    assert served.returncode == 2
    assert err == result.output


def test_a_bare_variable_name_where_a_secret_belongs_suggests_env(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}/data"\n[server]\nadmin_token = "ADMIN_TOKEN"\n'
        f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{SECRET}", '
        '"REDUCTO_WEBHOOK_SECRET"]\npublic_keys = ["REDUCTO_PUBLIC_KEY"]\n'
    )
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    assert result.output.splitlines()[1:] == [
        "  server.admin_token: ADMIN_TOKEN is an environment variable's name, not a secret; "
        "did you mean 'env:ADMIN_TOKEN'?",
        "  sources.reducto.public_keys: public key #1: REDUCTO_PUBLIC_KEY is an environment "
        "variable's name; did you mean 'env:REDUCTO_PUBLIC_KEY'?",
        "  sources.reducto.secrets #2: REDUCTO_WEBHOOK_SECRET is an environment variable's "
        "name, not a secret; did you mean 'env:REDUCTO_WEBHOOK_SECRET'?",
    ]
