"""bench.phases, the fixed-rate phases of ``bench ingest``, on synthetic records (the benchmark
itself is not a test): the rates from the saturated one, each phase's figures from an open-loop
record, the late sends counted per phase, and the targets judged (from each request's release
when the sender fell behind)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pytest

from bench import loadgen, phases, procs
from bench.__main__ import parse

if TYPE_CHECKING:
    from pathlib import Path

    from bench.ingest_report import Check

START = 1_000_000.0


def _record(rate: float, seconds: float, latency_ms: list[float] | float,
            late: dict[int, float] | None = None, failed: set[int] = frozenset(),
            lost: set[int] = frozenset()) -> loadgen.Record:  # fmt: skip
    """A record of ``rate`` a second for ``seconds``: request i due at START + i / rate,
    answered ``latency_ms`` (one figure, or one a request) after its slot; ``late`` maps a
    request to its lateness in seconds, ``failed`` are answered 503, ``lost`` not at all."""
    count = int(rate * seconds)
    each = latency_ms if isinstance(latency_ms, list) else [latency_ms] * count
    record = loadgen.Record(start=START)
    for i in range(count):
        due = START + i / rate
        lateness = (late or {}).get(i, 0.0)
        record.lateness.append(lateness)
        record.lag.note(lateness)
        record.index.append(i)
        record.due.append(due)
        record.sent.append(due + lateness)
        if i in lost:
            record.answered.append(float("nan"))
            record.status.append(0)
        else:
            record.answered.append(due + each[i] / 1000)
            record.status.append(503 if i in failed else 200)
    return record


def test_percentages_parse_and_out_of_range_ones_are_refused() -> None:
    assert phases.parse_percentages("25,50") == (25.0, 50.0)
    assert phases.parse_percentages(" 12.5 , 100") == (12.5, 100.0)
    for bad in ("", "0", "101", "25,-5"):
        with pytest.raises(ValueError, match="percentages"):
            phases.parse_percentages(bad)


def test_the_cli_takes_rate_phases_their_minutes_and_the_phase_length() -> None:
    args = parse(["ingest", "--quick", "--rate-phases", "25,50", "--rate-minutes", "2",
                  "--phase-seconds", "5"])  # fmt: skip
    assert (args.rate_phases, args.rate_minutes, args.phase_seconds) == ((25.0, 50.0), 2, 5)
    assert parse(["ingest"]).rate_phases == ()
    assert parse(["ingest"]).phase_seconds == 60
    assert parse(["ingest"]).rate_base is None
    assert parse(["ingest", "--rate-base", "5800"]).rate_base == 5800.0
    for bad in ("0", "-1"):
        with pytest.raises(SystemExit):
            parse(["ingest", "--rate-base", bad])


def test_the_rates_are_the_percentages_of_the_saturated_rate_in_order() -> None:
    planned = phases.plan(6_000.0, (50.0, 25.0), phases=10, phase_seconds=60)
    assert [(p.percent, p.rate) for p in planned] == [(50.0, 3_000.0), (25.0, 1_500.0)]
    assert planned[0].requests == 3_000 * 600
    assert phases.plan(1_001.0, (25.0,), 2, 5)[0].requests == 2503  # 250.25 x 10, rounded up


def test_each_phase_gets_the_requests_due_in_it() -> None:
    # 100/s for 3 phases of 2 s; phase 2's requests wait 20 ms, the others' 2 ms.
    lat = [20.0 if 200 <= i < 400 else 2.0 for i in range(600)]
    got = phases.phase_figures(_record(100.0, 6, lat), 100.0, 3, 2)
    assert [p["requests"] for p in got] == [200, 200, 200]
    assert [p["p99_us"] for p in got] == pytest.approx([2000.0, 20000.0, 2000.0])
    assert got[1]["p50_us"] == pytest.approx(20000.0)
    assert [p["not_2xx"] for p in got] == [0, 0, 0]
    assert [p["late_sends"] for p in got] == [0, 0, 0]


def test_percentiles_are_nearest_rank_over_the_phase() -> None:
    lat = [1.0] * 9850 + [50.0] * 130 + [500.0] * 20  # 10,000 requests in one phase
    (got,) = phases.phase_figures(_record(1000.0, 10, lat), 1000.0, 1, 10)
    assert got["p50_us"] == pytest.approx(1000.0)
    assert got["p99_us"] == pytest.approx(50_000.0)  # the 9,900th of 10,000
    assert got["p999_us"] == pytest.approx(500_000.0)  # the 9,990th
    assert got["max_us"] == pytest.approx(500_000.0)


def test_throughput_counts_answers_by_when_they_arrived() -> None:
    # A stall: every request due in phase 1's last second is answered 1.5 s late, in phase 2.
    lat = [1500.0 if 100 <= i < 200 else 1.0 for i in range(400)]
    got = phases.phase_figures(_record(100.0, 4, lat), 100.0, 2, 2)
    assert [p["rps"] for p in got] == [50.0, 150.0]
    assert got[0]["p99_us"] == pytest.approx(1_500_000.0)  # counted in the phase they were due


def test_answers_not_2xx_and_requests_never_answered_count_against_their_phase() -> None:
    record = _record(100.0, 4, 1.0, failed={5, 250}, lost={399})
    got = phases.phase_figures(record, 100.0, 2, 2)
    assert [p["not_2xx"] for p in got] == [1, 2]
    assert [p["answers"] for p in got] == [200, 199]


def test_late_sends_are_counted_in_the_phase_they_were_due_with_the_worst() -> None:
    late = {10: 0.0005, 250: 0.004, 251: 0.030, 399: 0.002}
    got = phases.phase_figures(_record(100.0, 4, 1.0, late=late), 100.0, 2, 2)
    assert [p["late_sends"] for p in got] == [0, 3]  # 0.5 ms is a timer's wake-up, not late
    assert got[1]["worst_late_ms"] == pytest.approx(30.0)
    assert got[0]["worst_late_ms"] == pytest.approx(0.5)


def _checks(percent: float, p99_ms: list[float], late: dict[int, float] | None = None,
            failed: set[int] = frozenset()) -> list[tuple[str, str, bool | None]]:  # fmt: skip
    """The checks of phases of 1,000 requests each, every request of phase k ``p99_ms[k]``."""
    lat = [p99_ms[i // 1000] for i in range(1000 * len(p99_ms))]
    record = _record(500.0, 2 * len(p99_ms), lat, late=late, failed=failed)
    figures = phases.phase_figures(record, 500.0, len(p99_ms), 2)
    return phases.checks(percent, figures, phases.overall(record), record.lag)


def test_p99_met_at_10_ms_at_half_the_rate_and_5_ms_at_a_quarter() -> None:
    assert [ok for _, _, ok in _checks(50.0, [9.0, 9.9])] == [True, True, True]
    assert [ok for _, _, ok in _checks(50.0, [9.0, 10.5])] == [False, True, True]
    assert [ok for _, _, ok in _checks(25.0, [4.9, 4.9])] == [True, True, True]
    assert _checks(25.0, [4.9, 5.5])[0][2] is False
    other = _checks(75.0, [30.0, 30.0])
    assert other[0][2] is None  # measured, not judged: no target at 75 %
    assert "30.00 ms" in other[0][1]


def test_flat_missed_when_the_last_phase_p99_passes_twice_the_first() -> None:
    rows = _checks(50.0, [2.0, 3.0, 4.2])
    assert [ok for _, _, ok in rows] == [True, False, True]
    assert "2.00 -> 4.20 ms (2.1 x)" in rows[1][1]
    assert _checks(50.0, [2.0, 3.0, 3.9])[1][2] is True
    assert _checks(50.0, [2.0])[1][2] is None  # one phase: nothing to compare


def test_a_failed_answer_misses_every_answer_2xx() -> None:
    rows = _checks(25.0, [1.0, 1.0], failed={3})
    assert rows[2][2] is False
    assert rows[2][1] == "1 of 2,000 not 2xx"


def _late_checks(percent: float, on_time_ms: float, late: dict[int, float]) -> list[Check]:
    """The checks of two phases of 1,000 requests, each answered ``on_time_ms`` after its
    release: a late send's answer came that much later than its slot."""
    lat = [on_time_ms + late.get(i, 0.0) * 1000 for i in range(2000)]
    record = _record(500.0, 4, lat, late=late)
    figures = phases.phase_figures(record, 500.0, 2, 2)
    return phases.checks(percent, figures, phases.overall(record), record.lag)


