"""News comes in: the webhook route (push), the fallback poller (pull), one Ingestor."""
