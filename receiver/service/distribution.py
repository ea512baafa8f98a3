"""Whether the wheel's top-level packages are jobhook's own, before ``serve`` imports them.

The service's code lives under two generic names, ``receiver`` and ``handlers`` (the
repository's layout, which every absolute import names), beside ``jobhook`` (the client's name
for users). Another distribution in the same environment that ships a package of one of those
names overwrites jobhook's files, and a directory of that name on ``sys.path`` shadows them;
both would surface later as an ImportError or odd behaviour far from the cause.
``import_name_problems`` compares what Python would import with the jobhook distribution's
RECORD (path and sha256 of every file), or with the source tree of an editable install.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

OWN_PACKAGES = ("receiver", "handlers", "jobhook")
DISTRIBUTION = "jobhook"
FIX = (
    "install jobhook into an environment of its own (uv tool install, pipx install, or a "
    "virtual environment with nothing else) and start it from there"
)


def import_name_problems() -> list[str]:
    """One line per package that is not the one the installed jobhook distribution holds."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return []  # a source tree on sys.path, not installed: nothing to compare with
    source = _editable_source(dist)
    problems: list[str] = []
    for name in OWN_PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if source is not None:
            expected = source / name / "__init__.py"
        else:
            expected = Path(str(dist.locate_file(f"{name}/__init__.py"))).resolve()
        if origin != expected:
            found = "nowhere" if origin is None else str(origin)
            problems.append(
                f"{name}: imported from {found}, not from the jobhook distribution "
                f"({expected}): another package named {name!r} is installed or on sys.path; {FIX}"
            )
    if source is None and not problems:
        problems.extend(_changed_files(dist))
    return problems


def _editable_source(dist: metadata.Distribution) -> Path | None:
    """The source tree an editable install points at (PEP 610 ``direct_url.json``), else None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    direct = json.loads(text)
    if not direct.get("dir_info", {}).get("editable"):
        return None
    return Path(url2pathname(urlsplit(direct["url"]).path)).resolve()


def _changed_files(dist: metadata.Distribution) -> list[str]:
    """Files of the two packages whose content differs from the wheel's RECORD: overwritten."""
    changed: list[str] = []
    for entry in dist.files or ():
        if entry.parts[0] not in OWN_PACKAGES or entry.hash is None:
            continue
        path = Path(str(dist.locate_file(entry)))
        try:
            digest = hashlib.new(entry.hash.mode, path.read_bytes()).digest()
        except FileNotFoundError:
            changed.append(f"{entry}: missing, although the jobhook distribution installed it")
            continue
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry.hash.value:
            changed.append(
                f"{entry}: changed since jobhook was installed (another distribution that "
                f"installs {entry.parts[0]!r} overwrote it?); {FIX}"
            )
    return changed
