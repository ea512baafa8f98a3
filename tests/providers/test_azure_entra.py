"""Entra ID tokens for an azure source: each credential of azure-identity's chain against the
TLS token endpoint simulator, through jobhook's own client; cached, renewed before expiry."""

from __future__ import annotations

import json
import ssl
import time
from typing import TYPE_CHECKING

import httpx
import pytest
import time_machine

from receiver.errors import ProviderError
from receiver.providers.azure_auth import DOCINTEL_SCOPE, STORAGE_SCOPE, TokenSource
from receiver.secret import Secret
from tests.azuresupport import (
    CERT_CLIENT_ID,
    CLIENT_ID,
    CLIENT_SECRET,
    IDENTITY_HEADER,
    TENANT,
    app_certificate,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from tests.azuresupport import Entra

AUDIENCE = "https://cognitiveservices.azure.com"
ENVIRONMENT = (
    "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_USERNAME", "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT", "IMDS_ENDPOINT", "MSI_ENDPOINT",
    "MSI_SECRET", "AZURE_TOKEN_CREDENTIALS",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_ambient_credentials(entra: Entra, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a test sets: no credential of the machine's environment is tried, and managed
    identity, the chain's last resort, asks the simulator on loopback (with a header it
    refuses) instead of the instance metadata service."""
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", f"{entra.authority}/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", "not-the-identity-header")


@pytest.fixture
async def client(entra: Entra) -> AsyncIterator[httpx.AsyncClient]:
    """The job API's client as [egress] makes it: trusting the test CA, no environment."""
    context = ssl.create_default_context(cafile=entra.ca_bundle)
    async with httpx.AsyncClient(verify=context, trust_env=False) as found:
        yield found


def _source(entra: Entra, client: httpx.AsyncClient, **kwargs: object) -> TokenSource:
    return TokenSource(source="az", client=client, authority=entra.authority,
                       disable_instance_discovery=True, **kwargs)  # type: ignore[arg-type]  # fmt: skip


async def test_a_client_secret_gets_a_token_once_and_reuses_it(
    entra: Entra, client: httpx.AsyncClient
) -> None:
    tokens = _source(entra, client, tenant_id=TENANT, client_id=CLIENT_ID,
                     client_secret=Secret(CLIENT_SECRET))  # fmt: skip
    first = await tokens.token(DOCINTEL_SCOPE)
    again = await tokens.token(DOCINTEL_SCOPE)
    storage = await tokens.token(STORAGE_SCOPE)
    assert first == again
    assert entra.sim.valid(first, AUDIENCE)
    assert entra.sim.valid(storage, "https://storage.azure.com")
    assert not entra.sim.valid(storage, AUDIENCE)
    assert tokens.requested == 2  # one a scope: the second ask came from the cache
    assert await tokens.bearer(DOCINTEL_SCOPE) == {"Authorization": f"Bearer {first}"}
    await tokens.aclose()


async def test_a_token_is_renewed_before_it_expires(
    entra: Entra, client: httpx.AsyncClient
) -> None:
    tokens = _source(entra, client, tenant_id=TENANT, client_id=CLIENT_ID,
                     client_secret=Secret(CLIENT_SECRET))  # fmt: skip
    first = await tokens.token(DOCINTEL_SCOPE)
    # Four minutes before the hour's token expires (inside the five-minute margin).
    with time_machine.travel(time.time() + entra.sim.lifetime - 240, tick=True):
        renewed = await tokens.token(DOCINTEL_SCOPE)
        assert renewed != first
        assert entra.sim.valid(renewed, AUDIENCE)
    assert tokens.requested == 2
    await tokens.aclose()


async def test_a_certificate_signs_its_assertion(entra: Entra, client: httpx.AsyncClient) -> None:
    pem = app_certificate(entra.ca).decode()
    tokens = _source(entra, client, tenant_id=TENANT, client_id=CERT_CLIENT_ID,
                     certificate=Secret(pem))  # fmt: skip
    before = entra.sim.requests.count("client_assertion")
    token = await tokens.token(DOCINTEL_SCOPE)
    assert entra.sim.valid(token, AUDIENCE)
    assert entra.sim.requests.count("client_assertion") == before + 1
    await tokens.aclose()


async def test_workload_identity_from_the_environment(
    entra: Entra, client: httpx.AsyncClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def part(value: dict[str, object]) -> str:
        import base64

        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    federated = tmp_path / "token"
    claims = {"iss": CERT_CLIENT_ID, "sub": CERT_CLIENT_ID, "exp": int(time.time()) + 600}
    federated.write_text(f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln")
    monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", str(federated))
    monkeypatch.setenv("AZURE_TENANT_ID", TENANT)
    monkeypatch.setenv("AZURE_CLIENT_ID", CERT_CLIENT_ID)
    tokens = _source(entra, client)
    token = await tokens.token(DOCINTEL_SCOPE)
    assert entra.sim.valid(token, AUDIENCE)
    await tokens.aclose()


async def test_managed_identity_through_identity_endpoint_on_loopback(
    entra: Entra, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDENTITY_HEADER", IDENTITY_HEADER)
    before = entra.sim.requests.count("managed_identity")
    tokens = _source(entra, client)
    token = await tokens.token(DOCINTEL_SCOPE)
    assert entra.sim.valid(token, AUDIENCE)
    assert entra.sim.requests.count("managed_identity") == before + 1
    await tokens.aclose()


async def test_a_wrong_secret_is_a_provider_error_that_does_not_show_it(
    entra: Entra, client: httpx.AsyncClient
) -> None:
    wrong = "not-the-secret-9876543210"
    tokens = _source(entra, client, tenant_id=TENANT, client_id=CLIENT_ID,
                     client_secret=Secret(wrong))  # fmt: skip
    with pytest.raises(ProviderError, match="no Entra ID token") as caught:
        await tokens.token(DOCINTEL_SCOPE)
    assert wrong not in str(caught.value)
    await tokens.aclose()
