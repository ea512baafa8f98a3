"""bench.schema_variants on small numbers: both variants hold the same month, do the same work
with the same webhooks, and at Svix's KSUID message ids neither dirties much more than the one
random leaf a new job's (source, job_id) key costs."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from bench import schema_variants

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _count(db: Path, query: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(query).fetchone()[0])


def test_the_two_prefilled_stores_hold_the_same_month(tmp_path: Path) -> None:
    stores = schema_variants.prefilled(tmp_path, 2000, "ksuid")
    keyed, folded = stores["keyed"], stores["folded"]
    for table in ("jobs", "deliveries", "dispatches"):
        query = f"SELECT count(*) FROM {table}"
        assert _count(keyed, query) == _count(folded, query) > 0
    completions = _count(keyed, "SELECT count(*) FROM completions")
    assert completions == _count(folded, "SELECT count(*) FROM jobs WHERE phase IS NOT NULL")
    assert completions == _count(folded, "SELECT count(*) FROM jobs WHERE terminal_at IS NOT NULL")
    # Every delivery and completion points at the job it belongs to.
    orphans = "SELECT count(*) FROM {} t LEFT JOIN jobs j ON j.id = t.job WHERE j.id IS NULL"
    assert _count(keyed, orphans.format("deliveries")) == 0
    assert _count(keyed, orphans.format("completions")) == 0
    assert _count(folded, orphans.format("dispatches")) == 0
    # Reused as they are on the next call.
    stamp = keyed.stat().st_mtime_ns
    assert schema_variants.prefilled(tmp_path, 2000, "ksuid") == stores
    assert keyed.stat().st_mtime_ns == stamp


def test_both_variants_do_the_same_work_and_cost_one_random_leaf_a_webhook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_variants.main(
        ["--jobs", "2000", "--webhooks", "500", "--rounds", "2", "--dir", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    assert "keyed" in printed
    assert "folded" in printed
    results = json.loads((tmp_path / "schema_variants-ksuid.json").read_text("utf-8"))
    keyed, folded = results["keyed"], results["folded"]
    assert keyed["outcomes"] == folded["outcomes"]
    assert keyed["outcomes"]["duplicate"] > 0
    assert keyed["rows"] == folded["rows"]
    assert keyed["rows"]["resolving"] == 0  # every completion the run made was resolved
    assert keyed["completions_resolved"] == folded["completions_resolved"]
    assert keyed["completions_resolved"] == keyed["outcomes"]["completed"]
    for result in (keyed, folded):
        assert result["per_webhook"]["random_leaves"] <= 1.5, result["per_webhook"]
