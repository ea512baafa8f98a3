"""The ingest benchmark's verdicts, on synthetic figures (the benchmark itself is not a test):
each target met or missed at its threshold, per-round comparisons paired by round, the sustained
runs judged each on its own minutes, and the WAL's peak polled while a minute runs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bench import ingest, ingest_report, report

if TYPE_CHECKING:
    from pathlib import Path

MET, MISSED = report.verdict(True), report.verdict(False)
MIB = 2**20


def _figures(rps: float, p99_ms: float = 5.0, n: int = 0) -> dict[str, Any]:
    return {"rps": rps, "p50_us": 1000.0, "p99_us": p99_ms * 1000, "p999_us": p99_ms * 2000,
            "cpu_us_per_request": 100.0, "load_average": 2.0, "non2xx": 0, "socket_errors": 0,
            "wraps": 0, "round": n}  # fmt: skip


def _rounds(**rates: list[float]) -> dict[str, list[dict[str, Any]]]:
    """Rounds of each row at the given rates (jobhook's p99 5 ms), in run order."""
    return {name: [_figures(r, n=n) for n, r in enumerate(rs)] for name, rs in rates.items()}


def _minute(rps: float, p99_ms: float, wal_peak_mib: float, non2xx: int = 0) -> dict[str, Any]:
    return _figures(rps, p99_ms) | {"store_bytes": 10**9, "wal_bytes": 0, "non2xx": non2xx,
                                    "requests": int(rps * 60), "timeouts": 0,
                                    "wal_peak_bytes": int(wal_peak_mib * MIB)}  # fmt: skip


def _verdicts(rows: list[list[str]]) -> dict[str, str]:
    """Each row's verdict by the first words of its target."""
    return {row[0]: row[2] for row in rows}


def _row(rows: list[list[str]], start: str) -> list[str]:
    (found,) = [row for row in rows if row[0].startswith(start)]
    return found


def _targets(
    rounds: dict[str, list[dict[str, Any]]],
    sustained: dict[str, list[dict[str, Any]]] | None = None,
    connections: int = 32,
) -> list[list[str]]:
    med = ingest_report.medians(rounds)
    return ingest_report.targets(med, rounds, sustained or {}, connections)


def test_the_targets_are_the_issues() -> None:
    assert ingest_report.TARGET_RATIO == 0.35
    assert ingest_report.GOAL_RATIO == 0.50
    assert ingest_report.TARGET_PG_RATIO == 0.25
    assert ingest_report.TARGET_P99_MS == 20.0
    assert ingest_report.TARGET_SUSTAINED == 0.90
    assert ingest_report.TARGET_SUSTAINED_P99 == 2.0
    assert ingest_report.TARGET_WAL_BYTES == 128 * MIB


def test_ratio_met_at_the_target_and_missed_below_it_with_the_goal_named() -> None:
    met = _targets(_rounds(bare=[10_000.0] * 3, jobhook=[3_500.0] * 3))
    missed = _targets(_rounds(bare=[10_000.0] * 3, jobhook=[3_490.0] * 3))
    row = _row(met, "jobhook (SQLite)")
    assert row[2] == MET
    assert "0.35" in row[0]
    assert "goal: 0.50" in row[0]
    assert _row(missed, "jobhook (SQLite)")[2] == MISSED


def test_postgres_ratio_judged_at_a_quarter_and_not_judged_without_its_row() -> None:
    rounds = _rounds(bare=[10_000.0], jobhook=[4_000.0])
    assert _row(_targets(rounds), "jobhook (PostgreSQL)")[2] == "-"
    met = _targets(rounds | _rounds(**{"jobhook-pg": [2_500.0]}))
    missed = _targets(rounds | _rounds(**{"jobhook-pg": [2_400.0]}))
    assert _row(met, "jobhook (PostgreSQL)")[2] == MET
    assert _row(missed, "jobhook (PostgreSQL)")[2] == MISSED


def test_p99_met_at_20_ms_missed_above_and_not_judged_at_other_connections() -> None:
    def rounds(p99_ms: float) -> dict[str, list[dict[str, Any]]]:
        return {"bare": [_figures(10_000.0)], "jobhook": [_figures(4_000.0, p99_ms)]}

    assert _row(_targets(rounds(20.0)), "jobhook p99")[2] == MET
    assert _row(_targets(rounds(20.5)), "jobhook p99")[2] == MISSED
    other = _row(_targets(rounds(5.0), connections=64), "jobhook p99")
    assert other[2] == "-"
    assert "64 connections" in other[1]


def test_ahead_of_adnanh_needs_every_round_not_the_median() -> None:
    # Medians 5,000 against 4,800: ahead; but round 2 is behind, so the target is missed.
    behind_once = _rounds(bare=[10_000.0] * 3, jobhook=[5_000.0, 4_700.0, 5_100.0],
                          adnanh=[4_800.0, 4_800.0, 4_800.0])  # fmt: skip
    row = _row(_targets(behind_once), "jobhook ahead of adnanh")
    assert row[2] == MISSED
    assert "0.98" in row[1]  # the worst round shown
    ahead = _rounds(bare=[10_000.0] * 3, jobhook=[5_000.0, 4_900.0, 5_100.0],
                    adnanh=[4_800.0, 4_800.0, 4_800.0])  # fmt: skip
    assert _row(_targets(ahead), "jobhook ahead of adnanh")[2] == MET


def test_rounds_are_paired_by_index_in_run_order() -> None:
    rounds = _rounds(jobhook=[100.0, 300.0], adnanh=[200.0, 100.0])
    assert ingest_report.round_ratios(rounds, "jobhook", "adnanh") == [0.5, 3.0]


def test_rounds_that_do_not_pair_up_are_not_judged() -> None:
    uneven = _rounds(bare=[10_000.0] * 2, jobhook=[5_000.0] * 2, adnanh=[4_000.0])
    assert ingest_report.round_ratios(uneven, "jobhook", "adnanh") is None
    assert _row(_targets(uneven), "jobhook ahead of adnanh")[2] == "-"
    shifted = _rounds(bare=[10_000.0] * 2, jobhook=[5_000.0] * 2, adnanh=[4_000.0] * 2)
    shifted["adnanh"][0]["round"], shifted["adnanh"][1]["round"] = 1, 2
    assert ingest_report.round_ratios(shifted, "jobhook", "adnanh") is None


def test_no_adnanh_row_is_not_judged() -> None:
    row = _row(_targets(_rounds(bare=[10_000.0], jobhook=[5_000.0])), "jobhook ahead")
    assert row[1:] == ["no adnanh row", "-"]


def test_sustained_met_within_10_percent_2x_p99_and_128_mib() -> None:
    minutes = [_minute(4_000.0, 20.0, 60.0), _minute(3_800.0, 30.0, 128.0),
               _minute(3_600.0, 40.0, 100.0)]  # fmt: skip
    rows = ingest_report.sustained_rows("empty", minutes)
    assert [row[2] for row in rows] == [MET, MET, MET, MET]
    assert all("empty store" in row[0] for row in rows)
    assert "128 MiB" in rows[2][1]  # the peak over every minute, not the last minute's


def test_sustained_throughput_missed_below_90_percent() -> None:
    rows = ingest_report.sustained_rows(
        "prefilled", [_minute(4_000.0, 20.0, 60.0), _minute(3_590.0, 20.0, 60.0)]
    )
    assert [row[2] for row in rows] == [MISSED, MET, MET, MET]


def test_sustained_tail_missed_past_twice_the_first_minutes_p99() -> None:
    rows = ingest_report.sustained_rows(
        "prefilled", [_minute(4_000.0, 27.0, 60.0), _minute(4_000.0, 270.0, 60.0)]
    )
    assert [row[2] for row in rows] == [MET, MISSED, MET, MET]


def test_sustained_wal_missed_by_one_minutes_peak_over_128_mib() -> None:
    minutes = [_minute(4_000.0, 20.0, 60.0), _minute(4_000.0, 20.0, 129.0),
               _minute(4_000.0, 20.0, 80.0)]  # fmt: skip
    rows = ingest_report.sustained_rows("prefilled", minutes)
    assert [row[2] for row in rows] == [MET, MET, MISSED, MET]


def test_sustained_single_minute_judges_only_the_wal_and_none_is_not_run() -> None:
    one = ingest_report.sustained_rows("empty", [_minute(4_000.0, 20.0, 200.0)])
    assert [row[2] for row in one] == ["-", "-", MISSED, MET]
    assert [row[2] for row in ingest_report.sustained_rows("empty", [])] == ["-"] * 4


def test_each_sustained_run_is_judged_on_its_own_minutes() -> None:
    rounds = _rounds(bare=[10_000.0], jobhook=[4_000.0])
    good = [_minute(4_000.0, 20.0, 60.0), _minute(4_000.0, 20.0, 60.0)]
    bad = [_minute(4_000.0, 20.0, 60.0), _minute(2_000.0, 100.0, 600.0)]
    rows = _targets(rounds, {"prefilled": good, "empty": bad})
    prefilled = [row for row in rows if "prefilled store" in row[0]]
    empty = [row for row in rows if "empty store" in row[0]]
    assert [row[2] for row in prefilled] == [MET, MET, MET, MET]
    assert [row[2] for row in empty] == [MISSED, MISSED, MISSED, MET]
    assert _verdicts(_targets(rounds))["sustained"] == "-"


def test_sustained_every_answer_2xx_missed_by_one_error_in_any_minute() -> None:
    minutes = [_minute(4_000.0, 20.0, 60.0), _minute(4_000.0, 20.0, 60.0, non2xx=1),
               _minute(4_000.0, 20.0, 60.0)]  # fmt: skip
    minutes[2]["socket_errors"] = 2
    rows = ingest_report.sustained_rows("prefilled", minutes)
    assert [row[2] for row in rows] == [MET, MET, MET, MISSED]
    assert rows[3][1] == "3 of 720,000 not 2xx"


def test_sustained_summary_line_says_pass_or_miss_for_each_target() -> None:
    minutes = [_minute(4_000.0, 20.0, 60.0), _minute(3_500.0, 30.0, 130.0)]
    line = ingest_report.summary_line(ingest_report.sustained_checks("empty", minutes))
    parts = line.split("; ")
    assert len(parts) == 4
    assert parts[0].startswith("last minute >= 90% of the first's req/s: 4,000 -> 3,500")
    assert parts[0].endswith("MISS[/red]")  # 88 %
    assert "20.0 -> 30.0 ms (1.5 x)" in parts[1]
    assert parts[1].endswith("PASS[/green]")
    assert "peak 130 MiB" in parts[2]
    assert parts[2].endswith("MISS[/red]")
    assert parts[3].endswith("PASS[/green]")
    assert ingest_report.pass_miss(None) == "-"


def test_minute_rows_carry_every_figure_of_the_minute() -> None:
    minute = _minute(4_000.0, 20.0, 64.0, non2xx=2) | {"idle_before_seconds": 3.5,
                                                       "wal_bytes": 32 * MIB}  # fmt: skip
    (row,) = ingest_report.minute_rows([minute])
    assert row == [1, 4_000.0, 1.0, 20.0, 40.0, 2, 1000.0, 32.0, 64.0, 3.5, 2.0]


def test_wal_peak_is_the_largest_size_polled_while_the_block_ran(tmp_path: Path) -> None:
    wal = tmp_path / "jobhook.db-wal"
    wal.write_bytes(b"x" * 1000)
    with ingest.WalPeak(wal, interval=0.01) as peak:
        wal.write_bytes(b"x" * 300_000)
        deadline = time.monotonic() + 5
        while peak.peak < 300_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        wal.write_bytes(b"x" * 10)  # truncated before the block ends: the size there is not it
    assert peak.peak == 300_000


def test_wal_peak_of_a_missing_file_is_zero(tmp_path: Path) -> None:
    with ingest.WalPeak(tmp_path / "none-wal", interval=0.01) as peak:
        pass
    assert peak.peak == 0


def test_the_confirming_row_is_shown_beside_jobhook_over_bare_and_adnanh() -> None:
    rounds = _rounds(bare=[10_000.0] * 2, adnanh=[4_000.0] * 2, jobhook=[3_000.0] * 2,
                     **{"jobhook-confirming": [2_000.0, 2_400.0]})  # fmt: skip
    (row,) = ingest_report.confirming_rows(ingest_report.medians(rounds), rounds)
    assert row[1] == ("0.22 x bare, 0.55 x adnanh (rounds 0.50, 0.60), p99 5.0 ms; jobhook row "
                      "0.30 x bare")  # fmt: skip
    assert ingest_report.confirming_rows(ingest_report.medians(_rounds(bare=[1.0])), {}) == []


def test_the_confirming_line_sums_the_job_api_answers_of_its_rounds() -> None:
    runs = [_figures(2_000.0) | {"requests": 20_000, "job_api_requests_before": 0.0,
                                 "job_api_requests_after": 15_000.0,
                                 "confirmations_waiting_after": 5_000.0,
                                 "beside_cpu_us_per_request": 40.0},
            _figures(2_000.0) | {"requests": 20_000, "job_api_requests_before": 16_000.0,
                                 "job_api_requests_after": 36_000.0,
                                 "confirmations_waiting_after": 100.0,
                                 "beside_cpu_us_per_request": 60.0}]  # fmt: skip
    line = ingest_report.confirming_line(runs)
    assert "answered 35,000 confirmations during its rounds' 40,000 webhooks" in line
    assert "waiting at each round's end: 5,000, 100" in line
    assert "simulator's CPU 50 us a webhook" in line
    assert ingest_report.confirming_line([]) == ""


def test_the_header_says_what_was_measured_and_warns_when_not_quiet() -> None:
    from bench.__main__ import parse

    args = parse(["ingest", "--quick", "--rate-phases", "25,50", "--rate-minutes", "3",
                  "--phase-seconds", "5", "--sustain-minutes", "2"])  # fmt: skip
    facts = ingest_report.header(measured_on="abc1234", load_before=(0.7, 0.4, 0.2), jobs=1000,
                                 ids="ksuid", store_bytes=2_500_000, args=args,
                                 at=0.0)  # fmt: skip
    lines = ingest_report.header_lines(facts)
    assert lines[0].startswith("[red]WARNING: not quiet[/red]: load average 0.70, 0.40, 0.20")
    assert (
        lines[1] == "commit abc1234, 1970-01-01 00:00:00 UTC; load average before the run "
        "0.70, 0.40, 0.20"
    )
    assert lines[2].startswith("store: 2 MB, prefilled with 1,000 jobs (a month of traffic")
    assert "Svix KSUID message ids" in lines[2]
    assert "2 rounds x 5 s per row, wrk -t2 -c32" in lines[3]
    assert "sustained: 2 x 5 s from both" in lines[3]
    assert "rate phases: 25 %, 50 % of the saturated rate, 3 x 5 s each, open loop" in lines[3]
    assert "loop=uvloop, http=httptools" in lines[4]
    args.rate_base = 1450.0
    based = ingest_report.header_lines(ingest_report.header(
        measured_on="x", load_before=(0.1, 0.0, 0.0), jobs=0, ids="ksuid", store_bytes=0,
        args=args))  # fmt: skip
    assert "rate phases: 25 %, 50 % of 1,450 req/s (--rate-base), 3 x 5 s each" in based[2]
    assert "access_log=False" in lines[4]
    quiet = ingest_report.header(measured_on="x", load_before=(0.49, 0.0, 0.0), jobs=0,
                                 ids="ksuid", store_bytes=0, args=args)  # fmt: skip
    assert quiet["quiet"]
    assert not ingest_report.header_lines(quiet)[0].startswith("[red]")
    assert quiet["store"] == "empty (a new store)"
