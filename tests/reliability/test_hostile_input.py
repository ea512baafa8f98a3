"""Hostile requests against a real service process (uvicorn with httptools, as deployed):
never a 5xx, nothing stored without a valid signature, slow and malformed requests bounded.

Oversized bodies, declared or streamed, are refused with 413 in tests/intake/test_webhooks.py; here
they are part of the fuzzed mix.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import socket
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.service import Service
from tests.reliability.test_v1a_signatures import PUBLIC_KEY
from tests.support import SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

HMAC_KEY = "docurift-hostile-key-0123456789"
MAX_BODY = 8192
SIGNED_NAMES = [f"{family}-{name}" for family in ("svix", "webhook")
                for name in ("id", "timestamp", "signature")]  # fmt: skip
OTHER_NAMES = ["x-docurift-signature", "x-docurift-timestamp", "x-docurift-event-id",
               "content-type", "transfer-encoding-x", "host-x"]  # fmt: skip


@pytest.fixture(scope="module")
def hostile_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service with a svix source (secret and public key) and an HMAC source."""
    import asyncio

    home = tmp_path_factory.mktemp("hostile")
    config = home / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{home / "data"}"
[server]
max_body_bytes = {MAX_BODY}
body_timeout_seconds = 1
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
public_keys = ["{PUBLIC_KEY}"]
[sources.docurift]
provider = "docurift"
signature = "docurift"
secrets = ["{HMAC_KEY}"]
[[handlers]]
name = "files"
type = "file"
dir = "{home / "out"}"
""",
        encoding="utf-8",
    )
    service = Service(config, home / "service.log")
    service.start()
    try:
        asyncio.run(service.wait_ready())
        yield service
    finally:
        service.close()
    log = service.log_text()
    assert SECRET.removeprefix("whsec_") not in log
    assert HMAC_KEY not in log


def _stored(service: Service) -> tuple[set[str], int]:
    db = service.config.parent / "data" / "jobhook.db"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        ids = {row[0] for row in conn.execute("SELECT message_id FROM deliveries")}
        (jobs,) = conn.execute("SELECT count(*) FROM jobs").fetchone()
    return ids, int(jobs)


# Header values as bytes the HTTP grammar allows (visible ASCII, obs-text, inner spaces).
_VALUE_BYTES = st.binary(min_size=0, max_size=80).map(
    lambda b: bytes(c for c in b if c >= 0x21 and c != 0x7F)
)
_B64 = st.binary(min_size=0, max_size=80).map(lambda b: base64.b64encode(b).decode())
_NOW = int(time.time())
_TIMESTAMPS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.integers(_NOW - 600, _NOW + 600).map(str),
    st.floats(allow_nan=True).map(str),
    st.text(alphabet="0123456789\u0660\u0661\u0662\u0663\u0669\uff11 -+.e", max_size=14),
    st.just(""),
)
_ENTRIES = st.tuples(st.sampled_from(["v1", "v1a", "v2", "v0", "V1", "v1b", ""]), _B64)
_SIGNATURES = st.one_of(
    _B64.map(lambda v: "v1," + v),
    _B64.map(lambda v: "v1a," + v),
    st.lists(_ENTRIES, max_size=6).map(lambda es: " ".join(f"{v},{s}" for v, s in es)),
    st.text(max_size=60),
)
_BODIES = st.one_of(
    st.binary(max_size=512),
    st.text(max_size=300).map(str.encode),
    st.builds(lambda j, s: reducto_body(j, s), st.text(max_size=40),
              st.sampled_from(["Completed", "Failed", "Pending", "", "Completed\u0000"])),
    st.binary(min_size=MAX_BODY + 1, max_size=MAX_BODY + 64),
    st.just(b"{}"),
)  # fmt: skip


_KNOWN = st.sampled_from(["reducto", "reducto", "docurift"])
_RESERVED = {"host", "content-length", "transfer-encoding", "connection", "expect", "upgrade",
             "te", "trailer"}  # fmt: skip
_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,30}", fullmatch=True).filter(
    lambda n: n.lower() not in _RESERVED
)


def _clean(text: str) -> str:
    """Text fit for a header value (no control characters, no surrounding space)."""
    return "".join(c for c in text if c >= " " and c != "\x7f").strip()


def _header_value(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return bytes(c for c in raw if c >= 0x20 and c != 0x7F).strip()


@st.composite
def hostile_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A request that no sender with the secret made: random, forged, replayed or mangled."""
    source = draw(st.sampled_from(["reducto"] * 6 + ["docurift"] * 3 + ["unknown"]) | _KNOWN
                  | _KNOWN | st.from_regex(r"[A-Za-z0-9._~-]{1,24}", fullmatch=True))  # fmt: skip
    body = draw(_BODIES)
    headers: list[tuple[str, bytes]] = []
    kind = draw(st.sampled_from(["random", "forged", "other-body", "other-secret", "mangled"]))
    msg_id = _clean(draw(st.text(max_size=300)))
    if kind in ("other-body", "other-secret", "mangled"):
        other = "whsec_" + base64.b64encode(draw(st.binary(min_size=24, max_size=24))).decode()
        secret = other if kind == "other-secret" else SECRET
        signed_for = body if kind == "mangled" else body + b" "
        with contextlib.suppress(UnicodeDecodeError):
            for name, value in signed_headers(signed_for.decode(), secret=secret,
                                              msg_id="forged-" + msg_id[:200]).items():  # fmt: skip
                headers.append((name, value.encode()))
        if kind == "mangled":  # a valid signature, then one signed header changed
            name = draw(st.sampled_from(["svix-id", "svix-timestamp", "svix-signature"]))
            before = dict(headers).get(name)
            headers = [(n, v) for n, v in headers if n != name]
            value = _header_value(draw(_SIGNATURES | _TIMESTAMPS | st.text()))
            headers.append((name, value + b"0" if value == before else value))
    else:
        for name in draw(st.lists(st.sampled_from(SIGNED_NAMES), max_size=8)):  # duplicates too
            value = {"id": st.text(max_size=300), "timestamp": _TIMESTAMPS,
                     "signature": _SIGNATURES}[name.split("-", 1)[1]]  # fmt: skip
            headers.append((name, _header_value(draw(value | _VALUE_BYTES))))
    for name in draw(st.lists(st.sampled_from(OTHER_NAMES) | _NAMES, max_size=4)):
        headers.append((name, draw(_VALUE_BYTES)))
    return {"source": source, "body": body, "headers": headers}


