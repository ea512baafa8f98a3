"""ResultFetcher against real loopback servers that record every request they get."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import itertools
import random
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psutil
import pytest
import structlog.testing
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from receiver.config.settings import ResultsSettings
from receiver.errors import FetchError, ResultTooLargeError, UnsafeURLError
from receiver.pipeline.fetch import ResultFetcher
from receiver.pipeline.urlsafety import URLPolicy
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from starlette.requests import Request

BODY = random.Random(7).randbytes(3 * 1024 * 1024 + 123)
SHA = hashlib.sha256(BODY).hexdigest()
SIGNED = "?X-Amz-Credential=AKIDSECRETCRED&X-Amz-Signature=deadbeefsecretsig"


def ok() -> Response:
    return Response(BODY, media_type="application/octet-stream")


def status(code: int, **headers: str) -> Callable[[], Response]:
    return lambda: Response(b"<Error>nope</Error>", status_code=code, headers=headers)


def redirect(location: str) -> Callable[[], Response]:
    return lambda: Response(status_code=302, headers={"location": location})


def truncated() -> Response:
    """Promises the whole body, sends a third of it; uvicorn then drops the connection."""
    return Response(BODY[: len(BODY) // 3], headers={"content-length": str(len(BODY))})


STREAMING: set[object] = set()
"""The endless bodies being sent right now."""


def endless() -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        token = object()
        STREAMING.add(token)
        try:
            while True:
                yield b"x" * 65536
                await asyncio.sleep(0)
        finally:
            STREAMING.discard(token)

    return StreamingResponse(chunks(), media_type="application/octet-stream")


@dataclass
class Blobs:
    """A blob host: each path answers its planned responses in turn, then ``ok()``."""

    plan: dict[str, list[Callable[[], Response]]] = field(default_factory=dict)
    seen: list[tuple[str, float]] = field(default_factory=list)

    async def serve(self, request: Request) -> Response:
        self.seen.append((request.url.path, time.monotonic()))
        planned = self.plan.get(request.url.path)
        return planned.pop(0)() if planned else ok()

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.serve)])


@pytest.fixture
async def blobs() -> AsyncIterator[tuple[str, Blobs]]:
    recorder = Blobs()
    async with live_server(recorder.app()) as url:
        yield url, recorder


def loopback_settings(tmp_path: Path, **overrides: Any) -> ResultsSettings:
    values: dict[str, Any] = {
        "dir": tmp_path / "results",
        "allowed_hosts": ("127.0.0.1",),
        "allow_http": True,
        "allow_private_networks": True,
        "connect_timeout": 5.0,
        "read_timeout": 10.0,
        "max_attempts": 4,
    }
    return ResultsSettings(**(values | overrides))


class Sleeps:
    """An injected sleep that records the delays asked for and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def fetcher(
    tmp_path: Path, sleep: Any = None, policy: URLPolicy | None = None, **overrides: Any
) -> ResultFetcher:
    kwargs: dict[str, Any] = {"backoff_base": 0.01, "policy": policy}
    if sleep is not None:
        kwargs["sleep"] = sleep
    return ResultFetcher(loopback_settings(tmp_path, **overrides), **kwargs)


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


