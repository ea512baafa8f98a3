"""A result reference as the store keeps it until its completion is resolved."""

from __future__ import annotations

import json

import pytest

from receiver.models import ResultRef
from receiver.pipeline.resolver import ref_from_json, ref_to_json


@pytest.mark.parametrize(
    "ref",
    [
        ResultRef(url="https://r.example/x", sha256="ab" * 32),
        ResultRef(inline={"pages": 2}),
        ResultRef(assemble="GetDocumentAnalysis"),
        ResultRef(url="https://docling.internal/v1/result/t1", single_use=True),
        ResultRef(inline=[{"uri": "gs://b/o"}], assemble="gcs", single_use=True),
    ],
    ids=["url", "inline", "assemble", "single-use", "both"],
)
def test_a_reference_reads_back_as_it_was_written(ref: ResultRef) -> None:
    assert ref_from_json(ref_to_json(ref)) == ref


def test_a_reference_without_optional_fields_keeps_the_text_it_had() -> None:
    text = ref_to_json(ResultRef(url="https://r.example/x"))
    assert text is not None
    assert json.loads(text) == {"inline": None, "url": "https://r.example/x", "sha256": None}
