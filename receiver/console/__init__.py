"""The operator console at ``/ui/``: pages over jobs, deliveries, dead letters and quality,
behind a login that turns the admin token into a signed session cookie."""
