"""SIGHUP to a real ``jobhook serve``'s whole process group (``kill -s HUP -- -PGID``, a
terminal's hangup; ``systemctl kill -s HUP`` reaches every process alike) while webhooks
arrive: the service reloads each time, its SQLite writer process lives on, no batch fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped]

from tests.reliability.service import Service
from tests.reliability.test_secret_rotation import Sender, _config, _events, _until_logged
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

HANGUPS = 3


def _writer(service: Service) -> int:
    """The pid of the service's SQLite writer process."""
    assert service.process is not None
    for child in psutil.Process(service.process.pid).children():
        if child.cmdline()[1:3] == ["-m", "receiver.store.sqlite.writer"]:
            return int(child.pid)
    raise AssertionError("the service has no SQLite writer process")


async def test_sighup_to_the_process_group_under_load_reloads_and_fails_no_batch(
    tmp_path: Path,
) -> None:
    service = Service(_config(tmp_path, [SECRET]), tmp_path / "serve.log", own_session=True)
    service.start()
    try:
        await service.wait_ready()
        writer = _writer(service)
        sender = Sender(service.url, SECRET)
        stop = asyncio.Event()
        load = asyncio.create_task(sender.run(stop, workers=8))
        for n in range(1, HANGUPS + 1):
            answered = len(sender.answers)
            assert service.process is not None
            os.killpg(service.process.pid, signal.SIGHUP)
            await _until_logged(service, "reloaded", n)
            async with asyncio.timeout(15):  # webhooks keep being stored after the signal
                while len(sender.answers) < answered + 50:
                    await asyncio.sleep(0.01)
        stop.set()
        await load
        same_writer = _writer(service)
        assert await service.stop() == 0
    finally:
        service.close()
    assert same_writer == writer, "the writer process was started again"
    assert sender.answers
    assert all(code == 200 for _, code, _ in sender.answers)
    assert [e["why"] for e in _events(service, "reloaded")] == ["SIGHUP"] * HANGUPS
    assert not _events(service, "store_write_failed")
    assert not _events(service, "store_writer_starting")
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "jobhook.db")) as db:
        (stored,) = db.execute("SELECT count(*) FROM deliveries").fetchone()
    assert stored == len(sender.answers)
    assert SECRET.removeprefix("whsec_") not in service.log_text()
