"""One download by ``receiver.pipeline.fetch.ResultFetcher`` in a fresh process: time and peak RSS.

``python -m bench.fetch_once URL DEST`` prints one JSON line. RSS is taken once the fetcher
and its client exist, so the growth is what the download itself costs. The event loop is the
one ``jobhook serve`` runs on (uvloop where it is installed).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import resource
import sys
import time
from pathlib import Path

import psutil  # type: ignore[import-untyped]

from receiver.config.settings import ResultsSettings
from receiver.pipeline.fetch import ResultFetcher


async def fetch(url: str, dest: Path) -> dict[str, float]:
    settings = ResultsSettings(
        dir=dest.parent,
        max_bytes=4 * 1024**3,
        allowed_hosts=("127.0.0.1",),
        allow_http=True,
        allow_private_networks=True,
    )
    async with ResultFetcher(settings) as fetcher:
        rss_before = psutil.Process().memory_info().rss
        started = time.perf_counter()
        info = await fetcher.fetch(url, dest)
        seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"seconds": seconds, "bytes": info.bytes, "rss_before": rss_before, "rss_peak": peak,
            "sha256": info.sha256}  # fmt: skip


def main() -> None:
    from receiver.ops.log import configure_logging

    configure_logging("warning", "json")
    main_coro = fetch(sys.argv[1], Path(sys.argv[2]))
    if importlib.util.find_spec("uvloop"):
        import uvloop

        result = uvloop.run(main_coro)
    else:
        result = asyncio.run(main_coro)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
