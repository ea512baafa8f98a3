"""Amazon SNS HTTPS deliveries, verified as AWS documents it (Textract's only completion signal).

A delivery is a JSON envelope whose ``Type`` (``Notification``, ``SubscriptionConfirmation``,
``UnsubscribeConfirmation``) the ``x-amz-sns-message-type`` header repeats. The signed string
is ``Key\\nValue\\n`` for, in this order, Message, MessageId, Subject (only when present),
Timestamp, TopicArn, Type of a notification; Message, MessageId, SubscribeURL, Timestamp,
Token, TopicArn, Type of a confirmation. ``SignatureVersion`` 1 is SHA1withRSA, 2 SHA256withRSA,
with the key of the X.509 certificate at ``SigningCertURL``, which must be https on
``sns.<region>.amazonaws.com`` (``.com.cn`` in China) or a host the source adds; the certificate
is fetched through the egress client (TLS verified against the system's CAs, plus a bundle the
source may add) and kept, by URL, in a bounded cache.

Checks run cheapest first, so a delivery from an unlisted topic never makes us fetch anything:
envelope, type header, topic allow-list, timestamp, certificate URL, then the signature. A
``SubscriptionConfirmation`` of an allowed topic is confirmed by fetching its ``SubscribeURL``
(host checked like the certificate's); raw message delivery (no envelope) is refused, because
it carries no signature.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import httpx
import structlog

from receiver.errors import RetryableError, VerificationError
from receiver.signatures.base import AsyncVerifier, Verified, check_message_id, require_utf8

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from cryptography.x509 import Certificate

log = structlog.get_logger("receiver.sns")

TYPES = ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation")
NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_KEYS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                     "Type")  # fmt: skip
ENVELOPE_KEYS = ("Signature", "SignatureVersion", "SigningCertURL")
CERT_CACHE_SIZE = 32
MAX_CERT_BYTES = 64 * 1024
FUTURE_SECONDS = 5 * 60
RAW_DELIVERY_HINT = (
    "raw message delivery is on for this subscription: its messages carry no signature; turn "
    "it off (aws sns set-subscription-attributes --subscription-arn ARN --attribute-name "
    "RawMessageDelivery --attribute-value false)"
)


def sns_host(host: str) -> bool:
    """Whether ``host`` is an SNS regional endpoint: ``sns.<region>.amazonaws.com[.cn]``."""
    labels = host.lower().split(".")
    if labels[-1] == "cn":
        labels = labels[:-1]
    return (
        len(labels) == 4
        and labels[0] == "sns"
        and labels[2:] == ["amazonaws", "com"]
        and bool(labels[1])
        and all(c.isalnum() or c == "-" for c in labels[1])
    )


@runtime_checkable
class SnsTopics(Protocol):
    """What a provider's table says of the SNS deliveries its sources take."""

    @property
    def topic_arns(self) -> Sequence[str]: ...
    @property
    def extra_sns_hosts(self) -> Sequence[str]: ...
    @property
    def max_message_age_seconds(self) -> float: ...


