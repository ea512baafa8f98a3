"""A completion goes out: confirm, resolve and fetch the result, dispatch to handlers."""
