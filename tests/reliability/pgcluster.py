"""Throwaway PostgreSQL clusters for fault tests: initdb, start, stop, promote, base backups.

The machine's shared server (127.0.0.1:5432) is never touched: each cluster lives in its own
temporary directory on its own port, and ``clusters()`` stops and removes every one it made,
whatever happens. PostgreSQL refuses to run as root, so as root each command runs as the
``postgres`` user (``runuser``) in a directory that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _run_as() -> tuple[list[str], str | None]:
    """The prefix that runs a command as the cluster's owner, and that owner (None: us)."""
    if os.geteuid() != 0:
        return [], None
    return ["runuser", "-u", "postgres", "--"], "postgres"


class Cluster:
    """One PostgreSQL cluster on 127.0.0.1:``port``, its files under ``root``."""

    def __init__(self, bindir: Path, root: Path, name: str) -> None:
        self.bindir = bindir
        self.name = name
        self.data = root / name
        self.log = root / f"{name}.log"
        self.sockets = root / "sockets"
        self.port = free_port()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix, _ = _run_as()
        command = [*prefix, str(self.bindir / tool), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done

    def init(self, **settings: str) -> None:
        """A new cluster (trust auth on loopback, ready to stream to standbys)."""
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-N")
        self.configure(wal_level="replica", max_wal_senders="5", hot_standby="on", **settings)

    def configure(self, **settings: str) -> None:
        """Append settings to postgresql.conf (read at the next start or reload)."""
        lines = "".join(f"{key} = '{value}'\n" for key, value in settings.items())
        prefix, _ = _run_as()
        subprocess.run([*prefix, "tee", "-a", str(self.data / "postgresql.conf")], input=lines,
                       text=True, capture_output=True, check=True, timeout=30)  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1"
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                 "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (clean shutdown) or ``immediate`` (like a crash)."""
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return self._pg("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def promote(self) -> None:
        """Turn this standby into a primary that accepts writes."""
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def standby(self, name: str, slot: str) -> Cluster:
        """A new cluster streaming from this one: ``pg_basebackup -R`` through slot ``slot``."""
        standby = Cluster(self.bindir, self.data.parent, name)
        self._pg("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                 "-D", str(standby.data), "-R", "-X", "stream", "-C", "-S", slot,
                 "--no-sync")  # fmt: skip
        standby.configure(primary_slot_name=slot, cluster_name=name)
        return standby

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Clusters:
    """Makes clusters in one directory; see ``clusters()``."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.made: list[Cluster] = []

    def new(self, name: str, **settings: str) -> Cluster:
        cluster = Cluster(self.bindir, self.root, name)
        cluster.init(**settings)
        self.made.append(cluster)
        return cluster

    def standby_of(self, primary: Cluster, name: str, slot: str) -> Cluster:
        standby = primary.standby(name, slot)
        self.made.append(standby)
        return standby


@contextlib.contextmanager
def clusters() -> Iterator[Clusters]:
    """Throwaway clusters, all stopped (immediately) and deleted on the way out.

    Skips without PostgreSQL's server binaries. The directory is a fresh one under the system's
    temporary directory, not pytest's ``tmp_path``: as root the clusters run as ``postgres``,
    which cannot enter root's private pytest directories.
    """
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    root = Path(tempfile.mkdtemp(prefix="jobhook-pg-"))
    _, owner = _run_as()
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    (root / "sockets").mkdir()
    if owner is not None:
        os.chown(root / "sockets", entry.pw_uid, entry.pw_gid)
    made = Clusters(bindir, root)
    try:
        yield made
    finally:
        for cluster in made.made:
            if cluster.running():
                cluster._pg("pg_ctl", "-D", str(cluster.data), "-m", "immediate", "stop",
                            check=False)  # fmt: skip  # best effort: the files go anyway
        shutil.rmtree(root, ignore_errors=True)
