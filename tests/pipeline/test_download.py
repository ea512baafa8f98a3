"""Result downloads on their own threads: TLS, content codings, timeouts, aborts, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import random
import ssl
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import trustme

from receiver.config.settings import ResultsSettings
from receiver.errors import FetchError, ResultTooLargeError
from receiver.pipeline.fetch import ResultFetcher
from receiver.pipeline.urlsafety import URLPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

BODY = random.Random(11).randbytes(3 * 1024 * 1024 + 7)
SHA = hashlib.sha256(BODY).hexdigest()


@dataclass
class RawServer:
    """An HTTP/1.1 server that sends ``answer`` (status line, headers, body) byte for byte,
    then holds the connection ``stall`` seconds before closing it; it records each request's
    head and, under TLS, the server name the client asked for."""

    answer: bytes
    stall: float = 0.0
    heads: list[bytes] = field(default_factory=list)
    names: list[str | None] = field(default_factory=list)
    port: int = 0
    connections: list[tuple[asyncio.Task[Any], asyncio.StreamWriter]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.append((task, writer))
        try:
            self.heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(self.answer)
            await writer.drain()
            await asyncio.sleep(self.stall)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def raw_server(
    answer: bytes, *, cert: trustme.LeafCert | None = None, stall: float = 0.0
) -> AsyncIterator[RawServer]:
    server = RawServer(answer, stall)
    context = None
    if cert is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(context)
        context.sni_callback = lambda _obj, name, _ctx: server.names.append(name)  # type: ignore[func-returns-value]
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()
        # Python 3.11's wait_closed() does not wait for open connections: end them here, or a
        # stalled answer's transport is collected in a later test (a ResourceWarning there).
        for task, writer in server.connections:
            writer.transport.abort()
            task.cancel()
        await asyncio.gather(*(task for task, _ in server.connections), return_exceptions=True)
        await listener.wait_closed()


def ok(body: bytes, *headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *headers, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def as_blob_test(*, private: bool = True) -> URLPolicy:
    """A policy for https://blob.test, which "resolves" to loopback (DNS is outside the project)."""

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    return URLPolicy(["blob.test"], allow_private_networks=private, resolver=resolve)


def settings(tmp_path: Path, **overrides: Any) -> ResultsSettings:
    values: dict[str, Any] = {
        "dir": tmp_path,
        "allowed_hosts": ("blob.test", "127.0.0.1"),
        "allow_http": True,
        "allow_private_networks": True,
        "connect_timeout": 5.0,
        "read_timeout": 10.0,
        "max_attempts": 2,
    }
    return ResultsSettings(**(values | overrides))


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_an_https_result_is_fetched_over_verified_tls_for_the_url_s_host(
    tmp_path: Path, ca: trustme.CA
) -> None:
    async with raw_server(ok(BODY), cert=ca.issue_cert("blob.test")) as server:
        fetcher = ResultFetcher(settings(tmp_path), policy=as_blob_test(), tls=trusting(ca))
        async with fetcher:
            info = await fetcher.fetch(
                f"https://blob.test:{server.port}/r?sig=s3cr3t", tmp_path / "r"
            )
    assert ((tmp_path / "r").read_bytes(), info.sha256, info.bytes) == (BODY, SHA, len(BODY))
    assert server.names == ["blob.test"]  # SNI
    request_line, *headers = server.heads[0].decode().split("\r\n")
    assert request_line == "GET /r?sig=s3cr3t HTTP/1.1"
    assert f"Host: blob.test:{server.port}" in headers
    assert "Accept-Encoding: identity" in headers


