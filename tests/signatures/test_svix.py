"""Signature verification: the official vectors and one test per rejection reason."""

from __future__ import annotations

import json

import pytest
import svix.webhooks
import time_machine

from receiver.errors import VerificationError
from receiver.secret import Secret
from receiver.signatures import svix as verify
from receiver.signatures.svix import SvixVerifier
from tests.support import FIXTURES, OLD_SECRET, SECRET, signed_headers

VECTORS = json.loads((FIXTURES / "svix-vectors.json").read_text())


def _payload(vector: dict[str, object]) -> bytes:
    if "payload_repeat" in vector:
        spec = vector["payload_repeat"]
        assert isinstance(spec, dict)
        return str(spec["char"] * spec["count"]).encode()
    return str(vector["payload"]).encode()


def _headers(vector: dict[str, object]) -> dict[str, str]:
    return {
        "svix-id": str(vector["msg_id"]),
        "svix-timestamp": str(vector["timestamp"]),
        "svix-signature": str(vector["signature"]),
    }


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["signature"][:12])
def test_official_valid_vectors_verify(vector: dict[str, object]) -> None:
    verifier = SvixVerifier([Secret(str(vector["secret"]))])
    with time_machine.travel(int(str(vector["timestamp"])), tick=False):
        signed = verifier.verify(_payload(vector), _headers(vector))
    assert signed.message_id == vector["msg_id"]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["why"])
def test_official_invalid_vectors_are_rejected_as_bad_signature(vector: dict[str, object]) -> None:
    verifier = SvixVerifier([Secret(str(vector["secret"]))])
    with (
        time_machine.travel(int(str(vector["timestamp"])), tick=False),
        pytest.raises(VerificationError) as info,
    ):
        verifier.verify(_payload(vector), _headers(vector))
    assert (info.value.reason, info.value.status_code) == ("bad_signature", 401)


def test_the_check_is_the_one_svix_webhook_delegates_to() -> None:
    """jobhook imports the class svix's Webhook wraps (importing svix loads its API client):
    if svix stopped delegating to it, this fails and the import must be revisited."""
    wrapper = svix.webhooks.Webhook(VECTORS["valid"][0]["secret"])
    assert type(wrapper._inner) is verify.Webhook
    assert svix.webhooks.WebhookVerificationError is verify.WebhookVerificationError


@pytest.mark.parametrize("vector", VECTORS["valid"] + VECTORS["invalid"],
                         ids=lambda v: v.get("why", v["signature"][:12]))  # fmt: skip
def test_svix_and_jobhook_agree_on_every_official_vector(vector: dict[str, object]) -> None:
    verifier = SvixVerifier([Secret(str(vector["secret"]))])
    wrapper = svix.webhooks.Webhook(str(vector["secret"]))
    with time_machine.travel(int(str(vector["timestamp"])), tick=False):
        try:
            wrapper.verify(_payload(vector), _headers(vector))
            svix_accepts = True
        except svix.webhooks.WebhookVerificationError:
            svix_accepts = False
        try:
            verifier.verify(_payload(vector), _headers(vector))
            jobhook_accepts = True
        except VerificationError:
            jobhook_accepts = False
    assert jobhook_accepts == svix_accepts == (vector in VECTORS["valid"])


def test_vector_outside_tolerance_is_stale_with_the_real_clock() -> None:
    vector = VECTORS["valid"][0]
    verifier = SvixVerifier([Secret(vector["secret"])])
    with pytest.raises(VerificationError) as info:
        verifier.verify(_payload(vector), _headers(vector))
    assert info.value.reason == "stale_timestamp"


BODY = b'{"status":"Completed","job_id":"j1","metadata":{}}'


def _reject(headers: dict[str, str], body: bytes = BODY) -> VerificationError:
    with pytest.raises(VerificationError) as info:
        SvixVerifier([Secret(SECRET)]).verify(body, headers)
    return info.value


@pytest.mark.parametrize("header", ["svix-id", "svix-timestamp", "svix-signature"])
def test_each_missing_header_is_a_400(header: str) -> None:
    headers = signed_headers(BODY)
    del headers[header]
    error = _reject(headers)
    assert (error.reason, error.status_code) == ("missing_headers", 400)


@pytest.mark.parametrize("timestamp", ["abc", "1.5e9", "-5", ""])
def test_non_integer_timestamp_is_a_400(timestamp: str) -> None:
    headers = {**signed_headers(BODY), "svix-timestamp": timestamp}
    error = _reject(headers)
    assert error.status_code == 400


def test_stale_timestamp_is_a_401() -> None:
    import time

    error = _reject(signed_headers(BODY, timestamp=int(time.time()) - 301))
    assert (error.reason, error.status_code) == ("stale_timestamp", 401)


def test_future_timestamp_is_a_401() -> None:
    import time

    error = _reject(signed_headers(BODY, timestamp=int(time.time()) + 301))
    assert (error.reason, error.status_code) == ("future_timestamp", 401)


def test_timestamp_within_tolerance_is_accepted() -> None:
    import time

    headers = signed_headers(BODY, timestamp=int(time.time()) - 290)
    assert SvixVerifier([Secret(SECRET)]).verify(BODY, headers).message_id == "msg_1"


@pytest.mark.parametrize("signature", ["garbage", "v1,@@@", "v1,", ",abc", "v1,abc,def", "v1 v1,x"])
def test_malformed_signature_header_is_a_400(signature: str) -> None:
    error = _reject({**signed_headers(BODY), "svix-signature": signature})
    assert (error.reason, error.status_code) == ("malformed_signature", 400)


def test_tampered_body_is_a_401() -> None:
    error = _reject(signed_headers(BODY), body=BODY.replace(b"j1", b"j2"))
    assert (error.reason, error.status_code) == ("bad_signature", 401)


def test_signature_from_another_secret_is_a_401() -> None:
    error = _reject(signed_headers(BODY, secret=OLD_SECRET))
    assert error.reason == "bad_signature"


def test_non_utf8_body_is_a_400() -> None:
    error = _reject(signed_headers("x"), body=b"\xff\xfe\x00")
    assert (error.reason, error.status_code) == ("body_not_utf8", 400)


def test_rotation_accepts_any_configured_secret() -> None:
    verifier = SvixVerifier([Secret(SECRET), Secret(OLD_SECRET)])
    for secret in (SECRET, OLD_SECRET):
        assert verifier.verify(BODY, signed_headers(BODY, secret=secret)).message_id == "msg_1"


def test_one_valid_signature_among_several_entries_verifies() -> None:
    headers = signed_headers(BODY)
    other = signed_headers(BODY, secret=OLD_SECRET)["svix-signature"]
    headers["svix-signature"] = f"{other} {headers['svix-signature']}"
    assert SvixVerifier([Secret(SECRET)]).verify(BODY, headers).message_id == "msg_1"


def test_webhook_header_family_is_accepted() -> None:
    headers = signed_headers(BODY, family="webhook")
    assert SvixVerifier([Secret(SECRET)]).verify(BODY, headers).message_id == "msg_1"


def test_verifier_repr_hides_secrets() -> None:
    assert "MfKQ" not in repr(SvixVerifier([Secret(SECRET)]))
