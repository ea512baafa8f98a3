"""Outbound connections as enterprises run them: one proxy and one trust store for all of them.

The job APIs and the ``http`` handler (httpx) and the result downloads (their own sockets,
``receiver.pipeline.download``) all go through ``[egress]``: the same proxy, the same
``no_proxy`` exceptions, the same CA bundle (or the operating system's trust store, through
``truststore``). Where the table names no proxy, the environment's ``HTTPS_PROXY`` (or
``https_proxy``, ``ALL_PROXY``) and ``NO_PROXY`` are read once, as curl and httpx read them, and
then apply to every connection alike (``environment = false`` ignores them); so every
connection follows one configuration, not two.

A download through the proxy tunnels with ``CONNECT`` and still obeys the result URL policy for
the final host: scheme, ``allowed_hosts`` and, where this network can resolve the name, every
address it resolves to. The proxy is the one address reached without those checks: it is named
explicitly in the configuration.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from receiver.errors import ConfigError, FetchError
from receiver.pipeline.urlsafety import default_port, describe_url
from receiver.secret import Secret

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from receiver.config.settings import EgressSettings
    from receiver.pipeline.urlsafety import URLPolicy

MAX_PROXY_HEAD = 16 * 1024
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
"""Where a proxy comes from when ``[egress]`` names none: every connection here is https but
the job APIs and handlers a test points at loopback, so HTTP_PROXY is not one of them."""


@dataclass(frozen=True)
class Egress:
    """The outbound configuration; ``Egress()`` is a direct connection with certifi's CAs."""

    proxy: Secret | None = None
    """The proxy's URL (``http://[user:password@]host:port``); it may hold credentials."""
    no_proxy: tuple[str, ...] = ()
    ca_bundle: Path | None = None
    truststore: bool = False

    @classmethod
    def from_settings(
        cls, settings: EgressSettings, environ: Mapping[str, str] | None = None
    ) -> Egress:
        """The ``[egress]`` table, unset keys from the environment (unless ``environment`` is
        false); ConfigError for a proxy that is not an http:// URL."""
        env = os.environ if environ is None else environ
        proxy, no_proxy = settings.proxy, settings.no_proxy
        if settings.environment and proxy is None:
            named = next((env[n] for n in _PROXY_VARIABLES if env.get(n, "").strip()), None)
            proxy = Secret(named.strip()) if named is not None else None
        if settings.environment and no_proxy is None:
            raw = next((env[n] for n in ("NO_PROXY", "no_proxy") if n in env), "")
            no_proxy = tuple(e.strip() for e in raw.split(",") if e.strip())
        egress = cls(proxy, no_proxy or (), settings.ca_bundle, settings.truststore)
        url = egress.proxy_url
        if url is not None and (url.scheme != "http" or not url.host):
            raise ConfigError("egress.proxy must be an http:// URL with a host")
        return egress

    @property
    def proxy_url(self) -> httpx.URL | None:
        return httpx.URL(self.proxy.reveal()) if self.proxy is not None else None

    @functools.cached_property
    def ssl_context(self) -> ssl.SSLContext:
        """The one client TLS context: the OS trust store, a CA bundle, or certifi's CAs."""
        if self.truststore:
            try:
                import truststore
            except ImportError:
                raise ConfigError(
                    "egress.truststore needs the 'truststore' extra (uv sync --extra truststore)"
                ) from None
            context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if self.ca_bundle is not None:
                context.load_verify_locations(cafile=self.ca_bundle)
            return context
        if self.ca_bundle is not None:
            try:
                return ssl.create_default_context(cafile=self.ca_bundle)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"egress.ca_bundle {self.ca_bundle}: {exc}") from None
        return httpx.create_ssl_context()

    def adding_ca(self, bundle: Path) -> Egress:
        """This configuration, trusting ``bundle``'s CAs besides its own (tests, a private
        partition): added to the trust store, never instead of it. ConfigError when unreadable."""
        other = dataclasses.replace(self)  # a fresh context, not the shared one
        try:
            other.ssl_context.load_verify_locations(cafile=bundle)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"CA bundle {bundle}: {exc}") from None
        return other

    def bypasses(self, host: str) -> bool:
        """Whether ``host`` is reached directly (``no_proxy``, read as httpx reads curl's)."""
        host = host.lower().strip("[]")
        for entry in self.no_proxy:
            entry = entry.strip().lower().strip("[]")
            if entry == "*" or host == entry:
                return True
            if entry.startswith((".", "*.")):
                if host.endswith("." + entry.lstrip("*.")):
                    return True
            elif not _is_ip(entry) and (host.endswith("." + entry)):
                return True
        return False

    def proxy_for(self, url: httpx.URL) -> httpx.URL | None:
        """The proxy to reach ``url`` through, or None to connect directly."""
        proxy = self.proxy_url
        return None if proxy is None or self.bypasses(url.host) else proxy

    def client_options(self) -> dict[str, Any]:
        """``httpx.AsyncClient`` keyword arguments for this configuration (never the
        environment's: ``trust_env`` is off)."""
        options: dict[str, Any] = {"verify": self.ssl_context, "trust_env": False}
        proxy = self.proxy_url
        if proxy is not None and "*" not in self.no_proxy:
            transport = httpx.AsyncHTTPTransport(proxy=httpx.Proxy(proxy), verify=self.ssl_context)
            mounts: dict[str, httpx.AsyncBaseTransport | None] = {"all://": transport}
            for entry in self.no_proxy:
                mounts[_pattern(entry.strip().lower())] = None
            options["mounts"] = mounts
        return options


