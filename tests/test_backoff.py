"""One capped, finite reading of every Retry-After and RateLimit-* header (receiver.backoff)."""

from __future__ import annotations

import email.utils

import pytest

from receiver.backoff import (
    MAX_WAIT,
    rate_limit_limit,
    rate_limit_remaining,
    rate_limit_reset,
    retry_after,
    seconds_from,
)

NOW = 1_800_000_000.0


def test_delta_seconds_are_read_as_they_are() -> None:
    assert seconds_from("7") == 7.0
    assert seconds_from(" 2.5 ") == 2.5
    assert seconds_from("0") == 0.0


def test_a_future_http_date_is_the_time_until_it() -> None:
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert seconds_from(date, now=NOW) == 30.0


def test_infinity_is_unreadable_not_a_wait_forever() -> None:
    for form in ("inf", "Infinity", "-inf", "+inf"):
        assert seconds_from(form) is None, form


def test_nan_is_unreadable() -> None:
    assert seconds_from("nan") is None
    assert seconds_from("NaN") is None


def test_a_negative_number_is_unreadable() -> None:
    assert seconds_from("-5") is None


def test_a_huge_number_is_capped() -> None:
    assert seconds_from("99999999999999999999") == MAX_WAIT
    assert seconds_from("1e308") == MAX_WAIT
    assert seconds_from("120", cap=60) == 60


def test_a_date_in_the_past_means_now() -> None:
    assert seconds_from("Wed, 21 Oct 2015 07:28:00 GMT", now=NOW) == 0.0


def test_a_word_is_unreadable_not_an_error() -> None:
    for form in ("soon", "later please", "Mon, 99 Foo", "1 1", "0x10"):
        assert seconds_from(form) is None, form


def test_empty_and_absent_are_unreadable() -> None:
    assert seconds_from("") is None
    assert seconds_from("   ") is None
    assert seconds_from(None) is None


def test_an_unreadable_retry_after_falls_back_to_the_reset_header() -> None:
    assert retry_after({"retry-after": "soon", "ratelimit-reset": "12"}) == 12.0
    assert retry_after({"retry-after": "inf"}) is None
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"retry-after-ms": "nan", "retry-after": "3"}) == 3.0


def test_a_reset_given_as_a_unix_time_is_read_as_one_and_capped() -> None:
    assert rate_limit_reset({"x-ratelimit-reset": str(int(NOW + 40))}, now=NOW) == 40.0
    assert rate_limit_reset({"ratelimit-reset": str(int(NOW - 40))}, now=NOW) == 0.0
    assert rate_limit_reset({"ratelimit-reset": "1e300"}, now=NOW) == MAX_WAIT
    assert rate_limit_reset({"ratelimit-reset": "inf"}) is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"ratelimit-limit": "600"}, 600),
        ({"x-ratelimit-limit": "100"}, 100),
        ({"ratelimit-limit": "100, 100;w=60"}, 100),
        ({"ratelimit-limit": "inf"}, None),
        ({"ratelimit-limit": "-1"}, None),
        ({"ratelimit-limit": ""}, None),
        ({}, None),
    ],
)
def test_the_window_limit_is_read_only_when_it_is_a_count(
    headers: dict[str, str], expected: int | None
) -> None:
    assert rate_limit_limit(headers) == expected


def test_remaining_quota_ignores_unreadable_counts() -> None:
    assert rate_limit_remaining({"ratelimit-remaining": "3", "ratelimit-limit": "60"}) == (3, 60)
    assert rate_limit_remaining({"ratelimit-remaining": "lots"}) is None
