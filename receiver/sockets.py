"""A listening address held from the start: for uvicorn's ``serve(sockets=...)``."""

from __future__ import annotations

import socket


def bound_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A TCP socket bound to ``host:port`` (a port of the kernel's choosing by default): the
    port is held from here on, with no window in which another process could take it, as it
    could between finding a free port and binding it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
