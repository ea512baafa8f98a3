"""The SQLite store's group commit (a bad operation fails alone, its neighbours commit) and its
writer process (started again when it dies, gone when its parent is)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped]
import pytest
import uvicorn.server

from receiver.errors import StoreUnavailableError
from receiver.models import Event, IngestResult, Progress, ResultRef, State
from receiver.store.sqlite.store import SQLiteStore
from receiver.store.sqlite.writer import IGNORED_SIGNALS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path


SOURCE = "inbox"
"""A configured source's name: the store keeps it as given and knows no providers."""


def _event(job_id: str, **metadata: object) -> Event:
    return Event(source=SOURCE, job_id=job_id, state=State.SUCCEEDED,
                 provider_status="Completed", via="webhook", message_id=f"m-{job_id}",
                 metadata=dict(metadata))  # fmt: skip


async def test_one_failing_operation_does_not_fail_the_rest_of_its_batch(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        events = [_event(f"ok-{n}") for n in range(10)]
        poison = _event("bad", unserialisable=object())
        results = await asyncio.gather(
            *(store.ingest(e, ["files"]) for e in [*events[:5], poison, *events[5:]]),
            return_exceptions=True,
        )
    finally:
        await store.close()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert isinstance(failures[0], StoreUnavailableError)
    reopened = SQLiteStore(tmp_path / "s.db")
    await reopened.open()
    try:
        for event in events:
            assert await reopened.completion_for(SOURCE, event.job_id) is not None
        assert await reopened.get_job(SOURCE, "bad") is None
    finally:
        await reopened.close()


async def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.ingest(_event("late"), [])


def _die(db: sqlite3.Connection) -> None:
    """An operation that kills the writer process mid-batch (it travels there by name)."""
    os._exit(3)


async def _wait_until(predicate: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


async def test_writes_run_in_a_writer_process_that_is_started_again_when_killed(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db", offload_at=1)
    await store.open()
    try:
        first = store.connector._process.pid
        assert first is not None
        assert first != os.getpid()
        assert psutil.Process(first).cmdline()[1:3] == ["-m", "receiver.store.sqlite.writer"]
        await store.ingest(_event("before"), [])
        os.kill(first, signal.SIGKILL)
        await _wait_until(lambda: not store.connector._process.alive)
        result = await store.ingest(_event("after"), [])
        assert result.status == "accepted"
        assert store.connector._process.pid not in (None, first)
        assert await store.get_job(SOURCE, "before") is not None
        assert await store.get_job(SOURCE, "after") is not None
    finally:
        await store.close()


async def test_a_writer_process_dying_mid_batch_fails_the_batch_and_the_next_one_commits(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db", offload_at=1)
    await store.open()
    try:
        await store.ingest(_event("before"), [])
        with pytest.raises(StoreUnavailableError, match="writer process exited"):
            await store.connector._commits.write(_die)
        assert (await store.ingest(_event("before"), [])).status == "duplicate"
        assert (await store.ingest(_event("after"), [])).status == "accepted"
    finally:
        await store.close()


async def test_the_writer_process_ignores_the_service_s_signals_and_stops_with_the_store(
    tmp_path: Path,
) -> None:
    """``systemctl kill`` signals every process of the unit, the writer too: stop signals
    (the service still writes while it stops) and SIGHUP (the service reloads and goes on)."""
    store = SQLiteStore(tmp_path / "s.db", offload_at=1)
    await store.open()
    pid = store.connector._process.pid
    assert pid is not None
    try:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(pid, signum)
        await asyncio.sleep(0.2)
        assert (await store.ingest(_event("after-signals"), [])).status == "accepted"
        assert store.connector._process.pid == pid
    finally:
        await store.close()
    assert _gone(pid)


def test_the_writer_process_ignores_every_signal_the_service_handles() -> None:
    """uvicorn stops on its handled signals and the service reloads on SIGHUP
    (``receiver.service.app``): none of them may end the writer."""
    handled = {*uvicorn.server.HANDLED_SIGNALS, signal.SIGHUP}
    assert handled <= set(IGNORED_SIGNALS)


HANGUPS = 3
_UNDER_LOAD = """
import asyncio, itertools, json, signal, sys
from pathlib import Path
import structlog
from receiver.models import Event, State
from receiver.store.sqlite.store import SQLiteStore

async def main():
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    store = SQLiteStore(Path(sys.argv[1]), offload_at=1)  # every batch in the writer process
    await store.open()
    writer = store.connector._process.pid
    ids, done, failures = itertools.count(), [0], []
    stop, hangups = asyncio.Event(), asyncio.Queue()
    # As the service does: SIGHUP reloads, the process goes on.
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hangups.put_nowait, None)

    async def sender():
        while not stop.is_set():
            n = next(ids)
            event = Event(source="inbox", job_id=f"j-{n}", state=State.SUCCEEDED,
                          provider_status="Completed", via="webhook", message_id=f"m-{n}")
            try:
                await store.ingest(event, ["files"])
            except Exception as exc:
                failures.append(repr(exc))
            done[0] += 1

    async def after(count):
        mark = done[0] + count
        while done[0] < mark:
            await asyncio.sleep(0.001)

    senders = [asyncio.create_task(sender()) for _ in range(16)]
    await after(200)
    print("loaded", writer, flush=True)
    for n in range(HANGUPS):
        await hangups.get()
        await after(200)  # batches keep committing after the signal
        print("hangup", n, flush=True)
    stop.set()
    await asyncio.gather(*senders)
    alive = store.connector._process.alive and store.connector._process.pid == writer
    await store.close()
    print(json.dumps({"done": done[0], "failures": failures[:5], "same_writer": alive}))

if sys.argv[2] == "uvloop":
    import uvloop
    uvloop.run(main())
else:
    asyncio.run(main())
""".replace("HANGUPS", str(HANGUPS))


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])  # serve runs uvloop when installed
def test_a_sighup_to_the_process_group_under_load_fails_no_batch(tmp_path: Path, loop: str) -> None:
    """``kill -s HUP -- -PGID`` or a terminal's hangup reaches the whole group while webhooks
    are being written: the service reloads, and its writer process commits on."""
    process = subprocess.Popen(
        [sys.executable, "-c", _UNDER_LOAD, str(tmp_path / "s.db"), loop], start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        words = process.stdout.readline().split()
        assert words[:1] == ["loaded"], words
        writer = int(words[1])
        assert os.getpgid(writer) != process.pid  # a group of its own
        for n in range(HANGUPS):
            os.killpg(process.pid, signal.SIGHUP)
            assert process.stdout.readline().split() == ["hangup", str(n)]
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 0, err
    outcome = json.loads(out)
    assert outcome["failures"] == []
    assert outcome["same_writer"]
    assert outcome["done"] >= 200 * (HANGUPS + 1)
    assert _gone(writer)


def test_the_writer_process_exits_when_its_parent_dies(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from receiver.store.sqlite.store import SQLiteStore\n"
        "async def main():\n"
        f"    store = SQLiteStore(Path({str(tmp_path / 's.db')!r}), offload_at=1)\n"
        "    await store.open()\n"
        "    print('writer', store.connector._process.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    with parent.stdout:
        try:
            lines = (line.decode().split() for line in parent.stdout)
            writer = next(int(words[1]) for words in lines if words[:1] == ["writer"])
            assert not _gone(writer)
        finally:
            parent.kill()
            parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(writer):
        assert time.monotonic() < deadline, "the writer process outlived its parent"
        time.sleep(0.02)


def test_the_writer_process_imports_only_the_store_s_engine() -> None:
    """The writer process runs ``receiver.store.sqlite.writer`` and unpickles operations of
    ``receiver.store.sqlite.operations`` and the engine's programs (``receiver.store.programs``)
    that they run (the audit row of an admin call is written with its effect, so its statements
    come too): that is all it imports, and its resident memory counts in the service's idle
    RSS. Neither the store's contract (``receiver.store.base``, loaded at its first use), the
    engine nor any third-party package but orjson may come with them."""
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import receiver.store.sqlite.writer, receiver.store.sqlite.operations\n"
        "import receiver.store.programs\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout.split()
    ours = sorted(m for m in loaded if m.split(".")[0] == "receiver")
    assert ours == [
        "receiver", "receiver.errors", "receiver.jsontext", "receiver.models", "receiver.store",
        "receiver.store.audit", "receiver.store.circuits", "receiver.store.codec",
        "receiver.store.connector",
        "receiver.store.fields", "receiver.store.history", "receiver.store.programs",
        "receiver.store.queries", "receiver.store.reprocesses", "receiver.store.rows",
        "receiver.store.sql", "receiver.store.sqlite", "receiver.store.sqlite.operations",
        "receiver.store.sqlite.sql", "receiver.store.sqlite.writer",
    ]  # fmt: skip
    stdlib = set(sys.stdlib_module_names)
    others = {m.split(".")[0] for m in loaded} - stdlib - {"receiver"}
    assert others == {"orjson"}


async def test_a_store_that_cannot_start_its_writer_process_does_not_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    store = SQLiteStore(tmp_path / "s.db")
    with pytest.raises(StoreUnavailableError, match="cannot start the SQLite writer process"):
        await store.open()


def test_events_and_results_travel_to_the_writer_process_whole() -> None:
    """Event and IngestResult pickle field by field (``__reduce__``): every field comes back."""
    event = Event(
        source=SOURCE, job_id="j-1", state=State.PARTIAL, provider_status="done",
        via="poll", message_id="m-1", metadata={"a": [1, {"b": None}]}, error="some pages",
        progress=Progress(3, 4), expected_pages=4,
        result=ResultRef(url="https://x.example/r", sha256="ab" * 32), poll_at=12.5,
        error_code="DOCUMENT_CORRUPT",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )  # fmt: skip
    result = IngestResult("duplicate", "j-1", State.EXPIRED, completed=True, requeued=2, took=1.5)
    for value in (event, result):
        # Every field differs from its default, so one that does not travel fails here
        # (and a field added to the class without a value here fails too).
        defaults = [f.default for f in dataclasses.fields(value)]
        assert all(
            getattr(value, f.name) != d
            for f, d in zip(dataclasses.fields(value), defaults, strict=True)
        )
        back = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == value
        assert type(back.state) is State


async def test_a_batch_mixing_ingests_with_a_replay_commits_whole(tmp_path: Path) -> None:
    """Replay, purge and forget are plain operations like the others: a batch that holds one
    commits in one transaction, with the same outcomes."""
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        first = await store.ingest(_event("first"), ["files"])
        assert first.completed
        ingests = [store.ingest(_event(f"mixed-{n}"), ["files"]) for n in range(5)]
        replayed, ingested = await asyncio.gather(
            store.replay(source=SOURCE, include_succeeded=True),
            asyncio.gather(*ingests, store.ingest(_event("first"), ["files"])),
        )
        assert replayed == 0  # its dispatch is pending, not done: nothing to replay
        assert [r.status for r in ingested] == ["accepted"] * 5 + ["duplicate"]
        for n in range(5):
            assert await store.completion_for(SOURCE, f"mixed-{n}") is not None
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _offloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rate: int | None = None
) -> AsyncIterator[tuple[SQLiteStore, list[bytes]]]:
    """An open store whose batches of four or more go to its writer process (and every batch
    once writes come ``rate`` a second, when given), and the batches it sends there, as sent."""
    store = SQLiteStore(tmp_path / "s.db", offload_at=4)
    await store.open()
    sent: list[bytes] = []
    send = store.connector._process.send

    def counted(data: bytes) -> object:
        sent.append(data)
        return send(data)

    monkeypatch.setattr(store.connector._process, "send", counted)
    if rate is not None:
        monkeypatch.setattr(store.connector._commits, "_offload_rate", rate)
    try:
        yield store, sent
    finally:
        await store.close()


async def test_small_batches_run_in_the_service_and_big_ones_in_the_writer_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _offloading(tmp_path, monkeypatch) as (store, sent):
        assert (await store.ingest(_event("alone"), [])).status == "accepted"
        assert sent == []
        results = await asyncio.gather(*(store.ingest(_event(f"many-{n}"), []) for n in range(8)))
        assert [r.status for r in results] == ["accepted"] * 8
        assert len(sent) == 1  # the eight queued together: one batch, one trip
        for job_id in ("alone", *(f"many-{n}" for n in range(8))):
            assert await store.get_job(_event(job_id).source, job_id) is not None


async def test_at_a_steady_rate_even_single_writes_run_in_the_writer_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _offloading(tmp_path, monkeypatch, rate=3) as (store, sent):
        for n in range(5):  # one at a time: batches of one, well within a second
            assert (await store.ingest(_event(f"steady-{n}"), [])).status == "accepted"
        assert len(sent) == 3  # the first two here; from the third, the rate is reached
        for n in range(5):
            event = _event(f"steady-{n}")
            assert await store.get_job(event.source, event.job_id) is not None
        monkeypatch.setattr(store.connector._commits, "_second", time.monotonic() - 2.5)
        assert (await store.ingest(_event("after-a-pause"), [])).status == "accepted"
        assert len(sent) == 3  # a quiet second later: back to the loop's thread


async def test_big_batches_count_toward_the_rate_that_sends_small_ones_to_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At saturation nearly every batch is big; the few small ones between them must not run
    # on the event loop's thread, which is then the service's bottleneck.
    async with _offloading(tmp_path, monkeypatch, rate=6) as (store, sent):
        results = await asyncio.gather(*(store.ingest(_event(f"big-{n}"), []) for n in range(8)))
        assert [r.status for r in results] == ["accepted"] * 8
        assert len(sent) == 1
        assert (await store.ingest(_event("small-after"), [])).status == "accepted"
        assert len(sent) == 2  # eight writes this second already: the rate is reached
