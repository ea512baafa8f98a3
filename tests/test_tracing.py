"""``receiver.tracing``: free while off, the current context as headers and ids while on."""

from __future__ import annotations

import pytest

from receiver import tracing


def test_while_off_every_span_is_the_shared_no_op_and_nothing_is_sent_on() -> None:
    assert not tracing.enabled()
    with tracing.span("anything", parent="00-" + "a" * 32 + "-" + "b" * 16 + "-01") as span:
        span.set("key", "value")
        span.fail("broken")
        assert span is tracing.NULL_SPAN
        assert tracing.headers() == {}
        assert tracing.traceparent() is None
        assert tracing.current_ids() is None
    tracing.annotate({"key": 1})


@pytest.mark.usefixtures("tracer")
def test_a_span_continues_the_trace_its_parent_traceparent_names() -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracing.span("child", parent=parent):
        sent = tracing.headers()
        ids = tracing.current_ids()
    assert tracing.trace_id(sent["traceparent"]) == "0af7651916cd43dd8448eb211c80319c"
    assert ids is not None
    assert ids[0] == "0af7651916cd43dd8448eb211c80319c"
    assert sent["traceparent"] == f"00-{ids[0]}-{ids[1]}-01"


@pytest.mark.usefixtures("tracer")
def test_outside_any_span_there_is_no_context_to_send() -> None:
    assert tracing.headers() == {}
    assert tracing.current_ids() is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "0af7651916cd43dd8448eb211c80319c",
        ),
        (None, None),
        ("", None),
        ("00-short-b7ad6b7169203331-01", None),
    ],
)
def test_trace_id_reads_the_trace_a_stored_traceparent_names(
    value: str | None, expected: str | None
) -> None:
    assert tracing.trace_id(value) == expected


@pytest.mark.usefixtures("tracer")
def test_an_unsampled_trace_stays_unsampled_and_makes_no_child_spans() -> None:
    """A stored traceparent without the sampled flag: the dispatcher's spans are not recorded
    (parent-based sampling keeps one decision per completion), and cost no children."""
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    with tracing.span("jobhook.resolve", parent=parent) as span:
        assert span is not tracing.NULL_SPAN
        sent = tracing.traceparent()
        with tracing.span("jobhook.confirm") as child:
            assert child is tracing.NULL_SPAN
    assert sent is not None
    assert sent.startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert sent.endswith("-00")


@pytest.mark.usefixtures("tracer")
def test_a_malformed_stored_traceparent_starts_a_new_trace() -> None:
    with tracing.span("jobhook.resolve", parent="not-a-traceparent"):
        ids = tracing.current_ids()
    assert ids is not None
