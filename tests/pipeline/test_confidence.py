"""A job-level confidence from what the provider reports: the least confident figure."""

from __future__ import annotations

import pytest

from receiver.pipeline.confidence import job_confidence


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"confidence": {"invoice_number": 0.98, "total": 0.91}}, 0.91),  # DocExtract
        ({"confidence": 0.7}, 0.7),
        ({"confidence": [0.9, {"a": 0.4}]}, 0.4),
        ({"confidence": {}}, None),
        ({"confidence": "high"}, None),
        ({"confidence": True}, None),
        ({"confidence": float("nan")}, None),
        ({"extracted_data": {"confidence": 0.1}}, None),  # only the top-level key counts
        ([0.5], None),
        (None, None),
    ],
    ids=["per-field", "number", "nested", "empty", "word", "bool", "nan", "not-top-level",
         "list", "none"],
)  # fmt: skip
def test_job_confidence_is_the_lowest_reported_number(result: object, expected: float) -> None:
    assert job_confidence(result) == expected
