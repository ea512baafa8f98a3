"""Standard Webhooks ``v1a`` (ed25519) signatures, verified with ``whpk_`` public keys."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from receiver.config.load import load_settings
from receiver.errors import ConfigError, VerificationError
from receiver.secret import Secret
from receiver.service.app import create_app
from receiver.signatures import build_verifier
from receiver.signatures.svix import SvixVerifier
from tests.support import FIXTURES, SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

VECTOR: dict[str, Any] = json.loads((FIXTURES / "svix-vectors.json").read_text())["asymmetric_v1a"]
PUBLIC_KEY: str = VECTOR["public_key"]
SECRET_KEY: str = VECTOR["secret_key"]
OTHER_SECRET_KEY = "whsk_" + base64.b64encode(bytes(range(32)) * 2).decode()


def sign_v1a(secret_key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """A ``v1a`` entry as a Standard Webhooks sender makes it: ed25519 over id.timestamp.body."""
    seed = base64.b64decode(secret_key.removeprefix("whsk_"))[:32]
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(
        f"{msg_id}.{timestamp}.".encode() + body
    )
    return "v1a," + base64.b64encode(signature).decode()


def public_key_of(secret_key: str) -> str:
    seed = base64.b64decode(secret_key.removeprefix("whsk_"))[:32]
    raw = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    return "whpk_" + base64.b64encode(raw).decode()


def v1a_headers(
    body: bytes, *, secret_key: str = SECRET_KEY, msg_id: str = "msg_1"
) -> dict[str, str]:
    ts = int(time.time())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_v1a(secret_key, msg_id, ts, body),
    }


def _vector_headers(signature: str) -> dict[str, str]:
    return {
        "webhook-id": VECTOR["msg_id"],
        "webhook-timestamp": str(VECTOR["timestamp"]),
        "webhook-signature": signature,
    }


def _at_vector_time() -> float:
    return float(VECTOR["timestamp"])


def test_the_official_v1a_vector_verifies_with_its_public_key() -> None:
    verifier = SvixVerifier([], public_keys=[PUBLIC_KEY], clock=_at_vector_time)
    verified = verifier.verify(VECTOR["payload"].encode(), _vector_headers(VECTOR["signature"]))
    assert verified.message_id == VECTOR["msg_id"]
    assert verified.timestamp == VECTOR["timestamp"]


def test_the_vector_signs_with_the_secret_key_as_our_helper_does() -> None:
    ours = sign_v1a(SECRET_KEY, VECTOR["msg_id"], VECTOR["timestamp"], VECTOR["payload"].encode())
    assert ours == VECTOR["signature"]
    assert public_key_of(SECRET_KEY) == PUBLIC_KEY


def test_a_tampered_body_fails_the_v1a_check_with_401() -> None:
    verifier = SvixVerifier([], public_keys=[PUBLIC_KEY], clock=_at_vector_time)
    with pytest.raises(VerificationError) as caught:
        verifier.verify(b'{"test": 2432232315}', _vector_headers(VECTOR["signature"]))
    assert (caught.value.reason, caught.value.status_code) == ("bad_signature", 401)


def test_a_v1a_signature_by_another_key_is_a_401() -> None:
    body = reducto_body()
    verifier = SvixVerifier([], public_keys=[PUBLIC_KEY])
    with pytest.raises(VerificationError) as caught:
        verifier.verify(body, v1a_headers(body, secret_key=OTHER_SECRET_KEY))
    assert (caught.value.reason, caught.value.status_code) == ("bad_signature", 401)


def test_a_v1a_entry_of_the_wrong_length_is_no_match_not_an_error() -> None:
    verifier = SvixVerifier([], public_keys=[PUBLIC_KEY])
    headers = v1a_headers(b"{}")
    headers["webhook-signature"] = "v1a," + base64.b64encode(b"short").decode()
    with pytest.raises(VerificationError, match="bad_signature"):
        verifier.verify(b"{}", headers)


def test_any_configured_public_key_accepts_during_rotation() -> None:
    body = reducto_body()
    verifier = SvixVerifier([], public_keys=[public_key_of(OTHER_SECRET_KEY), PUBLIC_KEY])
    assert verifier.verify(body, v1a_headers(body)).message_id == "msg_1"
    assert verifier.verify(body, v1a_headers(body, secret_key=OTHER_SECRET_KEY))


def test_secrets_and_public_keys_side_by_side_accept_v1_and_v1a() -> None:
    body = reducto_body()
    verifier = SvixVerifier([Secret(SECRET)], public_keys=[PUBLIC_KEY])
    assert verifier.verify(body, signed_headers(body)).message_id == "msg_1"
    assert verifier.verify(body, v1a_headers(body)).message_id == "msg_1"


def test_one_valid_v1a_entry_among_wrong_v1_entries_verifies() -> None:
    body = reducto_body()
    headers = v1a_headers(body)
    headers["webhook-signature"] = "v1,AAAA " + headers["webhook-signature"]
    assert SvixVerifier([Secret(SECRET)], public_keys=[PUBLIC_KEY]).verify(body, headers)


def test_a_v1_signature_does_not_pass_a_source_with_public_keys_only() -> None:
    body = reducto_body()
    with pytest.raises(VerificationError, match="bad_signature"):
        SvixVerifier([], public_keys=[PUBLIC_KEY]).verify(body, signed_headers(body))


def test_a_v1a_signature_does_not_pass_a_source_with_secrets_only() -> None:
    body = reducto_body()
    with pytest.raises(VerificationError, match="bad_signature"):
        SvixVerifier([Secret(SECRET)]).verify(body, v1a_headers(body))


def test_stale_timestamps_are_refused_before_the_v1a_check() -> None:
    verifier = SvixVerifier([], public_keys=[PUBLIC_KEY])  # the real clock: years later
    with pytest.raises(VerificationError) as caught:
        verifier.verify(VECTOR["payload"].encode(), _vector_headers(VECTOR["signature"]))
    assert (caught.value.reason, caught.value.status_code) == ("stale_timestamp", 401)


def test_public_keys_are_only_for_the_svix_scheme() -> None:
    with pytest.raises(ValueError, match="only svix"):
        build_verifier("docextract", [Secret("k" * 32)], public_keys=[PUBLIC_KEY])


def test_the_repr_counts_keys_and_secrets_without_showing_them() -> None:
    text = repr(SvixVerifier([Secret(SECRET)], public_keys=[PUBLIC_KEY]))
    assert text == "SvixVerifier(secrets=1, public_keys=1)"


def _config(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[sources.reducto]\nprovider = "reducto"\n{source}',
        encoding="utf-8",
    )
    return path


def test_a_source_with_only_public_keys_loads(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, f'public_keys = ["{PUBLIC_KEY}"]\n'), environ={})
    assert settings.sources["reducto"].public_keys == (PUBLIC_KEY,)
    assert settings.sources["reducto"].secrets == ()


def test_a_public_key_may_come_from_the_environment(tmp_path: Path) -> None:
    config = _config(tmp_path, 'public_keys = ["env:WHPK"]\n')
    settings = load_settings(config, environ={"WHPK": PUBLIC_KEY})
    assert settings.sources["reducto"].public_keys == (PUBLIC_KEY,)


def test_a_source_without_secrets_or_public_keys_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, "public_keys = []\n"), environ={})
    assert "sources.reducto.secrets" in str(caught.value)
    assert "public key" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=", "must start with 'whpk_'"),
        ("whpk_not*base64!", "not valid base64"),
        ("whpk_" + base64.b64encode(b"x" * 31).decode(), "31 bytes"),
        (SECRET_KEY, "whsk_ secret key"),
    ],
    ids=["no-prefix", "not-base64", "short", "secret-key-pasted"],
)
def test_a_malformed_public_key_fails_at_startup_naming_the_key(
    tmp_path: Path, key: str, problem: str
) -> None:
    source = f'secrets = ["{SECRET}"]\npublic_keys = ["{PUBLIC_KEY}", "{key}"]\n'
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, source), environ={})
    message = str(caught.value)
    assert "sources.reducto.public_keys: public key #2" in message
    assert problem in message
    assert key.removeprefix("whpk_").removeprefix("whsk_")[:12] not in message


def test_public_keys_on_an_hmac_scheme_fail_at_startup(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[sources.docextract]\nprovider = "docextract"\n'
        f'signature = "docextract"\nsecrets = ["{"k" * 32}"]\npublic_keys = ["{PUBLIC_KEY}"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"sources\.docextract\.public_keys: .*only for"):
        load_settings(config, environ={})


async def test_a_v1a_signed_webhook_is_accepted_and_stored_by_the_live_service(
    tmp_path: Path,
) -> None:
    settings = load_settings(_config(tmp_path, f'public_keys = ["{PUBLIC_KEY}"]\n'), environ={})
    body = reducto_body("job-v1a")
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        forged = await c.post(
            "/webhooks/reducto",
            content=body,
            headers=v1a_headers(body, secret_key=OTHER_SECRET_KEY, msg_id="msg_forged"),
        )
        accepted = await c.post("/webhooks/reducto", content=body, headers=v1a_headers(body))
    assert (forged.status_code, forged.json()["error"]) == (401, "bad_signature")
    assert (accepted.status_code, accepted.json()["status"]) == (200, "accepted")
    with sqlite3.connect(tmp_path / "data" / "jobhook.db") as db:
        stored = db.execute("SELECT message_id FROM deliveries").fetchall()
    assert stored == [("msg_1",)]
