"""What the deployment examples' tests share: where a config writes and what names a secret."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receiver.config.settings import Settings

SECRET_KEYS = ("secret", "token", "key", "password")


def secret_values(config: Any) -> list[str]:
    """Every value in a config whose key names a secret (``secrets``, ``api_key``, ...)."""
    found: list[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            if any(word in key for word in SECRET_KEYS):
                found += value if isinstance(value, list) else [value]
            else:
                found += secret_values(value)
    elif isinstance(config, list):
        for item in config:
            found += secret_values(item)
    return found


def written_paths(settings: Settings) -> list[PurePosixPath]:
    """Where the service writes: its SQLite database, its results and every handler ``dir``."""
    paths = [PurePosixPath(settings.results.dir)]
    if settings.store.url.startswith("sqlite:///"):
        paths.append(PurePosixPath(settings.store.url.removeprefix("sqlite:///")).parent)
    paths += [PurePosixPath(h.options["dir"]) for h in settings.handlers if "dir" in h.options]
    return paths


def is_under(path: PurePosixPath, root: str) -> bool:
    return path == PurePosixPath(root) or PurePosixPath(root) in path.parents
