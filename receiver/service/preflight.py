"""Everything ``serve`` checks before it accepts traffic, in one function ``check-config`` shares.

``preflight`` reads the settings (secrets and keys resolved), builds each source's verifier and
provider adapter, loads and validates each handler (no connection), checks the result URL
policy, the store URL's form, that the store's and results' directories are writable and that
the port is free. Every problem is one line, ``key: what is wrong; how to fix it``; all of them
come in one ConfigError, so whatever ``check-config`` accepts, ``serve`` starts.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import ValidationError

from handlers import load_handler
from receiver.config.load import read_config
from receiver.config.problems import config_error
from receiver.config.settings import HandlerSettings
from receiver.errors import ConfigError
from receiver.pipeline.urlsafety import URLPolicy
from receiver.service.app import build_source

if TYPE_CHECKING:
    from receiver.completion import Handler
    from receiver.config.load import RawConfig
    from receiver.config.settings import Settings
    from receiver.intake.webhooks import Source

PORT_HINT = "pick a free one with --port or JOBHOOK_SERVER__PORT"


@dataclass(frozen=True)
class Checked:
    """A configuration that passed every check, with what the checks built."""

    settings: Settings
    sources: dict[str, Source]
    handlers: dict[str, Handler]


def preflight(
    config_path: Path | None,
    *,
    environ: dict[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
    check_port: bool = True,
) -> Checked:
    """Check everything ``serve`` needs; ConfigError lists every problem, one line each.

    ``host`` and ``port`` are ``serve``'s ``--host`` and ``--port`` when given; a reload
    (``check_port=False``) leaves out the port, which the running process holds.
    """
    raw = read_config(config_path, environ)
    settings, problems = raw.validate()
    if settings is None:
        # The settings' problems, and each handler entry's own (a typo in its options) with
        # them, so one run shows every problem.
        raise config_error(raw.where, problems + raw_handler_problems(raw))
    sources: dict[str, Source] = {}
    for name, cfg in settings.sources.items():
        try:
            sources[name] = build_source(name, cfg)
            if cfg.api_base_url is None:  # a default may come from the environment: checked too
                sources[name].provider.default_api_base_url()
        except (ConfigError, ValueError) as exc:
            problems.append(f"sources.{name}: {exc}")
    handlers: dict[str, Handler] = {}
    for index, entry in enumerate(settings.handlers):
        try:
            handlers[entry.name] = load_handler(entry)
        except ConfigError as exc:
            problems.extend(_handler_lines(index, exc))
    try:
        URLPolicy.from_settings(settings.results)
    except ConfigError as exc:
        problems.append(str(exc))
    problems.extend(store_problems(settings))
    problems.extend(directory_problems(settings))
    if check_port:
        problems.extend(port_problems(settings, host, port))
    if problems:
        raise config_error(raw.where, problems)
    return Checked(settings, sources, handlers)


def _handler_lines(index: int, exc: ConfigError) -> list[str]:
    return [f"handlers #{index + 1}: {line}" for line in str(exc).splitlines()]


def raw_handler_problems(raw: RawConfig) -> list[str]:
    """Load each ``[[handlers]]`` entry that is valid as an entry, though the settings as a
    whole are not: its options' problems. An entry the settings refuse is already named."""
    entries = raw.data.get("handlers")
    if not isinstance(entries, list):
        return []
    problems: list[str] = []
    for index, data in enumerate(entries):
        try:
            entry = HandlerSettings.model_validate(data, context={"env": raw.env})
        except ValidationError:  # the settings' own lines name what is wrong with it
            continue
        try:
            load_handler(entry)
        except ConfigError as exc:
            problems.extend(_handler_lines(index, exc))
    return problems


def store_problems(settings: Settings) -> list[str]:
    """The store URL's form (nothing is connected to) and, for SQLite, its file's directory."""
    url = settings.store.url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.name or path.name == ":memory:":
            return ['store.url: names no database file; use "sqlite:///data/jobhook.db"']
        key = "data_dir" if path == settings.data_dir / "jobhook.db" else "store.url"
        if path.exists():
            if not path.is_file():
                return [f"{key}: {path} is not a file; point store.url at a database file"]
            if not os.access(path, os.R_OK | os.W_OK):
                return [f"{key}: the database {path} is {_unwritable(path)}; {_FIX_WRITE}"]
        # SQLite writes its journal (-wal, -shm) next to the database.
        problem = writable_dir_problem(path.parent)
        return [f"{key}: the database's directory {problem}"] if problem else []
    parts = urlsplit(url)
    if "," in parts.netloc:  # several hosts (failover): the settings checked each one
        return []
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return ["store.url: the port is not a number; write postgresql://user@host:5432/db"]
    if not parts.hostname and "host=" not in parts.query:
        return ["store.url: names no host; write postgresql://user@host:5432/db"]
    return []


_FIX_WRITE = "choose a writable place, or let the user jobhook runs as write there"


def directory_problems(settings: Settings) -> list[str]:
    """The results directory must be (or become) a directory jobhook can write."""
    results = settings.results.dir
    key = "data_dir" if results == settings.data_dir / "results" else "results.dir"
    problem = writable_dir_problem(results)
    return [f"{key}: the results directory {problem}"] if problem else []


def writable_dir_problem(path: Path) -> str | None:
    """Why jobhook could not create or write the directory ``path``, or None.

    Nothing is created: the nearest existing ancestor must be a directory it may write.
    ``os.access`` answers for the real user and sees a read-only filesystem (EROFS) too.
    """
    path = path.absolute()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{path} cannot be created: {existing} is a file, not a directory; {_FIX_WRITE}"
    if not os.access(existing, os.W_OK | os.X_OK):
        shown = path if existing == path else f"{path} (in {existing})"
        return f"{shown} is {_unwritable(existing)}; {_FIX_WRITE}"
    return None


def _unwritable(path: Path) -> str:
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return "on a read-only filesystem" if read_only else "not writable"


def port_problems(settings: Settings, host: str | None, port: int | None) -> list[str]:
    """The address ``serve`` will listen on must be free and this machine's own (port 0, any
    free port, checks the host)."""
    bind_host = host or settings.server.host
    bind_port = settings.server.port if port is None else port
    port_key = "--port" if port is not None else "server.port"
    host_key = "--host" if host else "server.host"
    try:
        infos = socket.getaddrinfo(
            bind_host, bind_port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError):
        return [
            f"{host_key}: {bind_host!r} is not an address of this machine; "
            'use "127.0.0.1" (this machine only) or "0.0.0.0" (every interface)'
        ]
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as exc:
            where = f"{bind_host}:{bind_port}"
            if exc.errno == errno.EADDRINUSE:
                return [f"{port_key}: {where} is already in use by another process; {PORT_HINT}"]
            if exc.errno == errno.EACCES:
                return [f"{port_key}: {where} needs privileges to listen on; {PORT_HINT} (>1023)"]
            if exc.errno == errno.EADDRNOTAVAIL:
                return [
                    f"{host_key}: {bind_host!r} is not an address of this machine; "
                    'use "127.0.0.1" or "0.0.0.0"'
                ]
            return [f"{port_key}: cannot listen on {where}: {exc.strerror}; {PORT_HINT}"]
    return []
