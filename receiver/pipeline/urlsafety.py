"""Which result URLs may be fetched: allowed hosts and schemes, and public addresses only.

``URLPolicy.check`` refuses a URL with a clear error before anything is sent. ``URLPolicy.connect``
makes the checks again and connects to the very address it checked, so a name that resolves to
a public address for one check and to a private one a moment later (DNS rebinding) is refused
too, and no socket is opened to a refused address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

import httpx

from receiver.errors import ConfigError, FetchError, UnsafeURLError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from receiver.config.settings import ResultsSettings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver: TypeAlias = Callable[[str, int], Awaitable[list[str]]]
"""``resolve(host, port)`` -> the addresses to connect to, in order (``loop.getaddrinfo``)."""

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*$")
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_METADATA = ipaddress.IPv4Address("169.254.169.254")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def address_problem(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public unicast address, or None when it is one."""
    if isinstance(ip, ipaddress.IPv6Address):
        for kind, embedded in (
            ("IPv4-mapped", ip.ipv4_mapped),
            ("NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None),
            ("6to4", ip.sixtofour),
        ):
            if embedded is not None:
                problem = address_problem(embedded)
                return f"{kind} {problem}" if problem else None
    checks: tuple[tuple[bool, str], ...] = (
        (ip.is_unspecified, "unspecified"),
        (ip.is_loopback, "loopback"),
        (ip == _METADATA, "link-local, the cloud metadata service"),
        (ip.is_link_local, "link-local"),
        (isinstance(ip, ipaddress.IPv6Address) and ip in _UNIQUE_LOCAL, "unique-local"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "site-local"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "shared (CGNAT)"),
        (isinstance(ip, ipaddress.IPv6Address) and ip in _NAT64_LOCAL, "NAT64 local-use"),
        (ip.is_multicast, "multicast"),
        (ip.is_reserved, "reserved"),
        (ip.is_private, "private"),
        (not ip.is_global, "not globally routable"),
    )
    return next((problem for refused, problem in checks if refused), None)


def describe_url(
    url: str | httpx.URL, default_port: int | None = None, *, default_host: str = "",
    default_path: str = "",
) -> str:  # fmt: skip
    """The URL as logs and errors may show it: no userinfo (``user:password@``, ``:pw@``,
    ``token@``), query or fragment, where presigned result URLs and broker URLs carry secrets.

    An IPv6 host is bracketed; ``default_port`` (``default_host``, ``default_path``) is shown
    when the URL names none; a ``unix://`` URL shows only its socket path. The one place every
    caller (result fetches, the http and queue handlers) drops credentials from a URL.
    """
    parts = urlsplit(str(url))
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or default_host
    host = f"[{host}]" if ":" in host else host
    port = parts.port or default_port
    return (
        f"{parts.scheme}://{host}{'' if port is None else f':{port}'}{parts.path or default_path}"
    )


async def system_resolve(host: str, port: int) -> list[str]:
    """Resolve through the event loop's resolver (a worker thread), never blocking the loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class URLPolicy:
    """Where result URLs may point, from the ``[results]`` settings; raises UnsafeURLError."""

    def __init__(
        self,
        allowed_hosts: Iterable[str],
        *,
        allow_http: bool = False,
        allow_private_networks: bool = False,
        allowed_networks: Iterable[str] = (),
        resolver: Resolver = system_resolve,
    ) -> None:
        self._exact: set[str] = set()
        self._suffixes: list[str] = []
        for pattern in allowed_hosts:
            self._add_pattern(pattern)
        self.allow_http = allow_http
        self.allow_private_networks = allow_private_networks
        try:
            self._networks = [ipaddress.ip_network(n, strict=False) for n in allowed_networks]
        except ValueError as exc:
            raise ConfigError(f"allowed network is not a network: {exc}") from None
        self._resolve = resolver

    @classmethod
    def from_settings(cls, settings: ResultsSettings, **kwargs: Any) -> URLPolicy:
        """The policy ``[results]`` describes; ConfigError for a bad ``allowed_hosts`` entry."""
        return cls(
            settings.allowed_hosts,
            allow_http=settings.allow_http,
            allow_private_networks=settings.allow_private_networks,
            **kwargs,
        )

    def _add_pattern(self, pattern: str) -> None:
        name = pattern.strip().lower().removesuffix(".")
        wildcard = name.startswith("*.")
        bare = name[2:] if wildcard else name
        if not _HOSTNAME.match(bare) and _ip(bare) is None:
            raise ConfigError(
                f"results.allowed_hosts: {pattern!r} is not a host name, an IP address "
                "or '*.' followed by a domain; write e.g. \"bucket.s3.amazonaws.com\" or "
                '"*.s3.amazonaws.com"'
            )
        if wildcard:
            self._suffixes.append("." + bare)
        else:
            ip = _ip(bare)
            self._exact.add(str(ip) if ip is not None else bare)

    def check_url(self, url: str | httpx.URL) -> httpx.URL:
        """Check scheme, credentials and host of ``url``, without any DNS lookup."""
        return self._check_url(url)[0]

    def _check_url(self, url: str | httpx.URL) -> tuple[httpx.URL, str]:
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise UnsafeURLError(f"result URL is malformed: {exc}") from None
        if parsed.scheme != "https" and not (parsed.scheme == "http" and self.allow_http):
            hint = " (results.allow_http is false)" if parsed.scheme == "http" else ""
            raise UnsafeURLError(f"result URL scheme {parsed.scheme!r} is not allowed{hint}")
        if parsed.userinfo:
            raise UnsafeURLError("result URLs with credentials (user:password@) are not allowed")
        return parsed, self.check_host(parsed.raw_host.decode("ascii"))

    def check_host(self, host: str) -> str:
        """The normalised host when it is allowed; a numeric host must be a canonical address."""
        name = host.lower().removesuffix(".")
        ip = _ip(name)
        if ip is not None:
            if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
                raise UnsafeURLError(f"host {host!r}: scoped IPv6 addresses are not allowed")
            name = str(ip)
        elif _NUMERIC_LABEL.match(name.rsplit(".", 1)[-1]):
            raise UnsafeURLError(
                f"host {host!r} is an IP address in a non-canonical spelling "
                "(decimal, octal, hex or shortened); write it as a.b.c.d"
            )
        elif not _HOSTNAME.match(name):
            raise UnsafeURLError(f"host {host!r} is not a valid host name")
        if not self._exact and not self._suffixes:
            raise UnsafeURLError(
                f"host {name!r} is not allowed: results.allowed_hosts is empty, so no result "
                "host is; list the result store's hosts, e.g. '*.amazonaws.com'"
            )
        if name not in self._exact and not (
            ip is None and any(name.endswith(suffix) for suffix in self._suffixes)
        ):
            raise UnsafeURLError(f"host {name!r} is not in results.allowed_hosts")
        return name

    def check_address(self, address: str, host: str) -> None:
        """Refuse a non-public address unless private networks (or its network) are allowed."""
        if self.allow_private_networks:
            return
        ip = _ip(address)
        if ip is None:
            raise UnsafeURLError(f"host {host!r} resolved to {address!r}, which is not an address")
        if any(ip in network for network in self._networks):
            return
        problem = address_problem(ip)
        if problem is not None:
            where = "" if host == str(ip) else f"host {host!r} resolves to "
            raise UnsafeURLError(
                f"{where}{ip}, which is not a public address ({problem}); "
                "results.allow_private_networks is false"
            )

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address of ``host``, each one checked; FetchError when it does not resolve."""
        if _ip(host) is not None:
            addresses = [host]
        else:
            try:
                addresses = await self._resolve(host, port)
            except OSError as exc:
                raise FetchError(f"cannot resolve {host!r}: {exc.strerror or exc}") from exc
            if not addresses:
                raise FetchError(f"{host!r} resolved to no address")
        for address in addresses:
            self.check_address(address, host)
        return addresses

    async def check(self, url: str | httpx.URL) -> httpx.URL:
        """The full pre-request check: URL, host and every address the host resolves to."""
        parsed, host = self._check_url(url)
        await self.resolve(host, default_port(parsed))
        return parsed

    async def connect(self, url: str | httpx.URL, seconds: float) -> socket.socket:
        """A socket connected to an address of ``url``'s host: ``check``'s checks, then the
        first checked address that answers, its peer checked again; no socket is opened to a
        refused address, and the caller talks to that very address (no second lookup for DNS
        rebinding to answer).

        UnsafeURLError when refused; FetchError (retryable) when none answers within ``seconds``.
        """
        parsed, host = self._check_url(url)
        port = default_port(parsed)
        try:
            async with asyncio.timeout(seconds):
                addresses = await self.resolve(host, port)
                return await self._connect_first(host, addresses, port)
        except TimeoutError:
            raise FetchError(f"connecting to {host}:{port} timed out") from None

    async def _connect_first(self, host: str, addresses: list[str], port: int) -> socket.socket:
        """Try the checked addresses in order; the overall deadline is the caller's."""
        loop = asyncio.get_running_loop()
        failure: OSError | None = None
        for address in addresses:
            sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, (address, port))
                self.check_address(str(sock.getpeername()[0]), host)
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            except BaseException:
                sock.close()
                raise
            return sock
        assert failure is not None, "resolve() returns at least one address"
        # The errno's own words: asyncio and uvloop word the same refusal differently.
        reason = os.strerror(failure.errno) if failure.errno else str(failure)
        raise FetchError(f"cannot connect to {host}:{port}: {reason}")


def scheme_port(scheme: str) -> int:
    """The port a URL of ``scheme`` (http or https) means when it names none."""
    return 443 if scheme == "https" else 80


def default_port(url: httpx.URL) -> int:
    """The port ``url`` names, or its scheme's."""
    return url.port or scheme_port(url.scheme)


def _ip(value: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None
