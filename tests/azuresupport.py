"""Azure offline: one Azurite and one TLS Entra ID token endpoint for the whole test session.

``azurite`` starts Azurite's Blob service (the Azure Storage emulator, npm package ``azurite``,
installed by ``.ci/run`` where missing) on a free loopback port, in memory, telemetry off; the
tests skip without it (fail under ``JOBHOOK_REQUIRE_SERVICES=1``). ``entra`` serves the Entra ID
simulator (``receiver.sim.azure_entra``) over TLS with a test CA (azure-identity takes only an
https authority). Nothing here reaches a Microsoft host or the instance metadata address.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
import trustme
import uvicorn
from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

from receiver.service.serving import free_port
from receiver.sim.azure_entra import EntraSim
from tests.services import services_required

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from starlette.types import ASGIApp

AZURITE_VERSION = "3.35.0"
"""The Azurite .ci/run installs: a release that runs on Node 20 (3.37.0 needs Node 22)."""
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
"""Azurite's well-known development account key (public, in its documentation)."""
TENANT = "0b1c2d3e-jobhook-test-tenant"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
CLIENT_SECRET = "entra-test-secret-0123456789"
CERT_CLIENT_ID = "66666666-7777-8888-9999-000000000000"
IDENTITY_HEADER = "identity-header-0123456789"


@dataclass(frozen=True)
class Azurite:
    """A running Azurite Blob service: its account endpoint and connection string."""

    endpoint: str

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )


@dataclass(frozen=True)
class Entra:
    """The TLS Entra ID simulator: its authority URL, the CA that signed it, its state."""

    authority: str
    ca_bundle: Path
    ca: trustme.CA
    sim: EntraSim


def _azurite_command() -> str | None:
    return os.environ.get("JOBHOOK_AZURITE") or shutil.which("azurite-blob")


@contextlib.contextmanager
def run_azurite(workspace: Path, *extra: str, scheme: str = "http") -> Iterator[Azurite]:
    """Azurite's Blob service on a free loopback port for the block (skips, or fails under
    ``JOBHOOK_REQUIRE_SERVICES=1``, where it is not installed)."""
    command = _azurite_command()
    if command is None:
        reason = f"azurite-blob is not installed (npm install --global azurite@{AZURITE_VERSION})"
        if services_required():
            pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes this test mandatory")
        pytest.skip(reason)
    port = free_port("127.0.0.1")
    proc = subprocess.Popen(
        [command, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
         "--disableTelemetry", "--skipApiVersionCheck", "--loose", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workspace,
    )  # fmt: skip
    assert proc.stdout is not None
    started = threading.Event()
    seen: list[str] = []
    listening: list[bool] = []

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if "successfully listens" in line:
                listening.append(True)
                started.set()
        started.set()  # it ended: the check below says so

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        if not started.wait(60) or not listening:
            raise RuntimeError("azurite did not start: " + "".join(seen)[-500:])
        yield Azurite(f"{scheme}://127.0.0.1:{port}/{ACCOUNT}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        watcher.join(10)
        proc.stdout.close()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """One Azurite Blob service for the session (plain HTTP, SAS and shared key)."""
    with run_azurite(tmp_path_factory.mktemp("azurite")) as found:
        yield found


@pytest.fixture(scope="session")
def azurite_oauth(tmp_path_factory: pytest.TempPathFactory, entra: Entra) -> Iterator[Azurite]:
    """Azurite over TLS (the Entra simulator's CA) taking bearer tokens (``--oauth basic``:
    a JWT's issuer, audience and lifetime are checked, not its signature); started only for
    the tests that read a container with Entra ID tokens."""
    workspace = tmp_path_factory.mktemp("azurite-oauth")
    cert = entra.ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = workspace / "cert.pem", workspace / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    with run_azurite(workspace, "--oauth", "basic", "--cert", str(certfile), "--key",
                     str(keyfile), scheme="https") as found:  # fmt: skip
        yield found


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        await super().startup(sockets)  # type: ignore[arg-type]
        self.ready.set()


@contextlib.contextmanager
def serve_tls(app: ASGIApp, ca: trustme.CA, workdir: Path) -> Iterator[str]:
    """Serve ``app`` over TLS (a certificate for 127.0.0.1 from ``ca``) in a thread of its own
    for the block; yields its https URL."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = workdir / "server.pem", workdir / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    for extra in cert.cert_chain_pems[1:]:
        extra.write_to_path(str(certfile), append=True)
    cert.private_key_pem.write_to_path(str(keyfile))
    port = free_port("127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                            lifespan="off", loop="asyncio", ssl_certfile=str(certfile),
                            ssl_keyfile=str(keyfile))  # fmt: skip
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        if not server.ready.wait(15):
            raise RuntimeError("the TLS server did not start")
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture(scope="session")
def entra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Entra]:
    """One Entra ID simulator over TLS for the session: a client-secret app, a certificate
    app (assertions), a managed identity header."""
    ca = trustme.CA()
    workdir = tmp_path_factory.mktemp("entra")
    bundle = workdir / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    sim = EntraSim(apps={CLIENT_ID: CLIENT_SECRET, CERT_CLIENT_ID: ""},
                   identity_header=IDENTITY_HEADER)  # fmt: skip
    with serve_tls(sim.app(), ca, workdir) as url:
        yield Entra(url, bundle, ca, sim)


def app_certificate(ca: trustme.CA) -> bytes:
    """A certificate and its private key (PEM) for the certificate app."""
    cert = ca.issue_cert("jobhook-test-app", not_after=datetime.now(UTC) + timedelta(days=1),
                         key_type=trustme.KeyType.RSA)  # fmt: skip
    return cert.private_key_pem.bytes() + b"".join(p.bytes() for p in cert.cert_chain_pems)


def container(azurite: Azurite, blobs: dict[str, bytes] | None = None) -> str:
    """A new container (with ``blobs`` in it): its SAS URL."""
    name = f"c{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    made = service.create_container(name)
    for blob, data in (blobs or {}).items():
        made.upload_blob(blob, data)
    sas = generate_container_sas(
        ACCOUNT, name, account_key=ACCOUNT_KEY,
        permission=ContainerSasPermissions(read=True, list=True, write=True, create=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    return f"{azurite.endpoint}/{name}?{sas}"