async def test_the_result_on_disk_is_byte_identical_with_its_sha256(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    dest = tmp_path / "results" / "reducto" / "job-1.result"
    async with fetcher(tmp_path) as f:
        info = await f.fetch(f"{url}/blob/a{SIGNED}", dest)
    assert (info.path, info.sha256, info.bytes) == (dest, SHA, len(BODY))
    assert dest.read_bytes() == BODY
    assert files_in(dest.parent) == ["job-1.result"]
    assert server.paths == ["/blob/a"]


@pytest.mark.parametrize(
    ("url", "overrides", "match"),
    [
        ("http://127.0.0.1:{port}/blob/a", {}, r"127\.0\.0\.1, which is not a public.*loopback"),
        ("http://localhost:{port}/blob/a", {"allowed_hosts": ("localhost",)}, "loopback"),
        ("http://[::1]:{port}/blob/a", {"allowed_hosts": ("::1",)}, "loopback"),
        ("http://[::ffff:127.0.0.1]:{port}/a", {"allowed_hosts": ("::ffff:7f00:1",)}, "mapped"),
        ("http://10.0.0.1:{port}/blob/a", {"allowed_hosts": ("10.0.0.1",)}, "private"),
        ("http://169.254.169.254/latest/", {"allowed_hosts": ("169.254.169.254",)}, "metadata"),
        ("http://[fc00::1]:{port}/blob/a", {"allowed_hosts": ("fc00::1",)}, "unique-local"),
        ("http://2130706433:{port}/blob/a", {"allowed_hosts": ("2130706433",)}, "non-canonical"),
        ("http://0177.0.0.1:{port}/blob/a", {}, "malformed"),
        ("http://0x7f.1:{port}/blob/a", {"allowed_hosts": ("0x7f.1",)}, "non-canonical"),
        ("http://127.1:{port}/blob/a", {"allowed_hosts": ("127.1",)}, "non-canonical"),
        ("http://127.0.0.1:{port}/blob/a", {"allow_http": False}, "allow_http is false"),
        ("http://u:p@127.0.0.1:{port}/blob/a", {"allow_private_networks": True}, "credentials"),
        ("http://127.0.0.1:{port}/a", {"allowed_hosts": ("b.example.com",)}, "allowed_hosts"),
        ("http://127.0.0.1:{port}/a", {"allowed_hosts": ()}, "allowed_hosts is empty"),
    ],
)
async def test_refused_urls_are_never_requested(
    blobs: tuple[str, Blobs], tmp_path: Path, url: str, overrides: dict[str, Any], match: str
) -> None:
    base, server = blobs
    settings: dict[str, Any] = {"allow_private_networks": False} | overrides
    dest = tmp_path / "results" / "r.result"
    async with fetcher(tmp_path, **settings) as f:
        with pytest.raises(UnsafeURLError, match=match) as info:
            await f.fetch(url.format(port=httpx.URL(base).port) + SIGNED, dest)
    assert info.value.permanent
    assert "secret" not in str(info.value).lower()
    assert server.paths == []
    assert files_in(dest.parent) == []


async def test_localhost_is_fetched_when_private_networks_are_allowed(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    base, server = blobs
    async with fetcher(tmp_path, allowed_hosts=("localhost",)) as f:
        info = await f.fetch(f"http://localhost:{httpx.URL(base).port}/blob/a", tmp_path / "r")
    assert info.sha256 == SHA
    assert server.paths == ["/blob/a"]


async def test_redirects_within_the_policy_are_followed(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/r"] = [redirect("/blob/b?X-Amz-Signature=other")]
    async with fetcher(tmp_path) as f:
        info = await f.fetch(f"{url}/blob/r{SIGNED}", tmp_path / "r")
    assert info.sha256 == SHA
    assert server.paths == ["/blob/r", "/blob/b"]


async def test_a_redirect_to_a_refused_address_is_refused_before_it_is_requested(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    accepted: list[str] = []

    def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(str(writer.get_extra_info("peername")))
        writer.close()

    other = await asyncio.start_server(on_connect, "127.0.0.2", 0)
    other_port = other.sockets[0].getsockname()[1]
    server.plan["/blob/r"] = [redirect(f"http://127.0.0.2:{other_port}/blob/a")]
    # Only 127.0.0.1 is exempt, so the first hop passes and the loopback target does not.
    policy = URLPolicy(["127.0.0.1", "127.0.0.2"], allow_http=True, allowed_networks=["127.0.0.1"])
    try:
        async with fetcher(tmp_path, policy=policy, allow_private_networks=False) as f:
            with pytest.raises(UnsafeURLError, match=r"127\.0\.0\.2, which is not a public"):
                await f.fetch(f"{url}/blob/r", tmp_path / "r")
        await asyncio.sleep(0.1)
    finally:
        other.close()
        await other.wait_closed()
    assert server.paths == ["/blob/r"]
    assert accepted == []


async def test_a_redirect_to_a_host_outside_the_allowlist_is_refused_before_it_is_requested(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    port = httpx.URL(url).port
    server.plan["/blob/r"] = [redirect(f"http://localhost:{port}/blob/a")]
    async with fetcher(tmp_path) as f:
        with pytest.raises(UnsafeURLError, match=r"'localhost' is not in results\.allowed_hosts"):
            await f.fetch(f"{url}/blob/r", tmp_path / "r")
    assert server.paths == ["/blob/r"]


async def test_more_than_five_redirects_fail_without_retrying(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/loop"] = [redirect("/blob/loop")] * 10
    async with fetcher(tmp_path) as f:
        with pytest.raises(FetchError, match="more than 5 redirects"):
            await f.fetch(f"{url}/blob/loop", tmp_path / "r")
    assert server.paths == ["/blob/loop"] * 6


async def test_503_twice_then_200_succeeds_and_honours_retry_after(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(503, **{"retry-after": "1"})] * 2
    async with fetcher(tmp_path) as f:
        info = await f.fetch(f"{url}/blob/a", tmp_path / "r")
    assert info.sha256 == SHA
    times = [t for _, t in server.seen]
    assert len(times) == 3
    assert all(later - earlier >= 0.95 for earlier, later in itertools.pairwise(times))


async def test_429_with_an_http_date_retry_after_is_honoured(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    retry_at = int(time.time()) + 2  # an HTTP date has whole seconds
    when = email.utils.formatdate(retry_at, usegmt=True)
    server.plan["/blob/a"] = [status(429, **{"retry-after": when})]
    async with fetcher(tmp_path) as f:
        await f.fetch(f"{url}/blob/a", tmp_path / "r")
    (_, first), (_, second) = server.seen
    # Not before the date (in wall-clock time; the server stamps with the monotonic clock,
    # whatever the machine's load delayed the first request by), and not long after it.
    second_wall = second + (time.time() - time.monotonic())
    assert second_wall >= retry_at - 0.05
    assert second - first <= 3.5


async def test_a_huge_retry_after_is_capped(blobs: tuple[str, Blobs], tmp_path: Path) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(503, **{"retry-after": "86400"})]
    sleeps = Sleeps()
    async with fetcher(tmp_path, sleep=sleeps) as f:
        await f.fetch(f"{url}/blob/a", tmp_path / "r")
    assert sleeps.delays == [60.0]


async def test_without_retry_after_backoff_is_exponential_with_full_jitter(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(500), status(502), status(408)]
    sleeps = Sleeps()
    async with fetcher(tmp_path, sleep=sleeps) as f:
        await f.fetch(f"{url}/blob/a", tmp_path / "r")
    assert len(sleeps.delays) == 3
    assert all(0 <= d <= 0.01 * 2**i for i, d in enumerate(sleeps.delays))
    assert len(server.paths) == 4


async def test_after_max_attempts_the_error_is_retryable_and_leaves_nothing(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(503, **{"retry-after": "7"})] * 3
    async with fetcher(tmp_path, sleep=Sleeps(), max_attempts=3) as f:
        with pytest.raises(FetchError, match=r"failed 3 times: 127\.0\.0\.1 answered 503") as info:
            await f.fetch(f"{url}/blob/a", tmp_path / "results" / "r")
    assert (info.value.expired, info.value.permanent, info.value.retry_after) == (False, False, 7)
    assert len(server.paths) == 3
    assert files_in(tmp_path / "results") == []


async def test_connection_failures_are_retried_then_reported(tmp_path: Path) -> None:
    sleeps = Sleeps()
    async with fetcher(tmp_path, sleep=sleeps, max_attempts=3) as f:
        with pytest.raises(
            FetchError,
            match=r"failed 3 times: cannot connect to 127\.0\.0\.1:\d+: Connection refused",
        ) as info:
            await f.fetch(f"http://127.0.0.1:{free_port()}/blob/a", tmp_path / "r")
    assert not info.value.expired
    assert len(sleeps.delays) == 2


@pytest.mark.parametrize("code", [403, 404, 410])
async def test_403_404_410_mean_the_url_expired_and_are_not_retried(
    blobs: tuple[str, Blobs], tmp_path: Path, code: int
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(code)]
    async with fetcher(tmp_path) as f:
        with pytest.raises(FetchError, match=f"answered {code}") as info:
            await f.fetch(f"{url}/blob/a{SIGNED}", tmp_path / "r")
    assert info.value.expired
    assert "secret" not in str(info.value).lower()
    assert server.paths == ["/blob/a"]


async def test_other_client_errors_fail_at_once_without_expiring(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [status(400)]
    async with fetcher(tmp_path) as f:
        with pytest.raises(FetchError, match="unexpected status 400") as info:
            await f.fetch(f"{url}/blob/a", tmp_path / "r")
    assert not info.value.expired
    assert server.paths == ["/blob/a"]


async def test_a_content_length_over_the_cap_is_refused_before_the_body(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    async with fetcher(tmp_path, max_bytes=len(BODY) - 1) as f:
        with pytest.raises(ResultTooLargeError, match=r"over results\.max_bytes") as info:
            await f.fetch(f"{url}/blob/a", tmp_path / "results" / "r")
    assert info.value.permanent
    assert server.paths == ["/blob/a"]
    assert files_in(tmp_path / "results") == []


# 1 MiB is cut off before the first hand-over to the writer thread; 10 MiB after one or two,
# usually while one is still in flight (the body is written in ~4 MiB batches).
@pytest.mark.parametrize("cap_mib", [1, 10])
async def test_a_body_without_length_is_aborted_once_it_passes_the_cap(
    blobs: tuple[str, Blobs], tmp_path: Path, cap_mib: int
) -> None:
    url, server = blobs
    server.plan["/blob/endless"] = [endless]
    async with fetcher(tmp_path, max_bytes=cap_mib * 1024 * 1024) as f:
        with pytest.raises(ResultTooLargeError, match=r"exceeds results\.max_bytes"):
            await f.fetch(f"{url}/blob/endless", tmp_path / "results" / "r")
    assert server.paths == ["/blob/endless"]
    assert files_in(tmp_path / "results") == []


async def test_a_checksum_mismatch_fails_and_keeps_the_previous_file(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, _ = blobs
    dest = tmp_path / "results" / "r"
    dest.parent.mkdir()
    dest.write_bytes(b"previous")
    async with fetcher(tmp_path) as f:
        with pytest.raises(FetchError, match=f"has sha256 {SHA}, expected 0000") as info:
            await f.fetch(f"{url}/blob/a", dest, expected_sha256="0" * 64)
    assert not info.value.permanent
    assert dest.read_bytes() == b"previous"
    assert files_in(dest.parent) == ["r"]


async def test_a_matching_checksum_is_accepted_in_any_case(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, _ = blobs
    async with fetcher(tmp_path) as f:
        info = await f.fetch(f"{url}/blob/a", tmp_path / "r", expected_sha256=SHA.upper())
    assert info.sha256 == SHA


async def test_an_unwritable_destination_is_a_fetch_error(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, _ = blobs
    (tmp_path / "not-a-dir").write_bytes(b"")
    async with fetcher(tmp_path) as f:
        with pytest.raises(FetchError, match="cannot write the result to") as info:
            await f.fetch(f"{url}/blob/a", tmp_path / "not-a-dir" / "r")
    assert not info.value.permanent


async def test_a_truncated_download_is_discarded_and_restarted(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/a"] = [truncated]
    dest = tmp_path / "results" / "r"
    async with fetcher(tmp_path) as f:
        info = await f.fetch(f"{url}/blob/a", dest)
    assert (info.bytes, dest.read_bytes()) == (len(BODY), BODY)
    assert server.paths == ["/blob/a", "/blob/a"]
    assert files_in(dest.parent) == ["r"]


async def test_a_cancelled_fetch_leaves_no_temp_file(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/endless"] = [endless]
    results = tmp_path / "results"
    async with fetcher(tmp_path) as f:
        task = asyncio.create_task(f.fetch(f"{url}/blob/endless", results / "r"))
        while not any(name.endswith(".part") for name in files_in(results)):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The server learns the download was abandoned (a reset), and stops sending.
        deadline = time.monotonic() + 2
        while STREAMING and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not STREAMING, "the server is still sending an abandoned body"
    assert files_in(results) == []


async def test_the_presigned_query_never_reaches_logs_or_errors(
    blobs: tuple[str, Blobs], tmp_path: Path
) -> None:
    url, server = blobs
    server.plan["/blob/b"] = [status(503)] * 2
    async with fetcher(tmp_path, sleep=Sleeps(), max_attempts=2) as f:
        with structlog.testing.capture_logs() as events:
            await f.fetch(f"{url}/blob/a{SIGNED}", tmp_path / "a")
            with pytest.raises(FetchError) as info:
                await f.fetch(f"{url}/blob/b{SIGNED}", tmp_path / "b")
    names = [e["event"] for e in events]
    assert names == ["result_fetched", "result_fetch_retry"]
    assert {e["host"] for e in events} == {"127.0.0.1"}
    for text in (repr(events), str(info.value)):
        assert "SECRET" not in text.upper()
        assert "X-Amz" not in text


async def test_proxies_from_the_environment_are_ignored(
    blobs: tuple[str, Blobs], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, server = blobs
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{free_port()}")
    async with fetcher(tmp_path, sleep=Sleeps(), max_attempts=1) as f:
        info = await f.fetch(f"{url}/blob/a", tmp_path / "r")
    assert info.sha256 == SHA
    assert server.paths == ["/blob/a"]


SERVER = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

CHUNK = bytes(range(256)) * 1024


async def big(request):
    size = int(request.query_params["size"])

    async def body():
        for _ in range(size // len(CHUNK)):
            yield CHUNK

    return StreamingResponse(body(), headers={"content-length": str(size)})


app = Starlette(routes=[Route("/big", big)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


@contextlib.asynccontextmanager
async def subprocess_server(tmp_path: Path) -> AsyncIterator[str]:
    """The big-body server in its own process, so only the fetcher's memory is measured."""
    script = tmp_path / "big_server.py"
    script.write_text(SERVER, encoding="utf-8")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, str(script), str(port))
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert proc.returncode is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not start"
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        await proc.wait()


async def test_a_512_mib_result_streams_to_disk_in_bounded_memory(tmp_path: Path) -> None:
    size = 512 * 1024 * 1024
    chunk = bytes(range(256)) * 1024
    expected = hashlib.sha256()
    for _ in range(size // len(chunk)):
        expected.update(chunk)
    process = psutil.Process()
    async with subprocess_server(tmp_path) as url, fetcher(tmp_path) as f:
        await f.fetch(f"{url}/big?size={len(chunk) * 8}", tmp_path / "warm-up")
        baseline = peak = process.memory_info().rss
        dirty_baseline = dirty_peak = dirty_bytes()
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak, dirty_peak
            while not done.is_set():
                peak = max(peak, process.memory_info().rss)
                dirty_peak = max(dirty_peak, dirty_bytes())
                await asyncio.sleep(0.005)

        sampler = asyncio.create_task(sample())
        try:
            info = await f.fetch(
                f"{url}/big?size={size}", tmp_path / "big", expected_sha256=expected.hexdigest()
            )
        finally:
            done.set()
            await sampler
    assert info.bytes == size == (tmp_path / "big").stat().st_size
    (tmp_path / "big").unlink()  # pytest keeps recent tmp dirs; don't keep 512 MiB in them
    assert peak - baseline < 64 * 1024 * 1024, f"RSS grew by {(peak - baseline) >> 20} MiB"
    # Writeback starts as the body arrives: the kernel does not hold the result as dirty pages
    # until the final fsync. Only checked where, left alone, it would (512 MiB under its
    # background threshold); below it the kernel's own writeback would pass it anyway.
    if background_writeback_threshold() > size:
        grew = dirty_peak - dirty_baseline
        assert grew < 128 * 1024 * 1024, f"dirty pages grew by {grew >> 20} MiB"


def dirty_bytes() -> int:
    """The system's dirty page cache (/proc/meminfo ``Dirty``), in bytes."""
    return _meminfo("Dirty")


def background_writeback_threshold() -> int:
    """Dirty bytes at which the kernel starts writing back on its own (vm.dirty_background_*)."""
    with open("/proc/sys/vm/dirty_background_bytes", encoding="ascii") as fh:
        fixed = int(fh.read())
    if fixed:
        return fixed
    with open("/proc/sys/vm/dirty_background_ratio", encoding="ascii") as fh:
        ratio = int(fh.read())
    return _meminfo("MemAvailable") * ratio // 100


def _meminfo(field: str) -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} line in /proc/meminfo")
