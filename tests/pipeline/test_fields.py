"""A result's extracted fields and confidence, read from each provider's sample result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from receiver.models import State
from receiver.pipeline.fields import MAX_FIELDS, MAX_VALUE, extract_fields, lowest
from receiver.providers import Provider, get_provider
from receiver.providers.reducto import WORDS
from receiver.store.rows import FieldValue
from tests.providers.conftest import sample

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from receiver.providers.base import FieldReading


def _inline(provider: str, key: str) -> object:
    body = sample(provider)[key]
    status = get_provider(provider).parse_job(body, source="x", job_id="j")
    assert status.result is not None
    return status.result.inline


def test_docextract_fields_carry_their_confidence_and_value() -> None:
    fields = extract_fields(_inline("docextract", "job_completed"))
    assert fields == (
        FieldValue("invoice_number", 0.98, "1042"),
        FieldValue("total", 0.91, "1280.0"),
    )
    assert lowest(fields) == 0.91


def test_reducto_block_words_become_numbers_by_block_type() -> None:
    fields = extract_fields(_inline("reducto", "job_completed_full"), get_provider("reducto"))
    assert fields == (FieldValue("Text", WORDS["high"], None),)


def test_reducto_block_type_takes_its_least_confident_block_and_numeric_scores_win() -> None:
    blocks = [
        {"type": "Table", "confidence": "high"},
        {"type": "Table", "confidence": "low"},
        {"type": "Text", "confidence": "low", "granular_confidence": {"parse_confidence": 0.93}},
        {"type": "Figure", "confidence": "unheard-of"},
        {"type": "Title"},
    ]
    result = {"result": {"type": "full", "chunks": [{"blocks": blocks}]}}
    assert extract_fields(result, get_provider("reducto")) == (
        FieldValue("Table", WORDS["low"], None),
        FieldValue("Text", 0.93, None),
    )


def test_docurift_fields_have_values_and_no_confidence() -> None:
    fields = extract_fields(_inline("docurift", "job_completed"))
    assert fields == (
        FieldValue("invoice_number", None, "1042"),
        FieldValue("total", None, "1280.00"),
    )
    assert lowest(fields) is None


@pytest.mark.parametrize(
    "result",
    [None, [], "text", {}, {"confidence": "high"}, {"confidence": {"a": float("nan")}},
     {"confidence": {"a": True}}, {"extracted_data": "not a map"}],
)  # fmt: skip
def test_results_without_fields_have_none(result: object) -> None:
    assert extract_fields(result) == ()


def test_nested_confidence_maps_get_dotted_names() -> None:
    result = {"confidence": {"buyer": {"name": 0.7, "vat": 0.99}}, "extracted_data": {"x": 1}}
    names = [(f.field, f.confidence, f.value) for f in extract_fields(result)]
    assert names == [("buyer.name", 0.7, None), ("buyer.vat", 0.99, None), ("x", None, "1")]


def test_fields_and_values_are_bounded() -> None:
    many = {f"f{n:04d}": 0.9 for n in range(MAX_FIELDS * 3)}
    result = {"confidence": many, "extracted_data": {"f0000": "x" * (MAX_VALUE * 5)}}
    fields = extract_fields(result)
    assert len(fields) == MAX_FIELDS
    assert fields[0].value == "x" * MAX_VALUE


class _Failing(Provider):
    name = "failing"
    status_words: ClassVar[Mapping[str, State]] = {}

    def result_fields(self, result: dict[str, Any]) -> Iterator[FieldReading]:
        yield "first", 0.5, None
        raise TypeError("a shape the reader did not foresee")


def test_a_reader_that_fails_loses_its_fields_not_the_others() -> None:
    result = {"confidence": {"total": 0.9}, "extracted_data": {"total": 12}}
    assert extract_fields(result, _Failing()) == (FieldValue("total", 0.9, "12"),)


def test_a_damaged_textract_result_keeps_its_other_fields() -> None:
    block = {"BlockType": "KEY_VALUE_SET", "Id": "k", "EntityTypes": True}
    result = {"Blocks": [block], "confidence": {"total": 0.9}}
    assert extract_fields(result, get_provider("textract")) == (FieldValue("total", 0.9, None),)
