"""Any text in a query parameter (``GET /jobs``, ``/jobs/stats``, ``/jobs/export``, and the
same words on the command line) is understood or refused as a QueryError, a 400 naming the
parameter; never another exception (a 500)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from receiver.admin import query
from receiver.admin.query import QueryError

TEXT = st.text(max_size=40)


def _refused_or(call: object) -> None:
    assert callable(call)
    refused: QueryError | None = None
    try:
        call()
    except QueryError as exc:
        refused = exc
    assert refused is None or (refused.status_code, refused.reason) == (400, "invalid_query")


@settings(max_examples=300)
@given(
    state=st.none() | TEXT,
    after=st.none() | TEXT,
    before=st.none() | TEXT,
    metadata=st.lists(TEXT, max_size=3),
    confidence=st.none() | TEXT,
    code=st.none() | TEXT,
    field=st.none() | TEXT,
    most=st.none() | TEXT,
)
@example(
    state=None,
    after="1e400",
    before="9999-99-99",
    metadata=[":"],
    confidence="nan",
    code="\x00",
    field=None,
    most="0.8",
)
def test_any_filter_text_is_a_filter_or_a_400(
    state: str | None,
    after: str | None,
    before: str | None,
    metadata: list[str],
    confidence: str | None,
    code: str | None,
    field: str | None,
    most: str | None,
) -> None:
    _refused_or(
        lambda: query.build_filter(
            state=state, created_after=after, created_before=before, metadata=metadata,
            min_confidence=confidence, error_code=code, field=field, max_confidence=most,
        )
    )  # fmt: skip


@settings(max_examples=300)
@given(text=TEXT)
@example(text="²")  # a digit to str.isdigit, not to int()
@example(text="0")
@example(text="501")
def test_any_limit_text_is_a_limit_or_a_400(text: str) -> None:
    _refused_or(lambda: query.parse_limit(text))


@settings(max_examples=300)
@given(text=TEXT | st.binary(max_size=40).map(lambda raw: raw.hex()))
@example(text="WyJ4IiwgMSwgMl0")  # base64 of a JSON list of the wrong types
def test_any_cursor_or_period_text_is_one_or_a_400(text: str) -> None:
    _refused_or(lambda: query.decode_cursor(text))
    _refused_or(lambda: query.parse_period(text))
