"""A handler's circuit in the store, on every backend: it opens after N failures in a row,
keeps its dispatches unclaimed (no attempt spent), lets one probe through after the cool-down
and closes when the probe succeeds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tests.store.test_contract import SOURCE, claim_all, complete

if TYPE_CHECKING:
    from receiver.store import Store


async def fail(store: Store, handler: str, times: int, at: float) -> str:
    state = ""
    for _ in range(times):
        state = await store.circuit_failed(handler, 5, 30.0, at)
    return state


async def test_five_failures_in_a_row_open_the_circuit_and_a_success_resets_the_count(
    store: Store,
) -> None:
    now = time.time()
    assert await fail(store, "hook", 4, now) == "closed"
    await store.circuit_succeeded("hook", now)
    assert await fail(store, "hook", 4, now) == "closed"
    assert await fail(store, "hook", 1, now) == "open"
    (circuit,) = await store.circuits()
    assert (circuit.handler, circuit.state, circuit.failures) == ("hook", "open", 5)
    assert circuit.retry_at == now + 30.0


async def test_an_open_circuit_keeps_its_dispatches_unclaimed_and_unspent(store: Store) -> None:
    await complete(store, "job-1", "hook", "other")
    now = time.time() + 1
    await fail(store, "hook", 5, now)
    assert [d.handler for d in await claim_all(store, "w1", now)] == ["other"]
    assert await store.next_due() == now + 30.0
    (hook,) = [d for d in await store.dispatches_for(SOURCE, "job-1") if d.handler == "hook"]
    assert (hook.state, hook.attempts) == ("pending", 0)


async def test_after_the_cooldown_one_probe_goes_through_without_spending_an_attempt(
    store: Store,
) -> None:
    await complete(store, "job-1", "hook")
    await complete(store, "job-2", "hook")
    now = time.time() + 1
    await fail(store, "hook", 5, now)
    later = now + 31
    (probe,) = await claim_all(store, "w1", later)
    assert probe.attempts == 0
    assert await claim_all(store, "w2", later) == []
    assert [c.state for c in await store.circuits()] == ["half_open"]
    # The probe fails: open for another cool-down; it succeeds later: closed, all claimable.
    assert await store.circuit_failed("hook", 5, 30.0, later) == "open"
    await store.finish_dispatch(probe.id, "w1", error="down", next_attempt_at=later)
    assert await claim_all(store, "w1", later + 1) == []
    (again,) = await claim_all(store, "w1", later + 31)
    await store.circuit_succeeded("hook", later + 31)
    assert [c.state for c in await store.circuits()] == ["closed"]
    await store.finish_dispatch(again.id, "w1", error=None, next_attempt_at=None)
    assert len(await claim_all(store, "w1", later + 32)) == 1


async def test_a_due_probe_with_nothing_to_deliver_waits_for_the_next_due_dispatch(
    store: Store,
) -> None:
    await complete(store, "job-1", "hook")
    now = time.time() + 1
    (first,) = await claim_all(store, "w1", now)
    await store.finish_dispatch(first.id, "w1", error="down", next_attempt_at=now + 100)
    await fail(store, "hook", 5, now)
    assert await claim_all(store, "w1", now + 31) == []
    (circuit,) = await store.circuits()
    assert (circuit.state, circuit.retry_at) == ("open", now + 100)
    assert await store.next_due() == now + 100


async def test_probe_now_lets_one_probe_through_before_the_cooldown_ends(store: Store) -> None:
    await complete(store, "job-1", "hook")
    await complete(store, "job-2", "hook")
    now = time.time() + 1
    await fail(store, "hook", 5, now)
    assert await claim_all(store, "w1", now + 1) == []
    await store.circuit_probe_now("hook", now + 1)
    (probe,) = await claim_all(store, "w1", now + 1)  # one, though two are due
    assert probe.attempts == 0
    assert await claim_all(store, "w2", now + 1) == []
    (circuit,) = await store.circuits()
    assert circuit.state == "half_open"
    # A probe already out is left alone; a closed circuit is not touched.
    await store.circuit_probe_now("hook", now + 2)
    assert await claim_all(store, "w2", now + 2) == []
    await store.circuit_probe_now("other", now + 2)
    assert [c.handler for c in await store.circuits()] == ["hook"]


async def test_probe_now_takes_a_held_delivery_whose_next_try_is_later(store: Store) -> None:
    await complete(store, "job-1", "hook")
    now = time.time() + 1
    (first,) = await claim_all(store, "w1", now)
    await store.finish_dispatch(first.id, "w1", error="down", next_attempt_at=now + 100)
    await fail(store, "hook", 5, now)
    await store.circuit_probe_now("hook", now + 1)
    (probe,) = await claim_all(store, "w1", now + 1)
    assert probe.id == first.id
    assert [c.state for c in await store.circuits()] == ["half_open"]


async def test_a_busy_handlers_probe_waits_until_it_has_a_free_slot(store: Store) -> None:
    """Its hung deliveries still hold every slot it may: the probe would be one more."""
    await complete(store, "job-1", "hook")
    now = time.time() + 1
    await fail(store, "hook", 5, now)
    later = now + 31
    assert await store.claim_dispatches("w1", 10, 30, later, busy=["hook"]) == []
    assert await store.next_due(["hook"]) is None
    assert [c.state for c in await store.circuits()] == ["open"]
    ((probe, _),) = await store.claim_dispatches("w1", 10, 30, later)
    assert probe.attempts == 0
    assert [c.state for c in await store.circuits()] == ["half_open"]
