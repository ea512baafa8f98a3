"""Normalised errors: each failure's code, and a message that is short and holds no secret."""

from __future__ import annotations

import pytest

from receiver.errors import (
    ChecksumError,
    DeliveryError,
    FetchError,
    ProviderError,
    ResultConsumedError,
    ResultDiskFullError,
    ResultTooLargeError,
    UnsafeURLError,
)
from receiver.pipeline import failures


def test_a_url_in_a_message_loses_its_query_and_credentials() -> None:
    text = "GET https://user:pw@bucket.example/r.json?X-Amz-Signature=abc#frag failed"
    assert failures.bounded(text) == "GET https://bucket.example/r.json failed"


def test_a_long_message_is_cut_to_one_bounded_line() -> None:
    message = failures.bounded("a\nb " + "x" * 1000)
    assert message is not None
    assert len(message) == failures.MAX_MESSAGE
    assert message.startswith("a b x")
    assert message.endswith("…")


def test_a_delivery_error_gives_its_code_and_summary_never_the_answer_body() -> None:
    exc = DeliveryError("POST x answered 503: 'secret body'", code="http_5xx", summary="POST x")
    assert failures.handler_failure(exc) == ("http_5xx", "POST x")


def test_any_other_handler_exception_is_handler_exception() -> None:
    code, message = failures.handler_failure(KeyError("k"))
    assert (code, message) == ("handler_exception", "KeyError: 'k'")
    assert failures.handler_failure(TimeoutError())[0] == "timeout"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UnsafeURLError("no"), "unsafe_url"),
        (ResultTooLargeError("big"), "result_too_large"),
        (ChecksumError("sha"), "checksum_mismatch"),
        (FetchError("gone", expired=True), "result_expired"),
        (ResultConsumedError("spent"), "result_consumed"),
        (FetchError("reset"), "fetch_failed"),
        (ResultDiskFullError("no space"), "disk_full"),
    ],
)
def test_each_fetch_failure_has_its_code(exc: FetchError, code: str) -> None:
    assert failures.fetch_code(exc) == code
    assert failures.resolve_failure(exc) == (code, "fetch")


def test_a_job_api_that_never_confirms_is_a_confirm_timeout_at_the_provider() -> None:
    assert failures.resolve_failure(ProviderError("still running")) == (
        "confirm_timeout",
        "provider",
    )


@pytest.mark.parametrize(("status", "code"), [(503, "http_5xx"), (404, "http_4xx")])
def test_http_statuses_are_grouped_by_class(status: int, code: str) -> None:
    assert failures.http_code(status) == code