def _fuzz(service: Service, examples: int, report: Callable[[str], None]) -> None:
    statuses: collections.Counter[int] = collections.Counter()
    with httpx.Client(base_url=service.url, timeout=10) as client:

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(request=hostile_requests())
        def one(request: dict[str, Any]) -> None:
            response = client.post(f"/webhooks/{request['source']}", content=request["body"],
                                   headers=request["headers"])  # fmt: skip
            statuses[response.status_code] += 1
            assert response.status_code < 500, (response.status_code, response.text)
            assert response.status_code != 200, f"accepted: {response.text}"

        one()
        # The genuine article still gets in after all that.
        body = reducto_body("job-genuine")
        genuine = client.post("/webhooks/reducto", content=body,
                              headers=signed_headers(body, msg_id="genuine-1"))  # fmt: skip
    stored, jobs = _stored(service)
    server_errors = sum(n for s, n in statuses.items() if s >= 500)
    unsigned = len(stored - {"genuine-1"})
    report(f"hostile requests={sum(statuses.values())} 5xx={server_errors} "
           f"statuses={dict(sorted(statuses.items()))} stored_unsigned={unsigned}")  # fmt: skip
    assert genuine.json()["status"] in ("accepted", "duplicate")
    assert stored == {"genuine-1"}, "something was stored without a valid signature"
    assert jobs == 1


@pytest.mark.timeout(120)
def test_fuzzed_headers_and_bodies_never_get_a_5xx_or_store_anything(
    hostile_service: Service, report_figures: Callable[[str], None]
) -> None:
    _fuzz(hostile_service, 250, report_figures)


@pytest.mark.reliability
@pytest.mark.timeout(1800)
def test_five_thousand_fuzzed_requests_never_get_a_5xx_or_store_anything(
    hostile_service: Service, report_figures: Callable[[str], None]
) -> None:
    _fuzz(hostile_service, 5000, report_figures)


def _raw(service: Service, request: bytes, *, wait: float = 5.0) -> bytes:
    """Send raw bytes; what came back before the server closed or ``wait`` passed."""
    with socket.create_connection(("127.0.0.1", service.port), timeout=wait) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                received += chunk
    return received


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: -5\r\n\r\n",
        b"Content-Length: 12abc\r\n\r\n",
        b"Content-Length: 5\r\nContent-Length: 7\r\n\r\nabcdefg",
        b"Content-Length: 99999999999999999999999\r\n\r\n",
        b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n" + b"a" * (MAX_BODY + 100),
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"Transfer-Encoding: chunked\r\n\r\n" + b"1000\r\n" + b"a" * 4096 + b"\r\n" * 3,
        b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"X-Bad\x00Header: 1\r\nContent-Length: 0\r\n\r\n",
        b"svix-id: \xff\xfe\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["negative-length", "letters-in-length", "two-lengths", "huge-length", "huge-chunk",
         "bad-chunk-size", "gzip-chunked", "chunks-over-the-cap", "length-and-chunked",
         "nul-in-header-name", "non-utf8-header"],
)  # fmt: skip
def test_malformed_framing_is_refused_without_a_5xx(
    hostile_service: Service, framing: bytes
) -> None:
    answer = _raw(hostile_service, b"POST /webhooks/reducto HTTP/1.1\r\nHost: x\r\n" + framing)
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line, "the connection closed without an answer"
    status = int(status_line.split()[1])
    assert 400 <= status < 500, answer[:200]
    assert _stored(hostile_service)[0] <= {"genuine-1"}


def _slow_request(port: int, length: int = 200) -> socket.socket:
    body = reducto_body("job-slow").ljust(length)
    head = signed_headers(body.decode(), msg_id="slow-1")
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    sock.sendall(f"POST /webhooks/reducto HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n"
                 f"{lines}\r\n".encode() + body[:1])  # fmt: skip
    return sock


@pytest.mark.timeout(60)
def test_a_trickled_body_is_cut_off_with_408_and_the_service_stays_responsive(
    hostile_service: Service,
) -> None:
    slow = [_slow_request(hostile_service.port) for _ in range(30)]
    try:
        started = time.monotonic()
        with httpx.Client(base_url=hostile_service.url, timeout=5) as client:
            for _ in range(3):  # a byte a connection every 0.3 s: slower than any sender
                time.sleep(0.3)
                for sock in slow:
                    with contextlib.suppress(OSError):
                        sock.send(b" ")
                assert client.get("/healthz").status_code == 200
        answers = []
        for sock in slow:
            received = b""
            with contextlib.suppress(TimeoutError, ConnectionResetError):
                while chunk := sock.recv(4096):
                    received += chunk
            answers.append(received)
        elapsed = time.monotonic() - started
    finally:
        for sock in slow:
            sock.close()
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), {a[:40] for a in answers}
    assert all(b"body_timeout" in a for a in answers)
    assert elapsed < 8, f"the slow bodies were held {elapsed:.1f}s with a 1 s body timeout"
    assert "slow-1" not in _stored(hostile_service)[0]
