"""Amazon SNS deliveries: each refusal has its own reason; the certificate comes over real TLS.

SNS here is the Textract simulator's (its CA, its https certificate host, its signing key).
"""

from __future__ import annotations

import json
import ssl
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.errors import RetryableError, VerificationError
from receiver.signatures.sns import SnsVerifier, sns_host, string_to_sign
from receiver.sim.sns import Subscription
from receiver.sim.textract import TextractSim, running
from tests.textract_support import KEY_ID, SECRET_KEY, TOPIC

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

OTHER_TOPIC = "arn:aws:sns:us-east-1:123456789012:someone-else"
MESSAGE = json.dumps({"JobId": "a" * 64, "Status": "SUCCEEDED", "API": "StartDocumentAnalysis"})


class Sns:
    def __init__(self, sim: TextractSim, verifier: SnsVerifier) -> None:
        self.sim = sim
        self.verifier = verifier

    def notification(self, **changes: Any) -> dict[str, Any]:
        body = self.sim.sns.envelope("Notification", changes.pop("topic", TOPIC), MESSAGE)
        return self.resign(body, **changes) if changes else body

    def resign(self, body: dict[str, Any], **changes: Any) -> dict[str, Any]:
        body = {**body, **changes}
        body["Signature"] = self.sim.sns.sign(string_to_sign(body))
        return body

    async def verify(self, body: dict[str, Any] | bytes, **headers: str) -> Any:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {}
        if isinstance(body, dict):
            sent = {"x-amz-sns-message-type": body.get("Type", ""),
                    "x-amz-sns-topic-arn": body.get("TopicArn", "")}  # fmt: skip
        sent.update(headers)
        return await self.verifier.verify(raw, sent)


@pytest.fixture
async def sns(tmp_path: Path) -> AsyncIterator[Sns]:
    sim = TextractSim(access_key_id=KEY_ID, secret_access_key=SECRET_KEY)
    async with running(sim, tmp_path / "sim") as (_, sns_url):
        context = ssl.create_default_context(cafile=tmp_path / "sim" / "ca.pem")
        async with httpx.AsyncClient(verify=context) as client:
            verifier = SnsVerifier([TOPIC], extra_hosts=[sns_url.removeprefix("https://")])
            verifier.attach(client)
            yield Sns(sim, verifier)


async def refused(sns: Sns, body: dict[str, Any] | bytes, **headers: str) -> VerificationError:
    with pytest.raises(VerificationError) as caught:
        await sns.verify(body, **headers)
    return caught.value


@pytest.mark.parametrize("version", ["1", "2"])
async def test_a_signed_notification_verifies_with_its_message_id(sns: Sns, version: str) -> None:
    sns.sim.sns.version = version
    body = sns.notification()
    verified = await sns.verify(body)
    assert verified.message_id == body["MessageId"]
    assert verified.handled is None


async def test_the_certificate_is_fetched_once_per_url(sns: Sns) -> None:
    await sns.verify(sns.notification())
    await sns.verify(sns.notification())
    assert sns.verifier.cert_fetches == 1


async def test_bad_signature_is_401(sns: Sns) -> None:
    body = {**sns.notification(), "Message": MESSAGE.replace("SUCCEEDED", "FAILED")}
    error = await refused(sns, body)
    assert (error.reason, error.status_code) == ("bad_signature", 401)


async def test_certificate_on_another_host_is_refused(sns: Sns) -> None:
    body = sns.notification(SigningCertURL="https://sns.example.com/SimpleNotificationService.pem")
    error = await refused(sns, body)
    assert (error.reason, error.status_code) == ("untrusted_cert_host", 400)
    assert sns.verifier.cert_fetches == 0


async def test_certificate_over_http_is_refused(sns: Sns) -> None:
    url = "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem"
    error = await refused(sns, sns.notification(SigningCertURL=url))
    assert (error.reason, error.status_code) == ("insecure_cert_url", 400)


async def test_unlisted_topic_is_403(sns: Sns) -> None:
    error = await refused(sns, sns.notification(topic=OTHER_TOPIC))
    assert (error.reason, error.status_code) == ("unlisted_topic", 403)
    assert sns.verifier.cert_fetches == 0


async def test_confirmation_for_an_unlisted_topic_is_refused_and_not_confirmed(sns: Sns) -> None:
    sns.sim.sns.subscription = Subscription(OTHER_TOPIC, "http://unused", "tok")
    url = f"{sns.sim.sns.base_url}/?Action=ConfirmSubscription&TopicArn={OTHER_TOPIC}&Token=tok"
    body = sns.sim.sns.envelope("SubscriptionConfirmation", OTHER_TOPIC, "confirm",
                                SubscribeURL=url, Token="tok")  # fmt: skip
    error = await refused(sns, body)
    assert (error.reason, error.status_code) == ("unlisted_topic", 403)
    assert not sns.sim.sns.subscription.confirmed