class SnsVerifier(AsyncVerifier):
    """Verifies SNS deliveries of the allowed topics; confirms their subscriptions.

    The lifespan ``attach``es the egress client (and the source's rate budget) before the first
    delivery; until then deliveries are answered 503 (the service is starting).
    """

    scheme: ClassVar[str] = "sns"

    def __init__(
        self,
        topic_arns: Sequence[str],
        *,
        extra_hosts: Sequence[str] = (),
        max_age_seconds: float = 3600.0,
        clock: Callable[[], float] = time.time,
        source: str = "",
    ) -> None:
        if not topic_arns:
            raise ValueError("signature 'sns' needs at least one allowed topic ARN")
        self.topic_arns = frozenset(topic_arns)
        self.extra_hosts = frozenset(h.lower() for h in extra_hosts)
        self.max_age = max_age_seconds
        self.source = source
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        self._acquire: Callable[[], Awaitable[None]] | None = None
        self._certs: OrderedDict[str, Certificate] = OrderedDict()
        self.cert_fetches = 0

    def __repr__(self) -> str:
        return f"SnsVerifier(topics={len(self.topic_arns)})"

    @classmethod
    def for_table(cls, table: SnsTopics, *, source: str) -> SnsVerifier:
        """The verifier of a source whose provider's table lists its topics (``SnsTopics``)."""
        return cls(
            table.topic_arns,
            extra_hosts=table.extra_sns_hosts,
            max_age_seconds=table.max_message_age_seconds,
            source=source,
        )

    def attach(
        self, client: httpx.AsyncClient, acquire: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Use ``client`` for certificates and confirmations, each after ``acquire()``."""
        self._client = client
        self._acquire = acquire

    async def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        if headers.get("x-amz-sns-rawdelivery", "").lower() == "true":
            raise VerificationError("raw_delivery", RAW_DELIVERY_HINT)
        envelope = _envelope(require_utf8(body))
        kind = envelope["Type"]
        announced = headers.get("x-amz-sns-message-type")
        if not announced:
            raise VerificationError("missing_headers", "missing header x-amz-sns-message-type")
        if announced != kind:
            raise VerificationError(
                "type_mismatch", f"header says {announced!r}, the body's Type is {kind!r}"
            )
        topic = envelope["TopicArn"]
        header_topic = headers.get("x-amz-sns-topic-arn")
        if header_topic is not None and header_topic != topic:
            raise VerificationError("topic_mismatch", "x-amz-sns-topic-arn differs from TopicArn")
        message_id = envelope["MessageId"]
        check_message_id(message_id)
        if topic not in self.topic_arns:
            if kind != "Notification":
                log.warning("sns_subscription_refused", source=self.source, topic=topic,
                            type=kind)  # fmt: skip
            raise VerificationError(
                "unlisted_topic", f"topic {topic} is not in this source's topic_arns",
                status_code=403,
            )  # fmt: skip
        timestamp = self._check_timestamp(envelope["Timestamp"])
        cert_url = self._check_url(envelope["SigningCertURL"], "SigningCertURL", "cert")
        algorithm = _algorithm(envelope["SignatureVersion"])
        signature = _signature(envelope["Signature"])
        certificate = await self._certificate(cert_url)
        _check_validity(certificate, self._clock())
        _verify(certificate, signature, string_to_sign(envelope), algorithm)
        if kind == "SubscriptionConfirmation":
            await self._confirm(envelope)
            return Verified(message_id, timestamp, handled="subscription_confirmed")
        if kind == "UnsubscribeConfirmation":
            log.warning("sns_unsubscribed", source=self.source, topic=topic,
                        hint="the topic no longer delivers here; subscribe again to get its "
                        "completions")  # fmt: skip
            return Verified(message_id, timestamp, handled="unsubscribe_logged")
        return Verified(message_id, timestamp)

    def _check_timestamp(self, raw: str) -> int:
        try:
            sent = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise VerificationError("invalid_timestamp", "Timestamp is not ISO 8601") from None
        if sent.tzinfo is None:
            raise VerificationError("invalid_timestamp", "Timestamp has no time zone")
        age = self._clock() - sent.timestamp()
        if age > self.max_age:
            raise VerificationError(
                "stale_timestamp",
                f"the message is {age:.0f} s old (max_message_age_seconds is {self.max_age:g})",
                status_code=401,
            )
        if age < -FUTURE_SECONDS:
            raise VerificationError("future_timestamp", "Timestamp too new", status_code=401)
        return int(sent.timestamp())

    def _check_url(self, raw: str, name: str, what: str) -> httpx.URL:
        """An SNS URL: https, on an SNS endpoint or an added host; 400 else."""
        try:
            url = httpx.URL(raw)
        except httpx.InvalidURL:
            raise VerificationError(f"invalid_{what}_url", f"{name} is not a URL") from None
        if url.scheme != "https":
            raise VerificationError(f"insecure_{what}_url", f"{name} is not https")
        host = (url.host or "").lower()
        authority = f"{host}:{url.port}" if url.port is not None else host
        if not ((url.port in (None, 443) and sns_host(host)) or authority in self.extra_hosts):
            raise VerificationError(
                f"untrusted_{what}_host",
                f"{name} is on {authority!r}, not sns.<region>.amazonaws.com",
            )
        if url.userinfo:
            raise VerificationError(f"invalid_{what}_url", f"{name} carries credentials")
        return url

    async def _get(self, url: httpx.URL, what: str) -> httpx.Response:
        if self._client is None:
            raise RetryableError("the service is starting", retry_after=1)
        if self._acquire is not None:
            await self._acquire()
        try:
            return await self._client.get(url)
        except httpx.HTTPError as exc:
            # TLS failures land here too: an untrusted certificate is never accepted.
            raise RetryableError(f"sns: cannot fetch the {what}: {type(exc).__name__}") from exc

    async def _certificate(self, url: httpx.URL) -> Certificate:
        key = str(url)
        cached = self._certs.get(key)
        if cached is not None:
            self._certs.move_to_end(key)
            return cached
        from cryptography import x509

        response = await self._get(url, "signing certificate")
        self.cert_fetches += 1
        if response.status_code >= 500:
            raise RetryableError(f"sns: the signing certificate answered {response.status_code}")
        if response.status_code != 200 or len(response.content) > MAX_CERT_BYTES:
            raise VerificationError(
                "cert_unavailable",
                f"SigningCertURL answered {response.status_code}",
                status_code=401,
            )
        try:
            certificate = x509.load_pem_x509_certificate(response.content)
        except ValueError:
            raise VerificationError(
                "cert_unavailable", "SigningCertURL is not a PEM certificate", status_code=401
            ) from None
        self._certs[key] = certificate
        while len(self._certs) > CERT_CACHE_SIZE:
            self._certs.popitem(last=False)
        return certificate

    async def _confirm(self, envelope: dict[str, str]) -> None:
        url = self._check_url(envelope["SubscribeURL"], "SubscribeURL", "subscribe")
        response = await self._get(url, "SubscribeURL")
        if response.status_code != 200:
            raise RetryableError(
                f"sns: confirming the subscription answered {response.status_code}"
            )
        log.info("sns_subscription_confirmed", source=self.source, topic=envelope["TopicArn"])


def _envelope(text: str) -> dict[str, str]:
    try:
        body: Any = json.loads(text)
    except ValueError:
        raise VerificationError("malformed_envelope", "the body is not JSON") from None
    if not isinstance(body, dict):
        raise VerificationError("malformed_envelope", "the body is not a JSON object")
    if "Type" not in body and "Signature" not in body:
        raise VerificationError("raw_delivery", RAW_DELIVERY_HINT)
    kind = body.get("Type")
    if kind not in TYPES:
        raise VerificationError("malformed_envelope", f"unknown SNS message Type {kind!r}")
    keys = NOTIFICATION_KEYS if kind == "Notification" else CONFIRMATION_KEYS
    required = [k for k in (*keys, *ENVELOPE_KEYS) if k != "Subject"]
    missing = [k for k in required if not isinstance(body.get(k), str) or not body[k]]
    if kind == "Notification" and not isinstance(body.get("Message"), str):
        missing.append("Message")
    if "Subject" in body and body["Subject"] is not None and not isinstance(body["Subject"], str):
        missing.append("Subject")
    if missing:
        raise VerificationError(
            "malformed_envelope", f"missing or non-string: {', '.join(sorted(set(missing)))}"
        )
    return body


def string_to_sign(envelope: Mapping[str, Any]) -> bytes:
    """What SNS signed: ``Key\\nValue\\n`` for each signed key present, in AWS's order."""
    keys = NOTIFICATION_KEYS if envelope["Type"] == "Notification" else CONFIRMATION_KEYS
    parts = [f"{key}\n{envelope[key]}\n" for key in keys if envelope.get(key) is not None]
    return "".join(parts).encode("utf-8")


def _algorithm(version: str) -> str:
    if version == "1":
        return "sha1"
    if version == "2":
        return "sha256"
    raise VerificationError(
        "unsupported_signature_version", f"SignatureVersion {version!r} is not 1 or 2"
    )


def _signature(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise VerificationError("malformed_signature", "Signature is not base64") from None


def _check_validity(certificate: Certificate, now: float) -> None:
    if not (
        certificate.not_valid_before_utc.timestamp()
        <= now
        <= certificate.not_valid_after_utc.timestamp()
    ):
        raise VerificationError(
            "cert_expired", "the signing certificate is not valid now", status_code=401
        )


def _verify(certificate: Certificate, signature: bytes, message: bytes, algorithm: str) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise VerificationError(
            "bad_signature", "the certificate's key is not RSA", status_code=401
        )
    digest: hashes.HashAlgorithm = hashes.SHA1() if algorithm == "sha1" else hashes.SHA256()  # noqa: S303
    try:
        key.verify(signature, message, padding.PKCS1v15(), digest)
    except InvalidSignature:
        raise VerificationError("bad_signature", "the SNS signature does not verify",
                                status_code=401) from None  # fmt: skip
