"""The bearer-guarded admin API: jobs, stats, replay, export, long-poll and events."""
