"""The order the ingest benchmark's rows take turns in (bench.ingest.turn_order)."""

from __future__ import annotations

import pytest

from bench.ingest import turn_order


@pytest.mark.parametrize("rows", range(2, 11))
def test_each_row_runs_first_in_its_turn_and_every_row_runs_once_a_round(rows: int) -> None:
    services = [f"row-{i}" for i in range(rows)]
    for n in range(2 * rows):
        order = turn_order(services, n)
        assert order[0] == services[n % rows]
        assert sorted(order) == sorted(services)


@pytest.mark.parametrize("rows", range(3, 11))
@pytest.mark.parametrize("rounds", [2, 3])
def test_no_row_runs_right_after_the_same_row_in_every_round(rows: int, rounds: int) -> None:
    """What rotating the order got wrong: each row ran after the same neighbour every round,
    and paid for the work that neighbour left behind in each of them."""
    services = [f"row-{i}" for i in range(rows)]
    before: dict[str, set[str | None]] = {row: set() for row in services}
    for n in range(rounds):
        order = turn_order(services, n)
        for previous, row in zip([None, *order], order, strict=False):
            before[row].add(previous)
    always_after_the_same = [row for row, previous in before.items() if len(previous) == 1]
    assert always_after_the_same == []
