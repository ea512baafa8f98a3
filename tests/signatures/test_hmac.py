"""The HMAC signature schemes (DocuRift, DocExtract): one test per reason, then end to end."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import sqlite3
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.datastructures import Headers

from receiver.config.load import load_settings
from receiver.config.sources import check_scheme
from receiver.errors import ConfigError, VerificationError
from receiver.secret import Secret
from receiver.service.app import create_app
from receiver.signatures import (
    DocExtractVerifier,
    DocuRiftVerifier,
    build_verifier,
)
from receiver.signatures.base import Verified
from receiver.signatures.svix import SvixVerifier
from tests.support import FIXTURES, SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.config.settings import Settings

KEY = "docurift-secret-0123456789abcdef"
OLD_KEY = "docurift-secret-old-9876543210"
NOW = 1_790_000_000
BODY = b'{"id":"evt_1","type":"document.processing.completed","data":{"documentId":"doc_1"}}'


def _hex(key: str, message: bytes) -> str:
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def docurift_headers(
    body: bytes, *, key: str = KEY, ts: int = NOW, event_id: str = "evt_1", prefix: str = ""
) -> dict[str, str]:
    """What DocuRift sends: hex HMAC-SHA256 of "{timestamp}.{body}", as its docs compute it."""
    return {
        "x-docurift-signature": prefix + _hex(key, f"{ts}.".encode() + body),
        "x-docurift-timestamp": str(ts),
        "x-docurift-event-id": event_id,
        "content-type": "application/json",
    }


def docextract_headers(body: bytes, *, key: str = KEY, prefix: str = "") -> dict[str, str]:
    """What DocExtract sends: hex HMAC-SHA256 of the raw body."""
    return {"x-docextract-signature": prefix + _hex(key, body), "content-type": "application/json"}


def _docurift(*keys: str) -> DocuRiftVerifier:
    return DocuRiftVerifier([Secret(k) for k in keys or (KEY,)], clock=lambda: NOW)


def _docextract(*keys: str) -> DocExtractVerifier:
    return DocExtractVerifier([Secret(k) for k in keys or (KEY,)])


def _reject(verifier: DocuRiftVerifier | DocExtractVerifier, body: bytes,
            headers: dict[str, str]) -> tuple[str, int]:  # fmt: skip
    with pytest.raises(VerificationError) as info:
        verifier.verify(body, headers)
    return info.value.reason, info.value.status_code


def test_docurift_valid_signature_gives_the_event_id_and_time() -> None:
    assert _docurift().verify(BODY, docurift_headers(BODY)) == Verified("evt_1", NOW)


@pytest.mark.parametrize("prefix", ["sha256=", "SHA256="])
def test_docurift_signature_may_carry_a_sha256_prefix(prefix: str) -> None:
    headers = docurift_headers(BODY, prefix=prefix)
    assert _docurift().verify(BODY, headers).message_id == "evt_1"


def test_docurift_upper_case_hex_verifies() -> None:
    headers = docurift_headers(BODY)
    headers["x-docurift-signature"] = headers["x-docurift-signature"].upper()
    assert _docurift().verify(BODY, headers).message_id == "evt_1"


def test_docurift_headers_are_found_whatever_their_case() -> None:
    mixed = {k.replace("x-docurift", "X-DocuRift"): v for k, v in docurift_headers(BODY).items()}
    assert _docurift().verify(BODY, Headers(headers=mixed)).message_id == "evt_1"


def test_docurift_tampered_body_is_a_401() -> None:
    tampered = BODY.replace(b"doc_1", b"doc_2")
    assert _reject(_docurift(), tampered, docurift_headers(BODY)) == ("bad_signature", 401)


def test_docurift_signature_is_bound_to_its_timestamp() -> None:
    headers = {**docurift_headers(BODY, ts=NOW - 10), "x-docurift-timestamp": str(NOW)}
    assert _reject(_docurift(), BODY, headers) == ("bad_signature", 401)


def test_docurift_stale_timestamp_is_a_401() -> None:
    headers = docurift_headers(BODY, ts=NOW - 301)
    assert _reject(_docurift(), BODY, headers) == ("stale_timestamp", 401)


def test_docurift_future_timestamp_is_a_401() -> None:
    headers = docurift_headers(BODY, ts=NOW + 301)
    assert _reject(_docurift(), BODY, headers) == ("future_timestamp", 401)


def test_docurift_timestamp_within_five_minutes_verifies() -> None:
    headers = docurift_headers(BODY, ts=NOW - 299)
    assert _docurift().verify(BODY, headers) == Verified("evt_1", NOW - 299)


@pytest.mark.parametrize(
    "header", ["x-docurift-signature", "x-docurift-timestamp", "x-docurift-event-id"]
)
def test_docurift_each_missing_header_is_a_400(header: str) -> None:
    headers = docurift_headers(BODY)
    del headers[header]
    assert _reject(_docurift(), BODY, headers) == ("missing_headers", 400)


@pytest.mark.parametrize(
    "signature",
    ["garbage", "ab" * 31, "ab" * 33, "zz" * 32, "sha1=" + "ab" * 32, "v1,q83vEjRWeJA=", " "],
    ids=["word", "short", "long", "not-hex", "sha1", "svix-style", "blank"],
)
def test_docurift_malformed_signature_is_a_400(signature: str) -> None:
    headers = {**docurift_headers(BODY), "x-docurift-signature": signature}
    assert _reject(_docurift(), BODY, headers) == ("malformed_signature", 400)


@pytest.mark.parametrize("timestamp", ["abc", "1.7e9", "-5", "1790000000000000"])
def test_docurift_malformed_timestamp_is_a_400(timestamp: str) -> None:
    headers = {**docurift_headers(BODY), "x-docurift-timestamp": timestamp}
    assert _reject(_docurift(), BODY, headers) == ("invalid_timestamp", 400)


def test_docurift_overlong_event_id_is_a_400() -> None:
    headers = docurift_headers(BODY, event_id="e" * 257)
    assert _reject(_docurift(), BODY, headers) == ("invalid_message_id", 400)


def test_docurift_non_utf8_body_is_a_400() -> None:
    body = b"\xff\xfe{}"
    assert _reject(_docurift(), body, docurift_headers(body)) == ("body_not_utf8", 400)


def test_docurift_rotation_accepts_old_and_new_secrets() -> None:
    verifier = _docurift(KEY, OLD_KEY)
    for key in (KEY, OLD_KEY):
        assert verifier.verify(BODY, docurift_headers(BODY, key=key)).message_id == "evt_1"


def test_docurift_signature_from_an_unknown_secret_is_a_401() -> None:
    headers = docurift_headers(BODY, key=OLD_KEY)
    assert _reject(_docurift(KEY), BODY, headers) == ("bad_signature", 401)


def test_docextract_valid_signature_gives_the_body_hash_as_message_id() -> None:
    verified = _docextract().verify(BODY, docextract_headers(BODY))
    assert verified == Verified(hashlib.sha256(BODY).hexdigest(), None)


def test_docextract_redelivery_of_a_body_has_the_same_message_id() -> None:
    verifier = _docextract()
    first = verifier.verify(BODY, docextract_headers(BODY))
    assert verifier.verify(BODY, docextract_headers(BODY, prefix="sha256=")) == first


def test_docextract_tampered_body_is_a_401() -> None:
    tampered = BODY.replace(b"doc_1", b"doc_2")
    assert _reject(_docextract(), tampered, docextract_headers(BODY)) == ("bad_signature", 401)


def test_docextract_missing_header_is_a_400() -> None:
    assert _reject(_docextract(), BODY, {"content-type": "application/json"}) == (
        "missing_headers", 400)  # fmt: skip


@pytest.mark.parametrize("signature", ["garbage", "ab" * 31, "zz" * 32, "sha256="])
def test_docextract_malformed_signature_is_a_400(signature: str) -> None:
    headers = {"x-docextract-signature": signature}
    assert _reject(_docextract(), BODY, headers) == ("malformed_signature", 400)


def test_docextract_non_utf8_body_is_a_400() -> None:
    body = b"\xff\xfe{}"
    assert _reject(_docextract(), body, docextract_headers(body)) == ("body_not_utf8", 400)


def test_docextract_rotation_accepts_old_and_new_secrets() -> None:
    verifier = _docextract(KEY, OLD_KEY)
    for key in (KEY, OLD_KEY):
        assert verifier.verify(BODY, docextract_headers(BODY, key=key)).timestamp is None


def test_docextract_signature_from_an_unknown_secret_is_a_401() -> None:
    headers = docextract_headers(BODY, key=OLD_KEY)
    assert _reject(_docextract(KEY), BODY, headers) == ("bad_signature", 401)


def test_verifier_reprs_hide_the_secrets() -> None:
    for verifier in (_docurift(KEY, OLD_KEY), _docextract(KEY, OLD_KEY)):
        assert "docurift-secret" not in repr(verifier)
        assert "secrets=2" in repr(verifier)


def test_build_verifier_picks_the_scheme() -> None:
    assert isinstance(build_verifier("svix", [Secret(SECRET)]), SvixVerifier)
    assert isinstance(build_verifier("docurift", [Secret(KEY)]), DocuRiftVerifier)
    assert isinstance(build_verifier("docextract", [Secret(KEY)]), DocExtractVerifier)
    with pytest.raises(ValueError, match="unknown signature scheme"):
        build_verifier("md5", [Secret(KEY)])


def test_a_verifier_without_secrets_cannot_be_built() -> None:
    for scheme in ("svix", "docurift", "docextract"):
        with pytest.raises(ValueError, match="at least one secret"):
            build_verifier(scheme, [])


@pytest.mark.parametrize(
    ("scheme", "provider", "allowed"),
    [("svix", "docurift", True), ("docurift", "docurift", True), ("docurift", "generic", True),
     ("docextract", "docextract", True), ("docextract", "generic", True),
     ("docurift", "reducto", False), ("docextract", "docurift", False)],
)  # fmt: skip
def test_provider_schemes_are_only_for_their_provider_or_generic(
    scheme: str, provider: str, allowed: bool
) -> None:
    if allowed:
        check_scheme(scheme, provider)
    else:
        with pytest.raises(ValueError, match="only for provider"):
            check_scheme(scheme, provider)


def _config(tmp_path: Path, source: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text(f'data_dir = "{tmp_path}"\n[sources.s]\n{source}', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    return str(info.value)


def test_config_refuses_a_scheme_of_another_provider_naming_the_key(tmp_path: Path) -> None:
    message = _config(
        tmp_path, f'provider = "reducto"\nsignature = "docurift"\nsecrets = ["{KEY}"]\n'
    )
    assert "sources.s.signature" in message
    assert "only for provider" in message


def test_config_refuses_an_unknown_scheme(tmp_path: Path) -> None:
    message = _config(tmp_path, f'provider = "docurift"\nsignature = "md5"\nsecrets = ["{KEY}"]\n')
    assert "sources.s.signature" in message
    assert "unknown signature scheme" in message


def test_config_refuses_a_short_hmac_secret_without_echoing_it(tmp_path: Path) -> None:
    source = (
        'provider = "docextract"\nsignature = "docextract"\nsecrets = ["%s", "hunter2hunter2"]\n'
    )
    message = _config(tmp_path, source % KEY)
    assert "sources.s.secrets" in message
    assert "secret #2 is too short (14 characters, need 16)" in message
    assert "hunter2" not in message


def test_config_accepts_any_long_enough_hmac_secret(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        f'data_dir = "{tmp_path}"\n[sources.s]\nprovider = "docurift"\nsignature = "docurift"\n'
        f'secrets = ["env:NEW", "{OLD_KEY}"]\n',
        encoding="utf-8",
    )
    settings = load_settings(path, environ={"NEW": "whsec_not-base64-at-all!"})
    assert [s.reveal() for s in settings.sources["s"].secrets] == [
        "whsec_not-base64-at-all!", OLD_KEY]  # fmt: skip


def test_config_keeps_svix_the_default_with_its_secret_check(tmp_path: Path) -> None:
    message = _config(tmp_path, f'provider = "docurift"\nsecrets = ["{KEY}"]\n')
    assert "sources.s.secrets" in message
    assert "whsec_" in message


# End to end: the real app on a real uvicorn server and a real SQLite file.

DOCURIFT_BODY = json.dumps(
    json.loads((FIXTURES / "providers" / "docurift.json").read_text())["webhook_completed"]
).encode()
DOCEXTRACT_BODY = json.dumps(
    json.loads((FIXTURES / "providers" / "docextract.json").read_text())["webhook_completed"]
).encode()


@pytest.fixture
def mixed_settings(tmp_path: Path) -> Settings:
    """A Reducto (svix), a DocuRift and a DocExtract source side by side."""
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[sources.docurift]
provider = "docurift"
signature = "docurift"
secrets = ["{KEY}", "{OLD_KEY}"]
[sources.docextract]
provider = "docextract"
signature = "docextract"
secrets = ["{KEY}"]
""",
        encoding="utf-8",
    )
    return load_settings(path, environ={})


