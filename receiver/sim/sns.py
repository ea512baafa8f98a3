"""The simulator's Amazon SNS: a topic, one HTTPS subscription, and messages signed as SNS signs.

Its own CA (made once per process) issues the TLS certificate of the https host that serves the
signing certificate and ``ConfirmSubscription`` (the ``SubscribeURL`` it sends); deliveries are
``Notification``s signed with SHA256withRSA (``SignatureVersion`` 2) or SHA1withRSA (1), retried
as SNS retries an HTTP/S endpoint, and only to a confirmed subscription.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import functools
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import structlog
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
    from starlette.requests import Request

log = structlog.get_logger("receiver.sim.sns")

RETRIES = (0.0, 0.2, 1.0, 2.0, 5.0)
CONFIRMATION_RETRIES = (0.0, 0.2, 1.0, *(2.0,) * 90)


@dataclass
class Subscription:
    topic: str
    endpoint: str
    token: str
    confirmed: bool = False


class SnsSide:
    """The SNS topic: a CA and a TLS host for it, a signing key and certificate, deliveries."""

    def __init__(self, signature_version: str = "2") -> None:
        self.version = signature_version
        self.subscription: Subscription | None = None
        self.base_url = ""
        self.delivered: list[dict[str, Any]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None
        self.ca_pem, self.tls_cert_pem, self.tls_key_pem, self.signing_key, self.signing_pem = (
            _materials()
        )
        self.cert_path = (
            f"/SimpleNotificationService-{hashlib.sha256(self.signing_pem).hexdigest()[:32]}.pem"
        )

    def app(self) -> Starlette:
        async def certificate(request: Request) -> Response:
            return Response(self.signing_pem, media_type="application/x-x509-ca-cert")

        async def action(request: Request) -> Response:
            sub = self.subscription
            query = request.query_params
            if (
                query.get("Action") != "ConfirmSubscription"
                or sub is None
                or query.get("TopicArn") != sub.topic
                or query.get("Token") != sub.token
            ):
                return Response(
                    "<ErrorResponse><Error><Code>InvalidParameter</Code></Error></ErrorResponse>",
                    status_code=400,
                    media_type="text/xml",
                )
            sub.confirmed = True
            log.info("sns_subscription_confirmed", topic=sub.topic)
            return Response(
                f"<ConfirmSubscriptionResponse><ConfirmSubscriptionResult>"
                f"<SubscriptionArn>{sub.topic}:{uuid.uuid4()}</SubscriptionArn>"
                "</ConfirmSubscriptionResult></ConfirmSubscriptionResponse>",
                media_type="text/xml",
            )

        return Starlette(
            routes=[
                Route(self.cert_path, certificate, methods=["GET"]),
                Route("/", action, methods=["GET"]),
            ]
        )

    def envelope(self, kind: str, topic: str, message: str, **extra: str) -> dict[str, Any]:
        """An SNS message of ``kind``, signed as SNS signs it."""
        from receiver.signatures.sns import string_to_sign

        now = dt.datetime.now(dt.UTC)
        body: dict[str, Any] = {
            "Type": kind,
            "MessageId": str(uuid.uuid4()),
            "TopicArn": topic,
            "Message": message,
            "Timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            **extra,
            "SignatureVersion": self.version,
            "SigningCertURL": self.base_url + self.cert_path,
        }
        body["Signature"] = self.sign(string_to_sign(body))
        if kind == "Notification":
            body["UnsubscribeURL"] = (
                f"{self.base_url}/?Action=Unsubscribe&SubscriptionArn={topic}:sub"
            )
        return body

    def sign(self, data: bytes) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        digest = hashes.SHA1() if self.version == "1" else hashes.SHA256()  # noqa: S303
        return base64.b64encode(self.signing_key.sign(data, padding.PKCS1v15(), digest)).decode()

    def subscribe(self) -> None:
        """Ask the endpoint to confirm the subscription (retried until it answers 2xx)."""
        sub = self.subscription
        if sub is None:
            return
        confirm = (
            f"{self.base_url}/?Action=ConfirmSubscription&TopicArn={sub.topic}&Token={sub.token}"
        )
        body = self.envelope(
            "SubscriptionConfirmation",
            sub.topic,
            f"You have chosen to subscribe to the topic {sub.topic}.\n"
            "To confirm the subscription, visit the SubscribeURL included in "
            "this message.",
            SubscribeURL=confirm,
            Token=sub.token,
        )
        self._spawn(sub.endpoint, body)

    def publish(self, topic: str, message: dict[str, Any]) -> None:
        """Deliver ``message`` (as JSON) to the topic's subscription, once it is confirmed."""
        sub = self.subscription
        if sub is None or sub.topic != topic or not sub.confirmed:
            log.info("sns_not_delivered", topic=topic, job_id=message.get("JobId"),
                     reason="no confirmed subscription")  # fmt: skip
            return
        self._spawn(sub.endpoint, self.envelope("Notification", topic, json.dumps(message)))

    def _spawn(self, url: str, body: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._deliver(url, body))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _deliver(self, url: str, body: dict[str, Any]) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=15.0, trust_env=False)
        headers = {
            "Content-Type": "text/plain; charset=UTF-8",
            "x-amz-sns-message-type": body["Type"],
            "x-amz-sns-message-id": body["MessageId"],
            "x-amz-sns-topic-arn": body["TopicArn"],
            "User-Agent": "Amazon Simple Notification Service Agent",
        }
        data = json.dumps(body).encode()
        # A confirmation is asked again for a while: the endpoint may still be starting.
        retries = RETRIES if body["Type"] == "Notification" else CONFIRMATION_RETRIES
        for delay in retries:
            await asyncio.sleep(delay)
            try:
                response = await self._client.post(url, content=data, headers=headers)
            except httpx.HTTPError as exc:
                log.info("sns_delivery_failed", error=type(exc).__name__)
                continue
            log.info("sns_delivered", type=body["Type"], status=response.status_code)
            if response.status_code < 300:
                self.delivered.append(body)
                return
            if response.status_code < 500 and body["Type"] == "Notification":
                return  # SNS does not retry a 4xx of an HTTP/S endpoint

    async def aclose(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        if self._client is not None:
            await self._client.aclose()


@functools.cache
def _materials() -> tuple[bytes, bytes, bytes, RSAPrivateKey, bytes]:
    """A CA, a TLS certificate it issued for localhost/127.0.0.1, and a signing key with its
    certificate: made fresh by each process that simulates (three RSA keys take a while)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    def issue(
        subject: str,
        key: rsa.RSAPrivateKey,
        issuer_key: rsa.RSAPrivateKey,
        issuer: str,
        *,
        ca: bool,
        sans: list[x509.GeneralName] | None = None,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            builder = builder.add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, tls_key, signing_key = (rsa.generate_private_key(65537, 2048) for _ in range(3))
    ca = issue("jobhook simulator CA", ca_key, ca_key, "jobhook simulator CA", ca=True)
    tls = issue(
        "localhost",
        tls_key,
        ca_key,
        "jobhook simulator CA",
        ca=False,
        sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    signing = issue("sns.amazonaws.com", signing_key, ca_key, "jobhook simulator CA", ca=False)
    pem = serialization.Encoding.PEM
    key_pem = tls_key.private_bytes(
        pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return (
        ca.public_bytes(pem),
        tls.public_bytes(pem),
        key_pem,
        signing_key,
        signing.public_bytes(pem),
    )
