"""Reprocess links in the store, on every backend: a job is claimed for resubmission once, a
failed submission can be claimed again, a stale claim is taken over, ``force`` claims again,
and both ends of a link are found."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from receiver.store import Store


async def test_a_job_is_claimed_once_and_its_link_names_the_new_job(store: Store) -> None:
    now = time.time()
    assert await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    assert not await store.claim_reprocess("docextract", "old-1", "w2", now, stale_before=now - 300)
    await store.finish_reprocess(
        "docextract", "old-1", "w1", now + 1, new_job_id="new-1", error=None
    )
    assert not await store.claim_reprocess("docextract", "old-1", "w2", now, stale_before=now - 300)
    link = await store.reprocess_of("docextract", "old-1")
    assert link is not None
    assert (link.state, link.new_job_id, link.attempts, link.error) == (
        "submitted",
        "new-1",
        1,
        None,
    )
    origin = await store.reprocessed_from("docextract", "new-1")
    assert origin is not None
    assert origin.job_id == "old-1"
    assert await store.reprocessed_from("docextract", "old-1") is None
    assert await store.reprocess_of("docextract", "new-1") is None
    assert list(await store.reprocesses_of("docextract", ["old-1", "nope"])) == ["old-1"]
    assert await store.reprocesses_of("docextract", []) == {}


async def test_a_failed_submission_is_claimable_again(store: Store) -> None:
    now = time.time()
    assert await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    await store.finish_reprocess("docextract", "old-1", "w1", now, new_job_id=None, error="503")
    link = await store.reprocess_of("docextract", "old-1")
    assert link is not None
    assert (link.state, link.error) == ("failed", "503")
    assert await store.claim_reprocess("docextract", "old-1", "w2", now, stale_before=now - 300)
    link = await store.reprocess_of("docextract", "old-1")
    assert link is not None
    assert (link.state, link.attempts, link.error) == ("submitting", 2, None)


async def test_only_the_claimant_finishes_a_claim(store: Store) -> None:
    now = time.time()
    await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    await store.finish_reprocess("docextract", "old-1", "w2", now, new_job_id="x", error=None)
    link = await store.reprocess_of("docextract", "old-1")
    assert link is not None
    assert (link.state, link.new_job_id) == ("submitting", None)


async def test_a_stale_claim_is_taken_over_and_a_fresh_one_is_not(store: Store) -> None:
    now = time.time()
    await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    assert not await store.claim_reprocess("docextract", "old-1", "w2", now + 10,
                                            stale_before=now - 290)  # fmt: skip
    assert await store.claim_reprocess("docextract", "old-1", "w2", now + 400,
                                       stale_before=now + 100)  # fmt: skip


async def test_force_claims_a_submitted_job_again_but_never_one_under_way(store: Store) -> None:
    now = time.time()
    await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    assert not await store.claim_reprocess("docextract", "old-1", "w2", now,
                                            stale_before=now - 300, force=True)  # fmt: skip
    await store.finish_reprocess("docextract", "old-1", "w1", now, new_job_id="new-1", error=None)
    assert await store.claim_reprocess("docextract", "old-1", "w2", now, stale_before=now - 300,
                                       force=True)  # fmt: skip
    await store.finish_reprocess("docextract", "old-1", "w2", now, new_job_id="new-2", error=None)
    link = await store.reprocess_of("docextract", "old-1")
    assert link is not None
    assert (link.new_job_id, link.attempts) == ("new-2", 2)


async def test_an_unknown_outcome_is_claimed_again_only_by_force(store: Store) -> None:
    now = time.time()
    await store.claim_reprocess("docextract", "old-1", "w1", now, stale_before=now - 300)
    await store.finish_reprocess(
        "docextract", "old-1", "w1", now, new_job_id=None, error="timed out", unknown=True
    )
    assert not await store.claim_reprocess("docextract", "old-1", "w2", now, stale_before=now)
    assert await store.claim_reprocess(
        "docextract", "old-1", "w2", now, stale_before=now, force=True
    )
