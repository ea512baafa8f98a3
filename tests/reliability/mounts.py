"""Small real filesystems for store-fault tests: a tmpfs that fills up, an ext4 image on a loop
device that fails; each unmounted (and its loop device detached) when the block ends."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def require_mounting() -> None:
    """Skip (with the reason) where this process may not mount filesystems."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or loop device needs root (CAP_SYS_ADMIN)")
    for tool in ("mount", "umount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


def _unmount(path: Path) -> None:
    if _run("umount", str(path)).returncode != 0:
        _run("umount", "-l", str(path))  # still busy: detach it now, free it when closed


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. ``"4m"``) mounted at ``path``."""
    require_mounting()
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        _unmount(path)


def ext4_image(image: Path, size_mb: int = 16) -> Path:
    """An empty ext4 filesystem in the file ``image``."""
    require_mounting()
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    with image.open("wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    return image


@contextlib.contextmanager
def loop_mount(image: Path, path: Path, options: str = "errors=remount-ro") -> Iterator[str]:
    """``image`` mounted at ``path`` through a loop device, which it yields."""
    require_mounting()
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-o", f"loop,{options}", str(image), str(path))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a loop device here: {mounted.stderr.strip()}")
    device = _run("findmnt", "-n", "-o", "SOURCE", str(path)).stdout.strip()
    try:
        yield device
    finally:
        _unmount(path)
        if device.startswith("/dev/loop"):
            _run("losetup", "-d", device)


def fail_ext4(device: str) -> None:
    """Make ext4 on ``device`` report an error, as a failing disk would: with errors=remount-ro
    the kernel turns it read-only at once, under every open file."""
    trigger = Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error"
    if not trigger.exists():
        pytest.skip(f"this kernel has no {trigger} to fail the filesystem with")
    trigger.write_text("jobhook reliability test\n")


def fsck(image: Path) -> bool:
    """Check and repair the filesystem in ``image``; whether it is clean now."""
    return _run("e2fsck", "-fy", str(image)).returncode in (0, 1)  # 1: errors corrected


def fill(directory: Path, name: str = "filler") -> Path:
    """Write a file in ``directory`` until the filesystem has no space left; returns the file."""
    filler = directory / name
    block = b"\0" * 65536
    with filler.open("wb", buffering=0) as fh:
        while True:
            try:
                fh.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    # Small writes may still fit in the last partial pages: take those too.
    with filler.open("ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 512)
    return filler


def remount(path: Path, options: str) -> subprocess.CompletedProcess[str]:
    return _run("mount", "-o", f"remount,{options}", str(path))
