"""The SQLite store on a filesystem that fills up or fails: 503, never a 2xx without a durable
write, and recovery without a restart once space returns."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.reliability.mounts import ext4_image, fail_ext4, fill, fsck, loop_mount, remount, tmpfs
from tests.reliability.service import Service
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings


def _settings(tmp_path: Path, data_dir: Path) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{data_dir}"
[dispatch]
lease_seconds = 2
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.1
backoff_max = 0.5
max_attempts = 100
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def _post(client: httpx.AsyncClient, n: int) -> int:
    body = reducto_body(f"job-{n}")
    response = await client.post(
        "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=f"msg-{n}")
    )
    return response.status_code


def _stored(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {row[0] for row in conn.execute("SELECT message_id FROM deliveries")}


async def _wait_for_outputs(out: Path, jobs: list[int], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not all((out / "reducto" / f"job-{n}.json").exists() for n in jobs):
            await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
async def test_a_full_disk_answers_503_and_the_store_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "mnt", "3m") as mnt:
        settings = _settings(tmp_path, mnt / "data")
        db = mnt / "data" / "jobhook.db"
        statuses: dict[int, int] = {}
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, timeout=30) as client,
        ):
            statuses[0] = await _post(client, 0)
            filler = fill(mnt)
            # Each webhook grows the WAL; sooner or later a commit finds no space.
            for n in range(1, 400):
                statuses[n] = await _post(client, n)
                if sum(s == 503 for s in statuses.values()) >= 10:
                    break
            refused = sorted(n for n, status in statuses.items() if status == 503)
            assert set(statuses.values()) <= {200, 503}, statuses
            assert refused, "the disk never filled up: no webhook was refused"
            assert (await client.get("/healthz")).status_code == 200
            filler.unlink()
            # The sender retries what was refused; the same process must now accept it.
            for n in refused:
                for _ in range(50):
                    if (status := await _post(client, n)) == 200:
                        break
                    await asyncio.sleep(0.2)
                assert status == 200, f"job-{n} still {status} after space returned"
            assert await _post(client, 1000) == 200
            await _wait_for_outputs(tmp_path / "out", [*statuses, 1000])
        stored = _stored(db)
    accepted_while_full = {f"msg-{n}" for n, s in statuses.items() if s == 200}
    assert accepted_while_full <= stored, "a 2xx was given for a write that is not on disk"
    assert stored == {f"msg-{n}" for n in [*statuses, 1000]}


@pytest.mark.timeout(120)
async def test_a_filesystem_gone_read_only_answers_503_and_acknowledges_nothing(
    tmp_path: Path,
) -> None:
    """ext4 with errors=remount-ro fails under the open store (what a failing disk does).

    A plain ``mount -o remount,ro`` is refused (EBUSY) while SQLite holds its files open for
    writing, so a read-only store in production comes from such an emergency remount; ext4 then
    refuses ``remount,rw`` until the filesystem is checked, so recovery is a restart.
    """
    image, mnt = ext4_image(tmp_path / "disk.img"), tmp_path / "mnt"
    config = tmp_path / "jobhook.toml"
    _settings(tmp_path, mnt / "data")  # writes the config file
    service = Service(config, tmp_path / "service.log")
    with loop_mount(image, mnt) as device:
        try:
            service.start()
            await service.wait_ready()
            async with httpx.AsyncClient(base_url=service.url, timeout=30) as client:
                assert await _post(client, 0) == 200
                assert remount(mnt, "ro").returncode != 0, "remount,ro worked under an open store"
                assert await _post(client, 1) == 200
                fail_ext4(device)
                statuses = [await _post(client, n) for n in range(2, 12)]
                assert statuses == [503] * 10
                assert (await client.get("/healthz")).status_code == 200
                assert remount(mnt, "rw").returncode != 0, "ext4 took rw back without a check"
            await service.stop()
        finally:
            service.close()
    # The operator's part: check the filesystem, mount it again, restart the service.
    assert fsck(image)
    with loop_mount(image, mnt):
        try:
            service.start()
            await service.wait_ready()
            async with httpx.AsyncClient(base_url=service.url, timeout=30) as client:
                assert await _post(client, 1) == 200  # a resend of an acknowledged one
                assert await _post(client, 2) == 200  # refused before: the sender retries
            await service.stop()
        finally:
            service.close()
        stored = _stored(mnt / "data" / "jobhook.db")
    assert stored == {"msg-0", "msg-1", "msg-2"}
    assert SECRET.removeprefix("whsec_") not in service.log_text()