async def test_confirmation_for_a_listed_topic_fetches_its_subscribe_url(sns: Sns) -> None:
    sns.sim.sns.subscription = Subscription(TOPIC, "http://unused", "tok")
    url = f"{sns.sim.sns.base_url}/?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=tok"
    body = sns.sim.sns.envelope("SubscriptionConfirmation", TOPIC, "confirm",
                                SubscribeURL=url, Token="tok")  # fmt: skip
    verified = await sns.verify(body)
    assert verified.handled == "subscription_confirmed"
    assert sns.sim.sns.subscription.confirmed


async def test_subscribe_url_on_another_host_is_refused(sns: Sns) -> None:
    url = f"https://evil.example.com/?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=tok"
    body = sns.sim.sns.envelope("SubscriptionConfirmation", TOPIC, "confirm",
                                SubscribeURL=url, Token="tok")  # fmt: skip
    error = await refused(sns, body)
    assert (error.reason, error.status_code) == ("untrusted_subscribe_host", 400)


async def test_raw_delivery_is_refused_with_how_to_turn_it_off(sns: Sns) -> None:
    error = await refused(sns, MESSAGE.encode())
    assert error.reason == "raw_delivery"
    assert "RawMessageDelivery" in error.detail
    flagged = await refused(sns, sns.notification(), **{"x-amz-sns-rawdelivery": "true"})
    assert (flagged.reason, flagged.status_code) == ("raw_delivery", 400)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1]", json.dumps({"Type": "Notification", "TopicArn": TOPIC}).encode()],
    ids=["not-json", "not-object", "missing-keys"],
)
async def test_malformed_envelope_is_400(sns: Sns, body: bytes) -> None:
    error = await refused(sns, body, **{"x-amz-sns-message-type": "Notification"})
    assert (error.reason, error.status_code) == ("malformed_envelope", 400)


async def test_stale_timestamp_is_401(sns: Sns) -> None:
    body = sns.notification()
    sns.verifier._clock = lambda: time.time() + 2 * 3600  # two hours after it was sent
    error = await refused(sns, body)
    assert (error.reason, error.status_code) == ("stale_timestamp", 401)


async def test_header_and_body_type_mismatch_is_400(sns: Sns) -> None:
    error = await refused(sns, sns.notification(),
                          **{"x-amz-sns-message-type": "SubscriptionConfirmation"})  # fmt: skip
    assert (error.reason, error.status_code) == ("type_mismatch", 400)


async def test_a_certificate_host_this_machine_does_not_trust_is_never_accepted(
    sns: Sns,
) -> None:
    async with httpx.AsyncClient() as client:  # the system's CAs only: not the simulator's
        sns.verifier.attach(client)
        with pytest.raises(RetryableError):
            await sns.verify(sns.notification())


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("sns.us-east-1.amazonaws.com", True),
        ("sns.cn-north-1.amazonaws.com.cn", True),
        ("SNS.eu-west-3.amazonaws.com", True),
        ("sns.us-east-1.amazonaws.com.evil.example", False),
        ("evilsns.us-east-1.amazonaws.com", False),
        ("sns.amazonaws.com", False),
        ("s3.us-east-1.amazonaws.com", False),
    ],
)
def test_only_sns_regional_hosts_are_sns(host: str, expected: bool) -> None:
    assert sns_host(host) is expected


async def test_a_topic_header_that_differs_from_the_body_is_400(sns: Sns) -> None:
    error = await refused(sns, sns.notification(), **{"x-amz-sns-topic-arn": OTHER_TOPIC})
    assert (error.reason, error.status_code) == ("topic_mismatch", 400)


async def test_an_unknown_signature_version_is_400(sns: Sns) -> None:
    error = await refused(sns, sns.notification(SignatureVersion="3"))
    assert (error.reason, error.status_code) == ("unsupported_signature_version", 400)


async def test_unsubscribe_confirmation_is_logged_and_answered(sns: Sns) -> None:
    body = sns.sim.sns.envelope(
        "UnsubscribeConfirmation",
        TOPIC,
        "unsubscribed",
        SubscribeURL=f"{sns.sim.sns.base_url}/?Action=x",
        Token="tok",
    )
    assert (await sns.verify(body)).handled == "unsubscribe_logged"
