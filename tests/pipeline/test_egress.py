"""One outbound configuration ([egress]) for result downloads, the job API client and the http
handler: a loopback CONNECT proxy, a loopback TLS server with a private CA, no_proxy."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import trustme

from handlers.http import HttpHandler
from receiver.completion import Completion
from receiver.config.settings import EgressSettings
from receiver.errors import ConfigError, FetchError, UnsafeURLError
from receiver.pipeline import egress
from receiver.pipeline.egress import Egress
from receiver.pipeline.fetch import ResultFetcher
from receiver.pipeline.urlsafety import URLPolicy
from receiver.secret import Secret
from tests.pipeline.test_download import BODY, SHA, ok, raw_server, settings
from tests.support import free_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

PUBLIC = "93.184.216.34"  # what blob.test "resolves" to here: public, so the policy lets it by


@dataclass
class ConnectProxy:
    """An HTTP CONNECT proxy on loopback; every name it is asked for is 127.0.0.1."""

    heads: list[str] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            self.heads.append(head)
            _, authority, _ = head.split(" ", 2)
            port = int(authority.rsplit(":", 1)[1])
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    @property
    def targets(self) -> list[str]:
        return [head.split(" ", 2)[1] for head in self.heads]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


@contextlib.asynccontextmanager
async def connect_proxy() -> AsyncIterator[ConnectProxy]:
    proxy = ConnectProxy()
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_bundle(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "corporate-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def policy(resolved: str | None = PUBLIC, **kwargs: Any) -> URLPolicy:
    """blob.test resolves to ``resolved`` here (None: this network cannot resolve it)."""

    async def resolve(host: str, port: int) -> list[str]:
        if resolved is None:
            raise OSError(-2, "Name or service not known")
        return [resolved]

    return URLPolicy(["blob.test"], resolver=resolve, **kwargs)


def through(proxy: ConnectProxy, ca_bundle: Path, **kwargs: Any) -> Egress:
    return Egress(Secret(f"http://127.0.0.1:{proxy.port}"), ca_bundle=ca_bundle, **kwargs)


async def test_a_download_tunnels_through_the_proxy_and_trusts_the_configured_ca(
    tmp_path: Path, ca: trustme.CA, ca_bundle: Path
) -> None:
    async with (
        connect_proxy() as proxy,
        raw_server(ok(BODY), cert=ca.issue_cert("blob.test")) as server,
    ):
        fetcher = ResultFetcher(settings(tmp_path), policy=policy(),
                                egress=through(proxy, ca_bundle))  # fmt: skip
        async with fetcher:
            info = await fetcher.fetch(f"https://blob.test:{server.port}/r?sig=x", tmp_path / "r")
    assert (info.sha256, info.bytes) == (SHA, len(BODY))
    assert proxy.targets == [f"blob.test:{server.port}"]
    assert server.names == ["blob.test"]  # TLS to the final host, inside the tunnel


async def test_a_name_this_network_cannot_resolve_is_left_to_the_proxy(
    tmp_path: Path, ca: trustme.CA, ca_bundle: Path
) -> None:
    async with (
        connect_proxy() as proxy,
        raw_server(ok(BODY), cert=ca.issue_cert("blob.test")) as server,
    ):
        unresolved = policy(resolved=None)
        async with ResultFetcher(settings(tmp_path), policy=unresolved,
                                 egress=through(proxy, ca_bundle)) as fetcher:  # fmt: skip
            info = await fetcher.fetch(f"https://blob.test:{server.port}/r", tmp_path / "r")
    assert info.sha256 == SHA
    assert proxy.targets == [f"blob.test:{server.port}"]


@pytest.mark.parametrize(
    ("url", "resolved", "match"),
    [
        ("https://other.test/r", PUBLIC, "not in results.allowed_hosts"),
        ("https://blob.test/r", "10.0.0.8", "not a public address"),
        ("https://blob.test/r", "169.254.169.254", "metadata"),
        ("http://blob.test/r", PUBLIC, "scheme 'http' is not allowed"),
    ],
)
async def test_the_final_host_is_still_refused_through_the_proxy(
    tmp_path: Path, ca_bundle: Path, url: str, resolved: str, match: str
) -> None:
    async with connect_proxy() as proxy:
        strict = settings(tmp_path, allow_http=False)
        async with ResultFetcher(strict, policy=policy(resolved),
                                 egress=through(proxy, ca_bundle)) as fetcher:  # fmt: skip
            with pytest.raises(UnsafeURLError, match=match):
                await fetcher.fetch(url, tmp_path / "r")
    assert proxy.heads == [], "the proxy was asked for a refused host"


async def test_a_no_proxy_host_is_reached_directly(
    tmp_path: Path, ca: trustme.CA, ca_bundle: Path
) -> None:
    async with (
        connect_proxy() as proxy,
        raw_server(ok(BODY), cert=ca.issue_cert("blob.test")) as server,
    ):
        direct = through(proxy, ca_bundle, no_proxy=(".test",))
        async with ResultFetcher(settings(tmp_path),
                                 policy=policy("127.0.0.1", allow_private_networks=True),
                                 egress=direct) as fetcher:  # fmt: skip
            info = await fetcher.fetch(f"https://blob.test:{server.port}/r", tmp_path / "r")
    assert info.sha256 == SHA
    assert proxy.heads == []


async def test_a_proxy_that_refuses_the_tunnel_is_a_retryable_error_without_its_password(
    tmp_path: Path, ca_bundle: Path
) -> None:
    async with raw_server(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n") as refusing:
        secret_proxy = Egress(Secret(f"http://me:pa55word@127.0.0.1:{refusing.port}"),
                              ca_bundle=ca_bundle)  # fmt: skip
        async with ResultFetcher(settings(tmp_path, max_attempts=1), policy=policy(),
                                 egress=secret_proxy) as fetcher:  # fmt: skip
            with pytest.raises(FetchError, match="refused CONNECT") as caught:
                await fetcher.fetch("https://blob.test/r", tmp_path / "r")
    assert not caught.value.permanent
    assert "pa55word" not in str(caught.value)
    assert "Proxy-Authorization: Basic bWU6cGE1NXdvcmQ=" in refusing.heads[0].decode()


async def test_the_job_api_client_uses_the_same_proxy_and_ca(
    ca: trustme.CA, ca_bundle: Path
) -> None:
    async with (
        connect_proxy() as proxy,
        raw_server(
            ok(b"{}", "Content-Type: application/json"), cert=ca.issue_cert("blob.test")
        ) as server,
        httpx.AsyncClient(**through(proxy, ca_bundle).client_options()) as client,
    ):
        response = await client.get(f"https://blob.test:{server.port}/job/1")
    assert response.status_code == 200
    assert proxy.targets == [f"blob.test:{server.port}"]


async def test_the_http_handler_uses_the_configured_egress(ca: trustme.CA, ca_bundle: Path) -> None:
    completion = Completion(id=1, source="reducto", job_id="job-1", state="succeeded",
                            provider_status="Completed", metadata={})  # fmt: skip
    async with (
        connect_proxy() as proxy,
        raw_server(ok(b""), cert=ca.issue_cert("hooks.test")) as server,
    ):
        egress.configure(through(proxy, ca_bundle))
        try:
            handler = HttpHandler(name="notify", url=f"https://hooks.test:{server.port}/hook")
            await handler.handle(completion)
            await handler.close()
        finally:
            egress.configure(Egress())
    assert proxy.targets == [f"hooks.test:{server.port}"]


async def test_environment_proxies_count_only_when_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead)
    async with raw_server(ok(b"hi")) as server:
        direct = Egress().client_options()
        async with httpx.AsyncClient(**direct) as client:
            response = await client.get(f"http://127.0.0.1:{server.port}/")
    assert response.content == b"hi"
    monkeypatch.setenv("CORP_PROXY", dead)
    named = EgressSettings.model_validate({"proxy": "env:CORP_PROXY"})
    assert Egress.from_settings(named).proxy_url == httpx.URL(dead)


def test_an_unnamed_proxy_comes_from_the_environment_for_every_connection() -> None:
    env = {"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": "localhost, .internal"}
    default = Egress.from_settings(EgressSettings(), env)
    assert default.proxy_url == httpx.URL("http://proxy.corp:3128")
    assert default.no_proxy == ("localhost", ".internal")
    assert default.proxy_for(httpx.URL("https://bucket.s3.amazonaws.com/r")) is not None
    assert default.proxy_for(httpx.URL("https://api.internal/job/1")) is None
    named = EgressSettings.model_validate({"proxy": "http://other:8080", "no_proxy": []})
    assert Egress.from_settings(named, env).proxy_url == httpx.URL("http://other:8080")
    assert Egress.from_settings(named, env).no_proxy == ()
    ignored = EgressSettings.model_validate({"environment": False})
    assert Egress.from_settings(ignored, env) == Egress()
    assert Egress.from_settings(EgressSettings(), {"https_proxy": " "}) == Egress()


def test_the_no_proxy_rules() -> None:
    e = Egress(Secret("http://proxy.corp:3128"),
               no_proxy=("localhost", ".internal", "corp.example", "10.1.2.3"))  # fmt: skip
    bypassed = ["localhost", "a.internal", "corp.example", "x.corp.example", "10.1.2.3"]
    proxied = ["internal", "xcorp.example", "10.1.2.4", "s3.amazonaws.com"]
    assert [h for h in bypassed + proxied if e.bypasses(h)] == bypassed
    assert Egress(Secret("http://p:1"), no_proxy=("*",)).bypasses("anything")


def test_a_proxy_must_be_an_http_url() -> None:
    with pytest.raises(ConfigError, match=r"egress\.proxy"):
        Egress.from_settings(EgressSettings.model_validate({"proxy": "socks5://p:1080"}))


def test_the_trust_store_is_the_operating_systems_when_asked(ca_bundle: Path) -> None:
    import truststore

    assert isinstance(Egress(truststore=True).ssl_context, truststore.SSLContext)
    assert isinstance(Egress(ca_bundle=ca_bundle).ssl_context, ssl.SSLContext)
    with pytest.raises(ConfigError, match="ca_bundle"):
        _ = Egress(ca_bundle=ca_bundle.with_name("missing.pem")).ssl_context
