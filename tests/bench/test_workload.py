"""The benchmark's Svix message ids: millisecond KSUIDs as Svix makes them, ordered by time, and
the fully random variant."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING

from ksuid import KsuidMs

from bench import signing, workload

if TYPE_CHECKING:
    from pathlib import Path


def test_ksuid_ms_writes_what_svix_ksuid_writes() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        at = rng.randrange(1_500_000_000_000, 2_000_000_000_000) / 1000
        payload = rng.getrandbits(120)
        expected = KsuidMs(datetime.fromtimestamp(at, UTC), payload.to_bytes(15, "big"))
        assert workload.ksuid_ms(at, payload) == str(expected)
    assert workload.ksuid_ms(1_400_000_000, 0) == "0" * 27  # the epoch, zero-padded


def test_realistic_message_ids_are_svix_ksuids_of_now_in_time_order() -> None:
    before = time.time()
    hooks = list(islice(workload.realistic(3), 3000))
    after = time.time()
    ids = [h.message_id for h in hooks if h.kind != "retry"]
    assert len(set(ids)) == len(ids)
    stamps = [KsuidMs.from_base62(i.removeprefix("msg_")).timestamp for i in ids]
    assert all(before - 0.004 <= s <= after for s in stamps)
    assert stamps == sorted(stamps)  # made in order: they sort by time, to the 4 ms step


def test_the_random_ids_variant_is_the_same_mix_with_random_message_ids() -> None:
    hooks = list(islice(workload.realistic(3, "random"), 3000))
    ids = [h.message_id.removeprefix("msg_") for h in hooks if h.kind != "retry"]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 27 and set(i) <= set(workload.BASE62) for i in ids)
    # Fully random: their leading characters spread over the alphabet, not one time's prefix.
    assert len({i[0] for i in ids}) > 50
    kinds = {h.kind for h in hooks}
    assert kinds == {"new", "processing", "retry"}


def test_request_files_carry_the_workload_s_message_ids(tmp_path: Path) -> None:
    leading = {}
    for name in ("realistic", "random-ids"):
        signing.write_requests(tmp_path / name, "t", 400, 1, name)
        lines = (tmp_path / f"{name}.0").read_text().splitlines()
        leading[name] = {line.removeprefix("msg_")[:4] for line in lines}
    assert len(leading["realistic"]) <= 2  # one time's prefix (two if it turned meanwhile)
    assert len(leading["random-ids"]) > 300


def test_new_jobs_take_the_ids_given_and_the_stream_ends_with_them() -> None:
    given = [f"sim-{n}" for n in range(500)]
    hooks = list(workload.realistic(3, "ksuid", iter(given)))
    firsts = [h.job_id for h in hooks if h.kind != "retry"]
    assert set(firsts) <= set(given)  # every job is one the job API knows
    assert [j for j in dict.fromkeys(firsts)] == given[: len(dict.fromkeys(firsts))]
    assert len(set(firsts)) >= 495  # all of them, but for the jobs still waiting for their end
    sequential = list(workload.sequential("t", iter(["a", "b"])))
    assert [h.job_id for h in sequential] == ["a", "b"]


def test_requests_can_be_stamped_each_with_its_own_time(tmp_path: Path) -> None:
    now = int(time.time())
    signing.write_requests(tmp_path / "req", "t", 30, 1, "realistic",
                           stamp=lambda n: now + n // 10)  # fmt: skip
    lines = (tmp_path / "req.0").read_text().splitlines()
    stamps = [int(line.split("\t")[1]) for line in lines]
    assert stamps == [now + n // 10 for n in range(30)]
    message_id, ts, signature, body = lines[-1].split("\t")
    assert signature == signing.sign(message_id, ts, body)
