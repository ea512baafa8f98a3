"""``jobhook_field_confidence``: each succeeded job's field confidences, by source and field.

Field names come from providers' results, so the ``field`` label is bounded: a source whose
config names ``confidence_fields`` gets those and ``other`` for the rest; any other source gets
the first ``METRIC_FIELDS`` distinct fields this process saw, then ``other``. A source's series
are therefore at most (fields + 1) x buckets, whatever the results hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Histogram

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from prometheus_client import CollectorRegistry

    from receiver.store.rows import FieldValue

METRIC_FIELDS = 20
OTHER = "other"
BUCKETS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)


class ConfidenceMetrics:
    """The field-confidence histogram and the bounded choice of its ``field`` label."""

    def __init__(
        self,
        registry: CollectorRegistry,
        named: Mapping[str, Sequence[str]] | None = None,
        first: int = METRIC_FIELDS,
    ) -> None:
        self.histogram = Histogram(
            "jobhook_field_confidence",
            "Confidence of each extracted field of a succeeded job (0..1), by source and field;"
            " fields beyond those configured (or the first 20 seen) are 'other'.",
            ["source", "field"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._named = {s: frozenset(f) for s, f in (named or {}).items() if f}
        self._first = first
        self._seen: dict[str, set[str]] = {}

    def label(self, source: str, field: str) -> str:
        """The ``field`` label for ``field`` of ``source``: itself while within the bound."""
        named = self._named.get(source)
        if named is not None:
            return field if field in named else OTHER
        seen = self._seen.setdefault(source, set())
        if field in seen:
            return field
        if len(seen) < self._first:
            seen.add(field)
            return field
        return OTHER

    def observe(self, source: str, fields: Iterable[FieldValue]) -> None:
        """One succeeded job's fields (those without a confidence are skipped)."""
        for f in fields:
            if f.confidence is not None:
                self.histogram.labels(source, self.label(source, f.field)).observe(f.confidence)
