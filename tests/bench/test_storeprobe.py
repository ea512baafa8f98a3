"""bench.storeprobe's reading of a write: the pages each commit puts in the WAL, and which of
them are random leaves (leaves of a B-tree other than its rightmost one)."""

from __future__ import annotations

import random
import sqlite3
from typing import TYPE_CHECKING

from bench.storeprobe import PageMap, WalReader

if TYPE_CHECKING:
    from pathlib import Path

PAGE = 4096


def _store(tmp_path: Path) -> tuple[sqlite3.Connection, Path]:
    db = tmp_path / "probe.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t (k) VALUES (?)", ((f"k{n:08d}",) for n in range(0, 40_000, 2)))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn, db


def _commit(conn: sqlite3.Connection, keys: list[str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO t (k) VALUES (?)", ((k,) for k in keys))
    conn.execute("COMMIT")


def _random_leaves(pages: PageMap, written: list[int]) -> list[str]:
    return [tree for page in set(written) if (tree := pages.random_leaf(page)) is not None]


def test_appends_at_the_right_edge_dirty_no_random_leaf(tmp_path: Path) -> None:
    conn, db = _store(tmp_path)
    pages = PageMap(conn)
    reader = WalReader(tmp_path / "probe.db-wal")
    _commit(conn, [f"k{n:08d}" for n in range(50_000, 50_016)])
    written, size = reader.last_commit()
    assert written
    assert size == len(written) * (PAGE + 24)
    assert _random_leaves(pages, written) == []
    reader.close()
    conn.close()
    assert db.exists()


def test_inserts_at_random_keys_dirty_one_random_leaf_each(tmp_path: Path) -> None:
    conn, _ = _store(tmp_path)
    pages = PageMap(conn)
    reader = WalReader(tmp_path / "probe.db-wal")
    rng = random.Random(1)
    keys = [f"k{rng.randrange(0, 39_000, 2) + 1:08d}" for _ in range(8)]
    _commit(conn, keys)
    written, _ = reader.last_commit()
    trees = _random_leaves(pages, written)
    assert trees.count("sqlite_autoindex_t_1") >= 7  # 8 keys far apart: nearly 8 leaves
    # A second commit's frames follow the first's, and are read on their own.
    _commit(conn, [f"k{n:08d}" for n in range(60_000, 60_004)])
    written, _ = reader.last_commit()
    assert _random_leaves(pages, written) == []
    # After a checkpoint the WAL starts over, with new salts: read from its start.
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    _commit(conn, [keys[0] + "x"])
    written, _ = reader.last_commit()
    assert _random_leaves(pages, written) == ["sqlite_autoindex_t_1"]
    reader.close()
    conn.close()
