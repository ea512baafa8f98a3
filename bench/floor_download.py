"""The floor of a verified, durable download in Python: what the large target asks, nothing else.

``python -m bench.floor_download URL DEST`` sends one plain HTTP/1.1 GET over a blocking socket
and, for a Content-Length body, repeats: ``recv_into`` a preallocated 1 MiB buffer, sha256 it,
write it, starting the writeback of every WRITEBACK_BYTES written (as jobhook does); then
fsync. No HTTP library, no event loop, no URL checks, no retries, no temp file or rename: every step
jobhook's fetch must take (hash, write, fsync) at its cheapest, one after the other. Against
curl (which neither hashes nor fsyncs) it shows what that work costs here; jobhook overlaps
receiving with hashing and writing, so it can beat this floor, and a target above it needs
more overlap still. Prints one JSON line, as bench.fetch_once.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

from receiver.pipeline.sink import WRITEBACK_BYTES, start_writeback

BUFFER = 1024 * 1024


def download(url: str, dest: str) -> dict[str, object]:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        raise SystemExit("bench.floor_download: an http://host:port/... URL only")
    started = time.perf_counter()
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept-Encoding: identity\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            more = sock.recv(65536)
            if not more:
                raise SystemExit("bench.floor_download: the connection closed in the headers")
            head += more
        header, _, first = head.partition(b"\r\n\r\n")
        status = header.split(b" ", 2)[1]
        lengths = [line.split(b":", 1)[1] for line in header.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")]  # fmt: skip
        if status != b"200" or not lengths:
            raise SystemExit(f"bench.floor_download: status {status!r}, or no Content-Length")
        length = int(lengths[0])
        digest = hashlib.sha256(first)
        buffer = bytearray(BUFFER)
        view = memoryview(buffer)
        got = pending = len(first)
        with open(dest, "wb", buffering=0) as fh:
            fh.write(first)
            while got < length:
                n = sock.recv_into(view)
                if not n:
                    break
                digest.update(view[:n])
                fh.write(view[:n])
                got += n
                pending += n
                if pending >= WRITEBACK_BYTES:  # the disk works while the body arrives
                    start_writeback(fh, pending)
                    pending = 0
            os.fsync(fh.fileno())
    return {"seconds": time.perf_counter() - started, "bytes": got, "sha256": digest.hexdigest()}


def main() -> None:
    print(json.dumps(download(sys.argv[1], sys.argv[2])))


if __name__ == "__main__":
    main()
