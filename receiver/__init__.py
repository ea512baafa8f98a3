"""jobhook: a verified, durable webhook receiver for document-processing APIs."""
