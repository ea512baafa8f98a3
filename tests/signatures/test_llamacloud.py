"""LlamaCloud's ``LC-Signature``: one test per rejection reason, then through a real app."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.config.sources import check_scheme
from receiver.errors import ConfigError, VerificationError
from receiver.secret import Secret
from receiver.service.app import create_app
from receiver.signatures import LlamaCloudVerifier, build_verifier
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

KEY = "lc-signing-secret-0123456789abcdef"
OLD_KEY = "lc-signing-secret-old-9876543210"
BODY = b'{"event_type":"parse.success","job_id":"pjb_1","status":"COMPLETED"}'


def lc_headers(body: bytes, *, key: str = KEY, prefix: str = "sha256=") -> dict[str, str]:
    """What LlamaCloud sends with a signing secret (llama-cloud 2.19.0's docstring):
    ``LC-Signature: sha256=<hex HMAC-SHA256 of the raw body>``."""
    digest = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return {"LC-Signature": prefix + digest, "content-type": "application/json"}


def _verifier(*keys: str) -> LlamaCloudVerifier:
    return LlamaCloudVerifier([Secret(k) for k in keys or (KEY,)])


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _reject(body: bytes, headers: dict[str, str]) -> tuple[str, int]:
    with pytest.raises(VerificationError) as info:
        _verifier().verify(body, _lower(headers))
    return info.value.reason, info.value.status_code


def test_a_valid_signature_gives_the_body_hash_as_message_id() -> None:
    verified = _verifier().verify(BODY, _lower(lc_headers(BODY)))
    assert verified.message_id == hashlib.sha256(BODY).hexdigest()


def test_a_bare_hex_signature_verifies_too() -> None:
    assert _verifier().verify(BODY, _lower(lc_headers(BODY, prefix=""))).message_id


def test_rotation_accepts_old_and_new_secrets() -> None:
    both = _verifier(KEY, OLD_KEY)
    assert both.verify(BODY, _lower(lc_headers(BODY, key=OLD_KEY)))
    assert both.verify(BODY, _lower(lc_headers(BODY, key=KEY)))


def test_a_missing_header_is_a_400() -> None:
    assert _reject(BODY, {"content-type": "application/json"}) == ("missing_headers", 400)


@pytest.mark.parametrize(
    "signature", ["sha256=zz", "sha256=" + "a" * 63, "md5=" + "a" * 64, "v1,abc"]
)
def test_a_malformed_signature_is_a_400(signature: str) -> None:
    assert _reject(BODY, {"LC-Signature": signature}) == ("malformed_signature", 400)


def test_a_non_utf8_body_is_a_400() -> None:
    body = b"\xff\xfe"
    assert _reject(body, lc_headers(body))[1] == 400


def test_a_tampered_body_is_a_401() -> None:
    assert _reject(BODY + b" ", lc_headers(BODY)) == ("bad_signature", 401)


def test_a_signature_from_an_unknown_secret_is_a_401() -> None:
    assert _reject(BODY, lc_headers(BODY, key="another-secret-0123456789")) == (
        "bad_signature",
        401,
    )


def test_the_repr_hides_the_secrets_and_the_scheme_is_built_by_name() -> None:
    verifier = build_verifier("llamacloud", [Secret(KEY), Secret(OLD_KEY)])
    assert isinstance(verifier, LlamaCloudVerifier)
    assert "lc-signing" not in repr(verifier)
    assert "secrets=2" in repr(verifier)
    check_scheme("llamacloud", "generic")
    with pytest.raises(ValueError, match="only for provider"):
        check_scheme("llamacloud", "reducto")


def _generic_source(tmp_path: Path) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.llama]
provider = "generic"
signature = "llamacloud"
secrets = ["{KEY}", "{OLD_KEY}"]
[sources.llama.generic]
webhook_job_id = "/job_id"
webhook_status = "/status"
job_path = "/api/v2/parse/{{job_id}}"
job_status = "/job/status"
[sources.llama.generic.status_words]
PENDING = "queued"
RUNNING = "running"
COMPLETED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
""",
        encoding="utf-8",
    )
    return config


async def test_through_the_app_a_signed_delivery_is_stored_and_a_forged_one_changes_nothing(
    tmp_path: Path,
) -> None:
    app = create_app(load_settings(_generic_source(tmp_path), environ={}))
    forged = b'{"event_type":"parse.success","job_id":"pjb_2","status":"COMPLETED"}'
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        ok = await client.post("/webhooks/llama", content=BODY, headers=lc_headers(BODY))
        again = await client.post("/webhooks/llama", content=BODY, headers=lc_headers(BODY))
        bad = await client.post(
            "/webhooks/llama", content=forged, headers=lc_headers(forged, key="x" * 20)
        )
        unsigned = await client.post("/webhooks/llama", content=forged)
        store = app.state.store
        stored, untouched = (
            await store.get_job("llama", "pjb_1"),
            await store.get_job("llama", "pjb_2"),
        )
    assert (ok.status_code, ok.json()["status"]) == (200, "accepted")
    assert again.json()["status"] == "duplicate"
    assert (bad.status_code, bad.json()["error"]) == (401, "bad_signature")
    assert (unsigned.status_code, unsigned.json()["error"]) == (400, "missing_headers")
    assert stored is not None
    assert stored.state == "succeeded"
    assert untouched is None
    assert json.loads(BODY)["job_id"] == stored.job_id


def test_a_short_signing_secret_is_refused(tmp_path: Path) -> None:
    config = _generic_source(tmp_path)
    config.write_text(config.read_text().replace(KEY, "short"), encoding="utf-8")
    with pytest.raises(ConfigError, match="too short"):
        load_settings(config, environ={})