_current = Egress()


def configure(egress: Egress) -> None:
    """Make ``egress`` the process's outbound configuration (the lifespan does, at startup)."""
    global _current
    _current = egress


def current() -> Egress:
    """The process's outbound configuration."""
    return _current


async def connect(
    policy: URLPolicy, url: httpx.URL, seconds: float, egress: Egress
) -> socket.socket:
    """A socket to ``url``'s host: direct through ``policy.connect``, or a ``CONNECT`` tunnel
    through the proxy after the policy's checks of the final host."""
    proxy = egress.proxy_for(url)
    if proxy is None:
        return await policy.connect(url, seconds)
    parsed = policy.check_url(url)
    host, port = parsed.host, default_port(parsed)
    try:
        async with asyncio.timeout(seconds):
            await policy.resolve(host, port)
    except FetchError as exc:
        if exc.permanent:
            raise
        # This network may not resolve public names at all: the proxy does, for us.
    except TimeoutError:
        pass
    try:
        async with asyncio.timeout(seconds):
            return await _tunnel(proxy, host, port)
    except TimeoutError:
        raise FetchError(f"the proxy {describe_url(proxy)} did not answer in time") from None


async def _tunnel(proxy: httpx.URL, host: str, port: int) -> socket.socket:
    loop = asyncio.get_running_loop()
    where = describe_url(proxy)
    try:
        infos = await loop.getaddrinfo(proxy.host, proxy.port or 80, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchError(f"cannot resolve the proxy {where}: {exc.strerror or exc}") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, address)
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if proxy.username:
            pair = f"{proxy.username}:{proxy.password}".encode()
            lines.append(f"Proxy-Authorization: Basic {base64.b64encode(pair).decode()}")
        await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await loop.sock_recv(sock, 4096)
            if not chunk or len(head) > MAX_PROXY_HEAD:
                raise FetchError(f"the proxy {where} ended the CONNECT to {authority}")
            head += chunk
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or parts[1] != "200" or not head.endswith(b"\r\n\r\n"):
            raise FetchError(f"the proxy {where} refused CONNECT {authority}: {status_line!r}")
    except OSError as exc:
        sock.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise FetchError(f"cannot connect to the proxy {where}: {reason}") from exc
    except BaseException:
        sock.close()
        raise
    return sock


def _pattern(entry: str) -> str:
    """An httpx mount pattern for one ``no_proxy`` entry (as httpx reads ``NO_PROXY``)."""
    entry = entry.strip("[]")
    if _is_ip(entry):
        return f"all://[{entry}]" if ":" in entry else f"all://{entry}"
    if entry.startswith((".", "*.")):
        return f"all://*.{entry.lstrip('*.')}"
    return f"all://*{entry}" if entry != "localhost" else "all://localhost"


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
