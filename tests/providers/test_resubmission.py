"""Which providers' failed jobs can be submitted again, and with what: DocExtract from the
document's ``document_url`` and ``extractor_id`` (seed 003); the others say why not."""

from __future__ import annotations

import pytest

from receiver.errors import ProviderError
from receiver.providers import get_provider
from receiver.providers.base import Submission
from receiver.providers.mapping import GenericSettings
from tests.providers.conftest import sample

ORIGIN = {"reprocessed_from": {"source": "docextract", "job_id": "job_abc123"}}


def test_docextract_submits_the_document_url_and_extractor_again_with_the_metadata() -> None:
    body = sample("docextract")["job_completed"]
    submission = get_provider("docextract").resubmission(body, job_id="job_abc123",
                                                          metadata=ORIGIN)  # fmt: skip
    assert submission == Submission("/v1/documents", {
        "document_url": "https://files.adteco.example/job_abc123.pdf",
        "extractor_id": "ext_abc123", "mime_type": "application/pdf",
        "metadata": ORIGIN})  # fmt: skip


def test_docextract_names_what_is_missing_from_the_document() -> None:
    # The guide's failure sample is trimmed to its error: without the source, no resubmission.
    reason = get_provider("docextract").resubmission(
        sample("docextract")["job_failed"], job_id="job_abc124", metadata={}
    )
    assert (
        reason
        == "docextract: document job_abc124 has no document_url or extractor_id to submit again"
    )


def test_docextract_reads_the_new_document_id() -> None:
    provider = get_provider("docextract")
    assert provider.submitted_job_id(sample("docextract")["job_queued"]) == "job_abc123"
    with pytest.raises(ProviderError, match="no document id"):
        provider.submitted_job_id({"status": "queued"})


@pytest.mark.parametrize(
    ("name", "missing"),
    [("reducto", "document input"), ("knowhere", "source URL"), ("docurift", "file or URL")],
)
def test_the_other_providers_say_why_they_cannot_resubmit(name: str, missing: str) -> None:
    provider = get_provider(name)
    assert provider.cannot_resubmit is not None
    reason = provider.resubmission({}, job_id="j", metadata={})
    assert isinstance(reason, str)
    assert reason.startswith(f"{name}: ")
    assert missing in reason


def test_a_generic_provider_cannot_resubmit() -> None:
    settings = GenericSettings(job_path="/jobs/{job_id}", webhook_job_id="/id",
                               webhook_status="/status", job_status="/status",
                               status_words={"done": "succeeded"})  # fmt: skip
    provider = get_provider("generic", settings)
    assert provider.resubmission({}, job_id="j", metadata={}) == (
        "generic: jobhook knows no submission endpoint for this provider"
    )
