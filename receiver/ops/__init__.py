"""Running it: metrics, retention, health probes and logging."""