def test_a_sender_behind_its_schedule_is_judged_from_each_release_and_says_so() -> None:
    # 40 of 2,000 sends 30 ms late (2 %): from their slots the p99 is 34 ms, a MISS the
    # server did not make; from their release, 4 ms.
    late = dict.fromkeys(range(0, 2000, 50), 0.030)
    rows = _late_checks(50.0, 4.0, late)
    assert [ok for _, _, ok in rows] == [True, True, True]
    assert rows[0][1].startswith("4.00 ms (worst phase 4.00 ms); from the release: the sender "
                                 "behind (40 of 2,000 sends late, > 1 ms, worst 30.0 ms; from "
                                 "the slot 34.00 ms)")  # fmt: skip
    # A slow server is still a MISS, from its release too.
    assert _late_checks(50.0, 12.0, late)[0][2] is False
    # One send late past the p99 target is enough to judge from the release; one a little
    # late is not (judged from the slot, nothing said).
    assert "from the release" in _late_checks(25.0, 1.0, {7: 0.008})[0][1]
    assert "from the release" not in _late_checks(25.0, 1.0, {7: 0.002})[0][1]


def test_the_phase_figures_give_the_p99_from_the_release_beside_the_slot() -> None:
    late = dict.fromkeys(range(0, 1000, 20), 0.050)  # 50 of 1,000: 5 %, 50 ms late
    lat = [2.0 + late.get(i, 0.0) * 1000 for i in range(1000)]
    (got,) = phases.phase_figures(_record(500.0, 2, lat, late=late), 500.0, 1, 2)
    assert got["p99_us"] == pytest.approx(52_000.0)
    assert got["p99_release_us"] == pytest.approx(2_000.0)


