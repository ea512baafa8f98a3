"""Secrets rotated without a restart: ``SIGHUP``, or a change to the config file or to a file a
``file:`` secret names (a mounted Kubernetes Secret swaps its ``..data`` symlink), reloads
sources' secrets and public keys, the path tokens and header values of sources that take
unsigned callbacks (``direct_tokens``, ``direct_header_values``), providers' API keys and the
admin tokens (``server.admin_token``, ``[[server.tokens]]``) with the trusted proxies and the
login throttle's limits.

The new configuration goes through ``preflight``, as ``serve``'s does (the port excepted: this
process holds it). A bad one, or one that changes anything else, is refused with its lines in
the log and the running one kept. An accepted one is swapped in as whole immutable objects
(the webhook endpoint's sources mapping, the hint endpoint's auth mapping, each job API's
key, the tokens' keyring) which each request reads once, so a request in flight finishes with the
configuration it started with.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from receiver.config.load import read_toml
from receiver.config.settings import DEFAULT_CONFIG
from receiver.errors import ConfigError
from receiver.loops import wait_either
from receiver.service.app import hint_auth, install_tokens
from receiver.service.preflight import preflight

if TYPE_CHECKING:
    from receiver.config.settings import Settings
    from receiver.service.app import App

log = structlog.get_logger("receiver.reload")

RELOADABLE_SOURCE_KEYS = frozenset(
    {"secrets", "public_keys", "api_key", "direct_tokens", "direct_header_values"}
)
"""What a reload may change in each source; the tokens besides (``RELOADABLE_SERVER_KEYS``)."""
RELOADABLE_SERVER_KEYS = frozenset(
    {"admin_token", "tokens", "trusted_proxies", "login_attempts", "login_window_seconds"}
)
"""What a reload may change in ``[server]``, as long as some token stays configured (the admin
routes and the console are mounted at startup, or not)."""
Fingerprint = tuple[tuple[str, int, int, int, str], ...]


class Reloader:
    """Reloads the secrets of one running app from its config file (``reload``), on SIGHUP or
    when ``watch`` sees the file or a ``file:`` secret change."""

    def __init__(self, app: App, config_path: Path | None, *, host: str | None = None) -> None:
        self.app = app
        if config_path is None and os.environ.get("JOBHOOK_CONFIG"):
            config_path = Path(os.environ["JOBHOOK_CONFIG"])
        if config_path is None and DEFAULT_CONFIG.is_file():
            config_path = DEFAULT_CONFIG
        self.config_path = config_path
        self.host = host
        self._lock = asyncio.Lock()
        self._seen: Fingerprint = self.fingerprint()
        self.reloads = 0
        self.refusals = 0

    @property
    def settings(self) -> Settings:
        settings: Settings = self.app.state.settings
        return settings

    async def reload(self, why: str) -> bool:
        """Check and swap in the configuration as it is now; whether it was taken."""
        async with self._lock:
            self._seen = self.fingerprint()
            try:
                checked = await asyncio.to_thread(
                    preflight, self.config_path, host=self.host, check_port=False
                )
            except ConfigError as exc:
                self.refusals += 1
                log.error("reload_refused", why=why, problems=str(exc).splitlines())
                return False
            except Exception as exc:  # a reload never takes the running service down
                self.refusals += 1
                log.error("reload_failed", why=why, error=f"{type(exc).__name__}: {exc}")
                return False
            old, new = self.settings, checked.settings
            needs_restart = restart_needed(old, new)
            if needs_restart:
                self.refusals += 1
                log.error(
                    "reload_refused",
                    why=why,
                    problems=[f"restart needed for {key}" for key in needs_restart],
                )
                return False
            changed = self._swap(checked.settings, checked.sources)
            self.reloads += 1
            log.info("reloaded", why=why, changed=changed)
            return True

    def _swap(self, new: Settings, sources: dict[str, Any]) -> list[str]:
        """Swap in what changed; the names of the keys that did (never their values)."""
        old, app, changed = self.settings, self.app, []
        for name, cfg in new.sources.items():
            before = old.sources[name]
            if (cfg.secrets, cfg.public_keys) != (before.secrets, before.public_keys):
                changed.append(f"sources.{name}.secrets")
            for key in ("direct_tokens", "direct_header_values"):
                if getattr(cfg, key) != getattr(before, key):
                    changed.append(f"sources.{name}.{key}")
            if cfg.api_key != before.api_key and cfg.api_key is not None:
                changed.append(f"sources.{name}.api_key")
                runtime = getattr(app.state, "runtime", None)
                api = runtime.apis.get(name) if runtime is not None else None
                if api is not None:
                    api.use_key(cfg.api_key)
        runtime = getattr(app.state, "runtime", None)
        if runtime is not None:  # a verifier that fetches (SNS) gets the source's client
            runtime.attach(sources)
        endpoint = getattr(app.state, "webhook_endpoint", None)
        if endpoint is not None:
            endpoint.sources = sources  # one attribute: each request reads it once
        hints = getattr(app.state, "direct_endpoint", None)
        if hints is not None:  # the header a source's hints carry needs a restart; not its values
            hints.auth = hint_auth(new, sources)
        app.state.sources = sources
        for key in sorted(RELOADABLE_SERVER_KEYS):
            if getattr(new.server, key) != getattr(old.server, key):
                changed.append(f"server.{key}")
        if new.server.any_token:
            # A removed token's sessions end, a changed role applies from the next request.
            install_tokens(app, new)
        app.state.settings = new
        return changed

    def fingerprint(self) -> Fingerprint:
        """Inode, mtime, size and content hash of the config file and every ``file:`` secret."""
        prints = []
        for path in self._watched():
            try:
                stat = os.stat(path)  # follows symlinks: a swapped ..data is a new inode
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                prints.append((str(path), 0, 0, -1, ""))
                continue
            prints.append((str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size, digest))
        return tuple(prints)

    def _watched(self) -> list[Path]:
        if self.config_path is None:
            return []
        paths = [self.config_path]
        try:
            data = read_toml(self.config_path)
        except ConfigError:
            return paths
        paths.extend(Path(ref[5:]).expanduser() for ref in _file_references(data))
        return paths

    async def watch(self, stop: asyncio.Event, every: float) -> None:
        """Poll the fingerprint every ``every`` seconds (never when 0); reload when it changes."""
        if every <= 0:
            return
        while not stop.is_set():
            await wait_either(stop, asyncio.Event(), every)
            if stop.is_set():
                return
            try:
                now = await asyncio.to_thread(self.fingerprint)
                if now != self._seen:
                    await self.reload("files changed")
            except Exception as exc:  # the watcher outlives any one bad step
                log.error("reload_watch_failed", error=str(exc))


def restart_needed(old: Settings, new: Settings) -> list[str]:
    """The keys whose change a reload cannot apply, as dotted names (values never shown)."""
    keys: list[str] = []
    old_data, new_data = old.model_dump(), new.model_dump()
    for section in sorted(set(old_data) | set(new_data)):
        if section == "sources":
            old_sources, new_sources = old_data["sources"], new_data["sources"]
            for name in sorted(set(old_sources) ^ set(new_sources)):
                keys.append(f"sources.{name}")
            for name in sorted(set(old_sources) & set(new_sources)):
                a, b = old_sources[name], new_sources[name]
                keys.extend(
                    f"sources.{name}.{key}"
                    for key in sorted(set(a) | set(b))
                    if key not in RELOADABLE_SOURCE_KEYS and a.get(key) != b.get(key)
                )
                if (a.get("api_key") is None) != (b.get("api_key") is None):
                    keys.append(f"sources.{name}.api_key")  # a job API appears or goes
        elif section == "server":
            a, b = old_data["server"], new_data["server"]
            keys.extend(
                f"server.{key}"
                for key in sorted(set(a) | set(b))
                if a.get(key) != b.get(key) and key not in RELOADABLE_SERVER_KEYS
            )
            if old.server.any_token != new.server.any_token:
                keys.append("server.admin_token")  # the admin routes appear or go
        elif old_data.get(section) != new_data.get(section):
            keys.append(section)
    return keys


def _file_references(value: object) -> list[str]:
    if isinstance(value, str):
        return [value] if value.startswith("file:") and len(value) > 5 else []
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _file_references(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _file_references(item)]
    return []
