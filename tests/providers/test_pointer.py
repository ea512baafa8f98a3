"""JSON pointers: the examples of RFC 6901 section 5, and the malformed ones refused."""

from __future__ import annotations

import pytest

from receiver.providers.pointer import MISSING, Pointer

DOC = {
    "foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4,
    "i\\j": 5, 'k"l': 6, " ": 7, "m~n": 8,
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", DOC), ("/foo", ["bar", "baz"]), ("/foo/0", "bar"), ("/", 0), ("/a~1b", 1),
     ("/c%d", 2), ("/e^f", 3), ("/g|h", 4), ("/i\\j", 5), ('/k"l', 6), ("/ ", 7),
     ("/m~0n", 8)],
)  # fmt: skip
def test_rfc_6901_examples_resolve(text: str, expected: object) -> None:
    assert Pointer.parse(text).resolve(DOC) == expected


@pytest.mark.parametrize("text", ["/nope", "/foo/2", "/foo/-", "/foo/01", "/foo/x", "/foo/0/x"])
def test_absent_values_are_missing(text: str) -> None:
    assert Pointer.parse(text).resolve(DOC) is MISSING


def test_null_is_a_value_not_missing() -> None:
    assert Pointer.parse("/a").resolve({"a": None}) is None


def test_escapes_decode_tilde_one_before_tilde_zero() -> None:
    assert Pointer.parse("/~01").tokens == ("~1",)


@pytest.mark.parametrize("text", ["foo", "#/foo", "/a~", "/a~2b"])
def test_malformed_pointers_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="JSON pointer"):
        Pointer.parse(text)