@pytest.mark.parametrize(
    ("issued_for", "trusted", "match"),
    [
        ("blob.test", False, "CERTIFICATE_VERIFY_FAILED"),  # no CA we trust signed it
        ("other.test", True, "Hostname mismatch"),  # a trusted certificate for another name
    ],
    ids=["untrusted-ca", "another-name"],
)
async def test_a_certificate_that_does_not_verify_is_refused_before_any_request(
    tmp_path: Path, ca: trustme.CA, issued_for: str, trusted: bool, match: str
) -> None:
    tls = trusting(ca) if trusted else None  # None: the process's own CAs (certifi)
    async with (
        raw_server(ok(BODY), cert=ca.issue_cert(issued_for)) as server,
        ResultFetcher(settings(tmp_path), policy=as_blob_test(), tls=tls) as fetcher,
    ):
        with pytest.raises(FetchError, match=match) as info:
            await fetcher.fetch(f"https://blob.test:{server.port}/r", tmp_path / "r")
    assert not info.value.permanent  # the store's certificate may be fixed: retried later
    assert server.heads == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress)],
)
async def test_a_gzip_or_deflate_body_is_stored_decoded(
    tmp_path: Path, coding: str, encode: Any
) -> None:
    async with (
        raw_server(ok(encode(BODY), f"Content-Encoding: {coding}")) as server,
        ResultFetcher(settings(tmp_path)) as fetcher,
    ):
        info = await fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
    assert ((tmp_path / "r").read_bytes(), info.sha256, info.bytes) == (BODY, SHA, len(BODY))


async def test_a_coding_without_a_decoder_is_stored_as_sent(tmp_path: Path) -> None:
    async with (
        raw_server(ok(BODY, "Content-Encoding: br")) as server,
        ResultFetcher(settings(tmp_path)) as fetcher,
    ):
        info = await fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
    assert (tmp_path / "r").read_bytes() == BODY
    assert info.sha256 == SHA


async def test_a_small_body_that_inflates_past_the_cap_is_refused_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    bomb = gzip.compress(bytes(256 * 1024 * 1024))  # 256 MiB of zeros in ~250 KiB
    async with (
        raw_server(ok(bomb, "Content-Encoding: gzip")) as server,
        ResultFetcher(settings(tmp_path, max_bytes=8 * 1024 * 1024)) as fetcher,
    ):
        with pytest.raises(ResultTooLargeError, match=r"exceeds results\.max_bytes"):
            await fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
    assert len(server.heads) == 1  # refused for good: not asked again
    assert list(tmp_path.iterdir()) == []


async def test_a_body_that_is_not_the_coding_it_claims_fails_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    async with (
        raw_server(ok(b"plain text, not gzip", "Content-Encoding: gzip")) as server,
        ResultFetcher(settings(tmp_path)) as fetcher,
    ):
        with pytest.raises(FetchError, match="cannot be decoded"):
            await fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
    assert list(tmp_path.iterdir()) == []


async def test_a_body_that_stops_arriving_times_out_and_is_retried(tmp_path: Path) -> None:
    half = ok(BODY)[: len(BODY) // 2]
    async with (
        raw_server(half, stall=5.0) as server,
        ResultFetcher(settings(tmp_path, read_timeout=0.3)) as fetcher,
    ):
        with pytest.raises(
            FetchError, match=r"failed 2 times: no data from 127\.0\.0\.1 for 0\.3 s"
        ):
            await fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
    assert len(server.heads) == 2
    assert list(tmp_path.iterdir()) == []


async def test_closing_the_fetcher_aborts_a_download_and_it_is_not_started_again(
    tmp_path: Path,
) -> None:
    async with raw_server(ok(BODY)[: len(BODY) // 2], stall=30.0) as server:
        fetcher = ResultFetcher(settings(tmp_path, max_attempts=5))
        task = asyncio.create_task(
            fetcher.fetch(f"http://127.0.0.1:{server.port}/r", tmp_path / "r")
        )
        while not any(p.name.endswith(".part") for p in tmp_path.iterdir()):
            await asyncio.sleep(0.01)
        await fetcher.aclose()
        with pytest.raises(FetchError, match="shut down") as info:
            await asyncio.wait_for(task, 5.0)
    assert not info.value.permanent
    assert len(server.heads) == 1
    assert list(tmp_path.iterdir()) == []
