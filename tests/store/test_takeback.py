"""Claims of dead workers are taken back early: a stale replica's by the others (every store),
a previous process's by the embedded store's next owner (SQLite)."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

from receiver.store.sqlite.ownership import StoreLock
from receiver.store.sqlite.store import SQLiteStore
from tests.store.test_contract import claim_all, complete, states

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.store import Store


async def test_a_stale_replicas_claims_go_back_and_a_live_ones_stay(store: Store) -> None:
    for job in ("job-1", "job-2"):
        await complete(store, job)
    await complete(store, "job-3", resolve=True)
    now = time.time() + 1
    await store.heartbeat("dead", now - 30)
    await store.heartbeat("alive", now)
    (dead_claim,) = [d for d, _ in await store.claim_dispatches("dead", 1, 600, now)]
    assert len(await claim_all(store, "alive", now, lease=600)) == 1
    assert len(await store.claim_completions("dead", 10, 600, now)) == 1
    assert await store.acquire_lease("poller", "dead", 600, now)

    assert await store.take_back_stale(now - 6) == 2
    assert await store.take_back_stale(now - 6) == 0, "a replica is taken back once"
    (again,) = await claim_all(store, "alive", now, lease=600)
    assert again.id == dead_claim.id
    assert again.attempts == 2, "the dead worker's attempt still counts"
    assert len(await store.claim_completions("alive", 10, 600, now)) == 1
    assert await store.acquire_lease("poller", "alive", 600, now)


async def test_claims_of_a_worker_that_never_beat_wait_for_their_lease(store: Store) -> None:
    await complete(store, "job-1")
    now = time.time() + 1
    assert len(await claim_all(store, "old-version", now, lease=600)) == 1
    assert await store.take_back_stale(now + 1000) == 0
    assert await states(store) == {"files": "running"}


async def test_a_heartbeat_keeps_a_replica_alive(store: Store) -> None:
    await complete(store, "job-1")
    now = time.time() + 1
    await store.heartbeat("slow", now - 100)
    assert len(await claim_all(store, "slow", now, lease=600)) == 1
    await store.heartbeat("slow", now)
    assert await store.take_back_stale(now - 6) == 0
    assert await states(store) == {"files": "running"}


async def test_the_next_owner_of_an_embedded_store_takes_back_every_claim(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    first = SQLiteStore(path)
    await first.open()
    await complete(first, "job-1")
    await complete(first, "job-2", resolve=True)
    now = time.time() + 1
    assert len(await claim_all(first, "gone", now, lease=600)) == 1
    assert len(await first.claim_completions("gone", 10, 600, now)) == 1
    await first.close()  # closed without releasing, as a killed process leaves it

    second = SQLiteStore(path)
    await second.open()
    try:
        assert await states(second) == {"files": "pending"}
        assert len(await claim_all(second, "next", now)) == 1
        assert len(await second.claim_completions("next", 10, 30, now)) == 1
    finally:
        await second.close()


async def test_a_store_opened_beside_its_live_owner_leaves_the_claims_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    owner = SQLiteStore(path)
    await owner.open()
    try:
        await complete(owner, "job-1")
        assert len(await claim_all(owner, "owner", time.time() + 1, lease=600)) == 1
        started = time.monotonic()
        beside = SQLiteStore(path)
        await beside.open()
        await beside.close()
        assert time.monotonic() - started < 3, "it waited for a live owner"
        assert await states(owner) == {"files": "running"}
    finally:
        await owner.close()


def test_a_lock_held_by_another_live_process_is_refused_at_once(tmp_path: Path) -> None:
    lock = StoreLock(tmp_path / "store.db")
    holder = subprocess.Popen(  # takes the lock, writes its pid, says so, and waits
        [sys.executable, "-c", (
            "import fcntl, os, sys\n"
            f"fd = os.open({str(lock.path)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"held\n"
        started = time.monotonic()
        assert not lock.acquire(wait=10)
        assert time.monotonic() - started < 1
    finally:
        holder.kill()
        holder.communicate()
    assert lock.acquire(wait=10), "the lock is free once its holder is gone"
    lock.release()