def test_sizes_per_phase_are_the_wal_peak_and_the_store_at_the_end(tmp_path: Path) -> None:
    sizes = phases.Sizes(tmp_path / "jobhook.db")
    sizes.samples = [(START + 0.5, 10, 100), (START + 1.0, 50, 150), (START + 1.9, 20, 160),
                     (START + 2.5, 5, 170), (START + 3.9, 7, 180)]  # fmt: skip
    assert sizes.per_phase(START, 2, 2) == [
        {"wal_peak_bytes": 50, "store_bytes": 160},
        {"wal_peak_bytes": 7, "store_bytes": 180},
    ]


def test_request_lines_make_the_signed_requests_loadgen_sends(tmp_path: Path) -> None:
    path = tmp_path / "req.0"
    path.write_text('msg_1\t1700000000\tv1,abc\t{"job_id": "j"}\n', encoding="utf-8")
    (request,) = phases.request_lines(path, "127.0.0.1", 8000)
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(f"POST {procs.WEBHOOK_PATH} HTTP/1.1\r\nHost: 127.0.0.1:8000".encode())
    assert b"svix-id: msg_1" in head
    assert b"svix-timestamp: 1700000000" in head
    assert b"svix-signature: v1,abc" in head
    assert body == b'{"job_id": "j"}'
    assert b"Content-Length: 15" in head


def test_a_namespace_without_rate_phases_runs_none() -> None:
    assert phases.target_rows([]) == []
    assert not argparse.Namespace(rate_phases=()).rate_phases


@pytest.mark.slow
def test_a_short_fixed_rate_on_a_real_jobhook(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The real thing, short: jobhook serve on an empty store, 25 % of a made-up 200 req/s
    for two phases of a second; every request answered 2xx and counted in its phase."""
    from bench import ingest

    monkeypatch.setattr(ingest, "QUIET_TIMEOUT", 0.5)  # a shared machine: no long wait for idle
    service = ingest._jobhook_sqlite(tmp_path)
    args = argparse.Namespace(workload="realistic", connections=4)
    (one,) = phases.plan(200.0, (25.0,), phases=2, phase_seconds=1)
    with ingest.running([service], {service.name: "/readyz"}):
        result = phases.run_rate(service, tmp_path / "jobhook.db", one, tmp_path, args)
    assert [p["requests"] for p in result["phases"]] == [50, 50]
    assert sum(p["answers"] for p in result["phases"]) == 100
    assert [p["not_2xx"] for p in result["phases"]] == [0, 0]
    assert result["phases"][1]["store_bytes"] > 0
    assert result["checks"][2] == ("25 % of saturated: every answer 2xx", "0 of 100 not 2xx", True)
    assert not (tmp_path / "rate-25.0").exists()  # the request file is removed after the run
