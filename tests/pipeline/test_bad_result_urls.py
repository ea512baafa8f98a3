"""Any text a provider puts where a presigned result URL goes is checked or refused as an
UnsafeURLError (the delivery fails for good, nothing is requested); never another exception,
and the refusal never repeats the URL's query, where a presigned URL keeps its signature."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from receiver.errors import UnsafeURLError
from receiver.pipeline.urlsafety import URLPolicy

POLICY = URLPolicy(["*.s3.amazonaws.com", "storage.example.com"])
PARTS = st.sampled_from(
    ["https://", "http://", "ftp://", "//", "https://user:pw@", "bucket.s3.amazonaws.com",
     "storage.example.com", "127.0.0.1", "[::1]", "0x7f.1", "169.254.169.254", ":443", ":99999",
     "/result.json", "?X-Amz-Signature=sekrit", "#frag", "%00", "\\", "@", " ", "\u0130"]
)  # fmt: skip
URLS = st.lists(PARTS, max_size=6).map("".join) | st.text(max_size=60)


@settings(max_examples=500)
@given(url=URLS)
@example(url="https://bucket.s3.amazonaws.com:99999/x")
@example(url="https://[::1/x")
def test_any_result_url_is_checked_or_refused_as_unsafe(url: str) -> None:
    try:
        checked = POLICY.check_url(url)
    except UnsafeURLError as exc:
        refused = exc
    else:
        assert checked.scheme == "https"
        assert checked.host == "storage.example.com" or checked.host.endswith(".s3.amazonaws.com")
        return
    assert refused.permanent
    assert "sekrit" not in str(refused)
