"""The contract's two parts, the ``Engine`` the pipeline runs on and the ``Reads`` the admin API
and the console show: every backend is both, and the shared suite (the tests that take the
``store`` fixture: SQLite writing in the service and in its writer process, PostgreSQL) calls
every method of each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from receiver.store import Engine, Reads, Store
from receiver.store.postgres.store import PostgresStore
from receiver.store.sqlite.store import SQLiteStore

HERE = Path(__file__).parent
LIFECYCLE = {"open", "close"}  # the fixture opens and closes every store it hands out


def shared_suite() -> list[Path]:
    """The test modules of this folder whose tests take the ``store`` fixture."""
    return sorted(p for p in HERE.glob("test_*.py") if "store: Store" in p.read_text())


def called_on_store(paths: list[Path]) -> set[str]:
    return {
        node.attr
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "store"
    }


def test_the_store_is_the_engine_and_its_reads_and_nothing_else() -> None:
    assert not Engine.__abstractmethods__ & Reads.__abstractmethods__
    assert Store.__abstractmethods__ == Engine.__abstractmethods__ | Reads.__abstractmethods__


@pytest.mark.parametrize("backend", [SQLiteStore, PostgresStore])
def test_every_backend_is_both_parts(backend: type[Store]) -> None:
    assert issubclass(backend, Engine)
    assert issubclass(backend, Reads)
    assert not backend.__abstractmethods__


@pytest.mark.parametrize("part", [Engine, Reads], ids=["engine", "reads"])
def test_the_shared_suite_calls_every_method_of_each_part(part: type) -> None:
    suite = shared_suite()
    assert len(suite) >= 5, suite
    missing = sorted(part.__abstractmethods__ - LIFECYCLE - called_on_store(suite))
    assert missing == [], f"no shared contract test calls store.{', store.'.join(missing)}"
