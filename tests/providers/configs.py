"""The generic provider configured, in TOML only, to read each known provider's API."""

from __future__ import annotations

import tomllib

from receiver.config.settings import SourceSettings
from receiver.providers import Provider, get_provider
from tests.support import SECRET

HMAC_SECRET = "docurift-test-secret-0123456789"

GENERIC_TOML = {
    "reducto": f"""
provider = "generic"
secrets = ["{SECRET}"]
[generic]
webhook_job_id = "/job_id"
webhook_status = "/status"
webhook_metadata = "/metadata"
job_path = "/job/{{job_id}}"
job_status = "/status"
result = "/result"
result_url = "/result/result/url"
error = "/reason"
[generic.status_words]
Pending = "queued"
Idle = "queued"
InProgress = "running"
Completing = "running"
Completed = "succeeded"
Failed = "failed"
Cancelled = "cancelled"
""",
    "docurift": f"""
provider = "generic"
signature = "docurift"
secrets = ["{HMAC_SECRET}"]
[generic]
webhook_job_id = "/data/documentId"
webhook_status = "/type"
webhook_metadata = "/data/metadata"
webhook_error = "/data/error"
job_path = "/v1/documents/{{job_id}}"
job_status = "/data/status"
result = "/data/result"
error = "/data/error"
auth_header = "X-API-Key"
auth_scheme = ""
[generic.status_words]
pending = "queued"
processing = "running"
completed = "succeeded"
failed = "failed"
"document.processing.completed" = "succeeded"
"document.processing.failed" = "failed"
""",
    "knowhere": f"""
provider = "generic"
secrets = ["{SECRET}"]
[generic]
webhook_job_id = "/job_id"
webhook_status = "/status"
job_status = "/status"
result_url = "/result_url"
result_sha256 = "/result_checksum/value"
error = "/error"
progress_done = "/progress/processed_pages"
progress_total = "/progress/total_pages"
retry_after = "/error/details/retry_after"
[generic.status_words]
waiting-file = "queued"
pending = "queued"
converting = "running"
running = "running"
done = "succeeded"
completed = "succeeded"
failed = "failed"
""",
    "docextract": f"""
provider = "generic"
signature = "docextract"
secrets = ["{HMAC_SECRET}"]
[generic]
webhook_job_id = "/data/id"
webhook_status = "/data/status"
job_path = "/v1/documents/{{job_id}}"
job_status = "/status"
result = ""
error = "/error_details"
[generic.status_words]
queued = "queued"
processing = "running"
completed = "succeeded"
failed = "failed"
""",
}


def generic_settings(provider: str) -> SourceSettings:
    data = tomllib.loads(GENERIC_TOML[provider])
    return SourceSettings.model_validate(data, context={"env": {}})


def generic_for(provider: str) -> Provider:
    """A generic adapter configured to read ``provider``'s bodies."""
    return get_provider("generic", generic_settings(provider).table)
