"""A tiny static blob host: one file behind expiring presigned URLs, sent with sendfile(2).

The anchor for the large-result benchmark must not be the bottleneck, so the bytes go from
the page cache to the socket without passing through Python. ``python -m bench.blobhost
FILE PORT KEYFILE`` serves ``FILE`` at ``/blobs/<name>?expires=...&sig=...``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from receiver.sim.blobs import json_chunks


def sign(key: bytes, name: str, expires: int) -> str:
    return hmac.new(key, f"{name}\n{expires}".encode(), hashlib.sha256).hexdigest()


def presign(base_url: str, key: bytes, name: str, ttl: float = 3600) -> str:
    expires = int(time.time() + ttl)
    return f"{base_url}/blobs/{name}?expires={expires}&sig={sign(key, name, expires)}"


def make_blob(path: Path, size: int) -> Path:
    """A valid JSON result of exactly ``size`` bytes (the simulator's content), made once."""
    if path.exists() and path.stat().st_size == size:
        return path
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        for chunk in json_chunks(size):
            fh.write(chunk)
    tmp.replace(path)
    return path


def _allowed(key: bytes, name: str, query: str) -> bool:
    params = parse_qs(query)
    expires, sig = params.get("expires", [""])[0], params.get("sig", [""])[0]
    if not expires.isdigit() or int(expires) < time.time():
        return False
    return hmac.compare_digest(sign(key, name, int(expires)), sig)


async def serve(path: Path, size: int, port: int, key: bytes) -> None:
    """Serve ``path`` (``size`` bytes) until cancelled."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode()
            url = urlsplit(target)
            if url.path == "/readyz":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            elif url.path == f"/blobs/{path.name}" and _allowed(key, path.name, url.query):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % size
                )
                # Opened in a thread (open may block on a cold disk), then sent by the kernel.
                with await asyncio.to_thread(path.open, "rb") as fh:
                    await asyncio.get_running_loop().sendfile(writer.transport, fh)
            else:
                writer.write(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    path, port, keyfile = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    asyncio.run(serve(path, path.stat().st_size, port, keyfile.read_bytes()))


if __name__ == "__main__":
    main()