@pytest.fixture
async def client(mixed_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(mixed_settings)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        yield c


def _count(settings: Settings, table: str) -> int:
    with contextlib.closing(sqlite3.connect(settings.store.url.removeprefix("sqlite:///"))) as db:
        (n,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(n)


async def test_docurift_signed_webhook_is_accepted_then_a_resend_is_duplicate(
    client: httpx.AsyncClient, mixed_settings: Settings
) -> None:
    now = int(time.time())
    first = await client.post(
        "/webhooks/docurift",
        content=DOCURIFT_BODY,
        headers=docurift_headers(DOCURIFT_BODY, ts=now, event_id="evt_9b1f2c"),
    )
    # A resend: same event id, a new timestamp and so a new signature, from the old secret.
    again = await client.post(
        "/webhooks/docurift",
        content=DOCURIFT_BODY,
        headers=docurift_headers(DOCURIFT_BODY, ts=now + 5, event_id="evt_9b1f2c", key=OLD_KEY),
    )
    assert (first.status_code, first.json()) == (
        200, {"status": "accepted", "job_id": "doc_71c0a2", "state": "succeeded"})  # fmt: skip
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert _count(mixed_settings, "deliveries") == 1


async def test_docurift_tampered_webhook_is_401_and_stores_nothing(
    client: httpx.AsyncClient, mixed_settings: Settings
) -> None:
    headers = docurift_headers(DOCURIFT_BODY, ts=int(time.time()))
    tampered = DOCURIFT_BODY.replace(b"doc_71c0a2", b"doc_666")
    response = await client.post("/webhooks/docurift", content=tampered, headers=headers)
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert _count(mixed_settings, "deliveries") == 0
    assert _count(mixed_settings, "jobs") == 0


async def test_docextract_signed_webhook_is_accepted_then_a_resend_is_duplicate(
    client: httpx.AsyncClient, mixed_settings: Settings
) -> None:
    headers = docextract_headers(DOCEXTRACT_BODY)
    first = await client.post("/webhooks/docextract", content=DOCEXTRACT_BODY, headers=headers)
    again = await client.post("/webhooks/docextract", content=DOCEXTRACT_BODY, headers=headers)
    assert (first.status_code, first.json()) == (
        200, {"status": "accepted", "job_id": "job_abc123", "state": "succeeded"})  # fmt: skip
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert _count(mixed_settings, "deliveries") == 1


async def test_docextract_tampered_webhook_is_401_and_stores_nothing(
    client: httpx.AsyncClient, mixed_settings: Settings
) -> None:
    headers = docextract_headers(DOCEXTRACT_BODY)
    tampered = DOCEXTRACT_BODY.replace(b"job_abc123", b"job_666")
    response = await client.post("/webhooks/docextract", content=tampered, headers=headers)
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert _count(mixed_settings, "deliveries") == 0


async def test_svix_headers_do_not_pass_for_an_hmac_source(client: httpx.AsyncClient) -> None:
    headers = signed_headers(DOCURIFT_BODY)
    response = await client.post("/webhooks/docurift", content=DOCURIFT_BODY, headers=headers)
    assert (response.status_code, response.json()["error"]) == (400, "missing_headers")


async def test_reducto_svix_path_still_works_beside_hmac_sources(
    client: httpx.AsyncClient,
) -> None:
    body = reducto_body("job-r")
    response = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
    assert (response.status_code, response.json()["status"]) == (200, "accepted")
    other = await client.post(
        "/webhooks/reducto", content=DOCURIFT_BODY, headers=docurift_headers(DOCURIFT_BODY)
    )
    assert (other.status_code, other.json()["error"]) == (400, "missing_headers")


def test_config_with_an_unknown_provider_reports_only_that(tmp_path: Path) -> None:
    message = _config(tmp_path, f'provider = "nope"\nsignature = "docurift"\nsecrets = ["{KEY}"]\n')
    assert "unknown provider" in message
    assert "only for provider" not in message
