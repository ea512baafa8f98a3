"""``python -m bench.otlpsink PORT``: an OTLP/HTTP collector that takes spans and keeps nothing.

The tracing benchmark's export target on loopback: ``POST /v1/traces`` answers 200 with an empty
``ExportTraceServiceResponse`` (zero bytes) after reading the body, counting requests and bytes
(``GET /stats``); ``GET /readyz`` answers 200. Parsing is left out, so the sink takes as little
of the shared cores as a collector's receiver can.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        STATS["requests"] += 1
        STATS["bytes"] += length
        self._answer(b"", "application/x-protobuf")

    def do_GET(self) -> None:
        self._answer(json.dumps(STATS).encode(), "application/json")

    def _answer(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
