"""Filters, periods and cursors as callers write them (receiver.admin.query)."""

from __future__ import annotations

import base64

import pytest

from receiver.admin.query import (
    QueryError,
    build_filter,
    decode_cursor,
    encode_cursor,
    parse_period,
    parse_time,
)


def test_times_are_iso_8601_in_utc_or_unix_seconds() -> None:
    assert parse_time("t", "1800000000") == 1_800_000_000
    assert parse_time("t", "2027-01-15T08:00:00Z") == 1_800_000_000
    assert parse_time("t", "2027-01-15T09:00:00+01:00") == 1_800_000_000
    assert parse_time("t", "2027-01-15T08:00:00") == 1_800_000_000  # naive means UTC
    for bad in ("tomorrow", "inf", "nan", "2027-13-01"):
        with pytest.raises(QueryError):
            parse_time("t", bad)


def test_cursor_round_trips_and_refuses_forgeries() -> None:
    key = (1_800_000_000.123456, "reducto", "job/1 é")
    assert decode_cursor(encode_cursor(key)) == key
    deep = base64.urlsafe_b64encode(b"[" * 10_000 + b"]" * 10_000).decode()  # RecursionError
    for forged in ("", "!!", encode_cursor(("x", "y", "z")), "WzEsMl0", deep):  # [1,2]: short
        with pytest.raises(QueryError):
            decode_cursor(forged)


def test_metadata_filters_split_on_the_first_separator() -> None:
    where = build_filter(metadata=["url:https://x", "empty:"])
    assert where.metadata == (("url", "https://x"), ("empty", ""))
    with pytest.raises(QueryError):
        build_filter(metadata=[":value"])


def test_periods_are_the_three_documented_ones() -> None:
    assert parse_period(None) == ("24h", 86400.0)
    assert parse_period("30d")[1] == 30 * 86400.0
    with pytest.raises(QueryError):
        parse_period("1y")
