"""Benchmarks that print figures (not timed tests): ``uv run --group dev python -m bench``.

Each benchmark runs jobhook as a real process beside an anchor measured in the same run
(a bare Starlette endpoint, curl, the provider simulator), prints a table and writes JSON
under ``bench/results/``.
"""
