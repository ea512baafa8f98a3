"""URLPolicy (hosts, schemes, addresses) and URLPolicy.connect (the same checks at connect time)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from receiver.config.settings import ResultsSettings
from receiver.errors import ConfigError, FetchError, UnsafeURLError
from receiver.pipeline.fetch import ResultFetcher
from receiver.pipeline.urlsafety import URLPolicy, address_problem, describe_url
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from starlette.requests import Request


def fixed(*answers: list[str]) -> Callable[[str, int], Any]:
    """A resolver (DNS is outside the project) answering each lookup with the next answer."""
    remaining = list(answers)
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    resolve.lookups = lookups  # type: ignore[attr-defined]
    return resolve


@contextlib.asynccontextmanager
async def tcp_listener(host: str = "127.0.0.1") -> AsyncIterator[tuple[int, list[str]]]:
    """A loopback socket that records every TCP connection it accepts."""
    accepted: list[str] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(on_connect, host, 0)
    try:
        yield server.sockets[0].getsockname()[1], accepted
    finally:
        server.close()
        await server.wait_closed()


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"hello {request.headers['host']}")


HELLO = Starlette(routes=[Route("/hello", _hello)])


@pytest.mark.parametrize(
    "url",
    [
        "https://bucket.s3.amazonaws.com/key?X-Amz-Signature=abc",
        "https://Bucket.S3.US-East-1.AmazonAWS.com/key",
        "https://a.b.amazonaws.com./key",
        "https://files.example.com/result.json",
    ],
)
def test_allowed_hosts_match_subdomains_of_wildcards_and_exact_names(url: str) -> None:
    policy = URLPolicy(["*.amazonaws.com", "FILES.example.com"])
    assert policy.check_url(url) == httpx.URL(url)


@pytest.mark.parametrize(
    "host",
    ["amazonaws.com", "evilamazonaws.com", "amazonaws.com.evil.net", "x.files.example.com"],
)
def test_hosts_outside_the_patterns_are_refused(host: str) -> None:
    policy = URLPolicy(["*.amazonaws.com", "files.example.com"])
    with pytest.raises(UnsafeURLError, match=r"not in results\.allowed_hosts"):
        policy.check_url(f"https://{host}/key")


def test_an_empty_allowlist_refuses_every_host_and_says_so() -> None:
    with pytest.raises(UnsafeURLError, match=r"results\.allowed_hosts is empty"):
        URLPolicy([]).check_url("https://bucket.s3.amazonaws.com/key")


def test_http_is_refused_unless_allowed() -> None:
    url = "http://files.example.com/r"
    with pytest.raises(UnsafeURLError, match=r"scheme 'http' .*allow_http is false"):
        URLPolicy(["files.example.com"]).check_url(url)
    assert URLPolicy(["files.example.com"], allow_http=True).check_url(url).scheme == "http"


@pytest.mark.parametrize("url", ["ftp://files.example.com/r", "file:///etc/passwd", "/relative"])
def test_schemes_other_than_https_and_http_are_refused(url: str) -> None:
    with pytest.raises(UnsafeURLError, match="scheme"):
        URLPolicy(["files.example.com"], allow_http=True).check_url(url)


def test_credentials_in_the_url_are_refused() -> None:
    with pytest.raises(UnsafeURLError, match="credentials"):
        URLPolicy(["files.example.com"]).check_url("https://user:pw@files.example.com/r")


@pytest.mark.parametrize(
    ("host", "match"),
    [
        ("2130706433", "non-canonical"),
        ("0x7f.1", "non-canonical"),
        ("0x7f000001", "non-canonical"),
        ("127.1", "non-canonical"),
        ("127.0.1", "non-canonical"),
        ("0177.0.0.1", "malformed"),
        ("ex%61mple.com", "not a valid host name"),
    ],
)
def test_odd_ip_spellings_and_odd_names_are_refused_even_when_listed(host: str, match: str) -> None:
    policy = URLPolicy([host if "%" not in host else "example.com"], allow_http=True)
    with pytest.raises(UnsafeURLError, match=match):
        policy.check_url(f"http://{host}/r")


@pytest.mark.parametrize("pattern", ["*", "*example.com", "a.*.com", "https://x.com", "a b"])
def test_a_bad_allowed_hosts_pattern_fails_at_startup(pattern: str) -> None:
    with pytest.raises(ConfigError, match=r"results\.allowed_hosts"):
        URLPolicy([pattern])


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "CGNAT"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.10", "private"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "unique-local"),
        ("fd00:ec2::254", "unique-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
        ("::ffff:169.254.169.254", "IPv4-mapped link-local"),
        ("64:ff9b::7f00:1", "NAT64 loopback"),
        ("64:ff9b::a00:1", "NAT64 private"),
        ("2002:7f00:1::1", "6to4 loopback"),
        ("64:ff9b:1::1", "NAT64 local-use"),
        ("2001:db8::1", "private"),
    ],
)
def test_non_public_addresses_are_named(address: str, problem: str) -> None:
    assert problem in (address_problem(ipaddress.ip_address(address)) or "")


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "52.216.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


async def test_a_host_with_any_non_public_address_is_refused() -> None:
    policy = URLPolicy(["*.example.com"], resolver=fixed(["93.184.216.34", "10.0.0.5"]))
    with pytest.raises(UnsafeURLError, match=r"'b\.example\.com' resolves to 10\.0\.0\.5.*private"):
        await policy.check("https://b.example.com/r")


async def test_a_host_with_only_public_addresses_passes() -> None:
    resolver = fixed(["93.184.216.34", "2606:4700::1111"])
    policy = URLPolicy(["*.example.com"], resolver=resolver)
    assert (await policy.check("https://b.example.com/r")).host == "b.example.com"
    assert resolver.lookups == ["b.example.com"]  # type: ignore[attr-defined]


async def test_private_addresses_pass_when_private_networks_are_allowed() -> None:
    policy = URLPolicy(["b.internal"], allow_private_networks=True, resolver=fixed(["10.0.0.5"]))
    assert (await policy.check("https://b.internal/r")).host == "b.internal"


async def test_allowed_networks_exempt_their_addresses_only() -> None:
    policy = URLPolicy(["127.0.0.1", "127.0.0.2"], allow_http=True, allowed_networks=["127.0.0.1"])
    await policy.check("http://127.0.0.1:9/r")
    with pytest.raises(UnsafeURLError, match="loopback"):
        await policy.check("http://127.0.0.2:9/r")


async def test_localhost_is_refused_through_real_name_resolution() -> None:
    policy = URLPolicy(["localhost"], allow_http=True)
    with pytest.raises(UnsafeURLError, match=r"'localhost' resolves to .*loopback"):
        await policy.check("http://localhost:8000/r")


async def test_a_name_that_does_not_resolve_is_retryable_not_unsafe() -> None:
    async def nxdomain(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    policy = URLPolicy(["*.example.com"], resolver=nxdomain)
    with pytest.raises(FetchError, match=r"cannot resolve 'gone\.example\.com'") as info:
        await policy.check("https://gone.example.com/r")
    assert not isinstance(info.value, UnsafeURLError)
    assert not info.value.permanent


def test_describe_url_drops_credentials_query_and_fragment() -> None:
    url = httpx.URL("https://u:p@b.s3.amazonaws.com:8443/k/r.json?X-Amz-Signature=s3cr3t#frag")
    assert describe_url(url) == "https://b.s3.amazonaws.com:8443/k/r.json"


@pytest.mark.parametrize(
    ("url", "default_port", "shown"),
    [("https://user:pw@example.com/hook?token=abc#f", None, "https://example.com/hook"),
     ("https://user@example.com:8443/", None, "https://example.com:8443/"),
     ("http://u:p@[2001:db8::1]:8080/x", None, "http://[2001:db8::1]:8080/x"),
     ("https://[::1]/", None, "https://[::1]/"),
     ("https://example.com/plain", None, "https://example.com/plain"),
     ("redis://:hunter2@cache/0", 6379, "redis://cache:6379/0"),
     ("rediss://user:hunter2@cache:6380/2", 6379, "rediss://cache:6380/2"),
     ("amqp://app:hunter2@mq/prod", 5672, "amqp://mq:5672/prod"),
     ("amqp://app:hunter2@[fd00::5]:5673/%2f", 5672, "amqp://[fd00::5]:5673/%2f"),
     ("nats://s3cr3t-token@n1", 4222, "nats://n1:4222"),
     ("tls://u:hunter2@n2:4443", 4222, "tls://n2:4443"),
     ("unix://:hunter2@/run/redis.sock?db=1", None, "unix:///run/redis.sock")],
)  # fmt: skip
def test_describe_url_drops_every_kind_of_userinfo(
    url: str, default_port: int | None, shown: str
) -> None:
    assert describe_url(url, default_port) == shown
    assert describe_url(httpx.URL(url) if url.startswith("http") else url, default_port) == shown


def test_describe_url_fills_in_what_the_url_leaves_out() -> None:
    assert describe_url("redis://", 6379, default_host="localhost") == "redis://localhost:6379"
    assert describe_url("amqps://mq", 5671, default_path="/") == "amqps://mq:5671/"


async def test_a_name_rebound_to_loopback_after_the_check_is_refused_at_connect() -> None:
    async with tcp_listener() as (port, accepted):
        # The first lookup (the pre-request check) sees a public address, the next one loopback.
        policy = URLPolicy(
            ["rebind.test"], allow_http=True, resolver=fixed(["93.184.216.34"], ["127.0.0.1"])
        )
        url = f"http://rebind.test:{port}/r"
        await policy.check(url)
        with pytest.raises(UnsafeURLError, match=r"'rebind\.test' resolves to 127\.0\.0\.1"):
            await policy.connect(url, 5.0)
        await asyncio.sleep(0.1)
    assert accepted == []


async def test_a_fetch_talks_to_the_checked_address_with_the_url_s_host_name(
    tmp_path: Path,
) -> None:
    async with live_server(HELLO) as base:
        port = httpx.URL(base).port
        resolver = fixed(["127.0.0.1"])
        policy = URLPolicy(
            ["blob.test"], allow_http=True, allow_private_networks=True, resolver=resolver
        )
        settings = ResultsSettings(dir=tmp_path, allowed_hosts=("blob.test",), allow_http=True)
        async with ResultFetcher(settings, policy=policy) as fetcher:
            await fetcher.fetch(f"http://blob.test:{port}/hello", tmp_path / "r")
    assert (tmp_path / "r").read_text() == f"hello blob.test:{port}"
    assert resolver.lookups == ["blob.test"]  # type: ignore[attr-defined]


async def test_the_next_checked_address_is_tried_when_one_refuses_the_connection() -> None:
    async with tcp_listener() as (port, accepted):
        policy = URLPolicy(
            ["blob.test"],
            allow_http=True,
            allow_private_networks=True,
            resolver=fixed(["127.0.0.2", "127.0.0.1"]),  # nothing listens on 127.0.0.2
        )
        sock = await policy.connect(f"http://blob.test:{port}/r", 5.0)
        with sock:
            assert sock.getpeername() == ("127.0.0.1", port)
        await asyncio.sleep(0.1)
    assert len(accepted) == 1


async def test_when_no_checked_address_answers_the_error_is_retryable_and_names_why() -> None:
    port = free_port()
    policy = URLPolicy(["127.0.0.1"], allow_http=True, allow_private_networks=True)
    with pytest.raises(FetchError, match=rf"cannot connect to 127\.0\.0\.1:{port}: ") as info:
        await policy.connect(f"http://127.0.0.1:{port}/r", 5.0)
    assert not info.value.permanent


@pytest.mark.parametrize(
    ("allowed", "match"),
    [(["files.example.com"], "not in results.allowed_hosts"), (["127.0.0.1"], "loopback")],
)
async def test_connect_refuses_without_the_pre_check_and_opens_no_socket(
    allowed: list[str], match: str
) -> None:
    policy = URLPolicy(allowed, allow_http=True)
    async with tcp_listener() as (port, accepted):
        with pytest.raises(UnsafeURLError, match=match):
            await policy.connect(f"http://127.0.0.1:{port}/r", 5.0)
        await asyncio.sleep(0.1)
    assert accepted == []
