"""The field-confidence histogram keeps its ``field`` label bounded."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from receiver.ops.confidence_metrics import OTHER, ConfidenceMetrics
from receiver.store.rows import FieldValue


def _count(registry: CollectorRegistry, source: str, field: str) -> float:
    value = registry.get_sample_value(
        "jobhook_field_confidence_count", {"source": source, "field": field}
    )
    return value or 0.0


def test_configured_fields_are_named_and_the_rest_are_other() -> None:
    registry = CollectorRegistry()
    metrics = ConfidenceMetrics(registry, {"de": ["total"]})
    metrics.observe("de", [FieldValue("total", 0.6, None), FieldValue("vendor", 0.9, None)])
    metrics.observe("de", [FieldValue("note", None, "no confidence: not observed")])
    assert _count(registry, "de", "total") == 1
    assert _count(registry, "de", OTHER) == 1
    assert _count(registry, "de", "vendor") == 0
    below = registry.get_sample_value(
        "jobhook_field_confidence_bucket", {"source": "de", "field": "total", "le": "0.7"}
    )
    assert below == 1


def test_unconfigured_sources_name_the_first_fields_seen_then_other() -> None:
    registry = CollectorRegistry()
    metrics = ConfidenceMetrics(registry, first=2)
    for name in ("a", "b", "c", "a", "d"):
        metrics.observe("re", [FieldValue(name, 0.9, None)])
    assert [_count(registry, "re", n) for n in ("a", "b", "c", "d")] == [2, 1, 0, 0]
    assert _count(registry, "re", OTHER) == 2
    metrics.observe("other-source", [FieldValue("c", 0.9, None)])
    assert _count(registry, "other-source", "c") == 1
