"""Large result: one big result behind a presigned URL on loopback, jobhook's fetch beside curl.

A blob host (bench.blobhost) serves a JSON result of ``--size-mib`` MiB from the page cache
with sendfile(2), behind an expiring HMAC-signed URL. Each round runs the clients below in
rotating order, the network ones on the same URL: ``curl -o``, and ``receiver.pipeline.fetch``'s
``ResultFetcher`` in a fresh process (bench.fetch_once), which streams it to a temp file while
hashing it (sha256), fsyncs it, renames it into place and fsyncs the directory. Both write to
the same disk. curl does not fsync: the fsync of its file is timed separately, so the table
shows both curl alone (the issue's anchor, on which the verdict rests) and curl + fsync (what
jobhook's durable write is comparable to). A third client, the floor (bench.floor_download),
does only what the target requires beyond curl, at its cheapest: recv_into, sha256, write,
fsync, in plain Python. A fourth, the disk, takes no network and no hashing at all: it writes
the same number of bytes from memory and fsyncs them, the most any durable download can reach
on this disk. When that is below the target, the target is out of reach for a durable fetch
here, and the verdict says so (with jobhook's share of that ceiling). RSS growth is the
fetcher process's peak RSS minus its RSS once the fetcher and its client exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from bench import blobhost, procs, report
from receiver.pipeline.sink import WRITEBACK_BYTES, start_writeback

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

TARGET_RATIO = 0.80
TARGET_RSS_MB = 64.0
MB = 1_000_000
MIB = 1024 * 1024


def require_curl() -> str:
    found = shutil.which("curl")
    if found is None:
        raise SystemExit(
            "bench: the large benchmark needs curl as its anchor: `apt-get install -y curl`; "
            "or skip it: `uv run python -m bench ingest latency poller startup`"
        )
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(4 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync(path: Path) -> float:
    """Seconds to fsync ``path`` (what curl leaves to the page cache)."""
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def _disk(blob: Path, dest: Path, size: int) -> dict[str, Any]:
    """Write ``size`` bytes (the blob's first 4 MiB, repeated) to ``dest`` and fsync: the
    durable write alone, at its fastest known here (writeback started every WRITEBACK_BYTES,
    as jobhook's fetch does; it beat write-all-then-fsync and O_DIRECT on this disk)."""
    with open(blob, "rb") as fh:
        chunk = fh.read(4 * MIB)
    started = time.perf_counter()
    with open(dest, "wb", buffering=0) as out:
        left, pending = size, 0
        while left > 0:
            written = out.write(chunk[:left] if left < len(chunk) else chunk)
            left -= written
            pending += written
            if pending >= WRITEBACK_BYTES:  # as jobhook's fetch: the disk works meanwhile
                start_writeback(out, pending)
                pending = 0
        os.fsync(out.fileno())
    seconds = time.perf_counter() - started
    return {"bytes": size, "complete": dest.stat().st_size == size, "seconds": seconds,
            "mib_s": size / MIB / seconds}  # fmt: skip


def _curl(curl: str, url: str, dest: Path, size: int) -> dict[str, Any]:
    argv = [curl, "--silent", "--show-error", "--fail", "--noproxy", "*", "--output", str(dest),
            "--write-out", "%{size_download} %{time_total}", url]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        # curl names the URL in some errors: keep only its first word (no query string).
        raise RuntimeError(f"curl failed ({proc.returncode}): {proc.stderr.split(' ', 1)[0]}")
    got, seconds = proc.stdout.split()
    fsync = _fsync(dest)
    return {
        "bytes": int(got),
        "complete": int(got) == size and dest.stat().st_size == size,
        "seconds": float(seconds),
        "fsync_seconds": fsync,
        "mib_s": size / MIB / float(seconds),
        "durable_mib_s": size / MIB / (float(seconds) + fsync),
    }


def _python_fetch(module: str, url: str, dest: Path, size: int, sha256: str) -> dict[str, Any]:
    """Run ``python -m module URL DEST`` (bench.fetch_once or bench.floor_download): its JSON
    line as figures, RSS ones when it reports them."""
    argv = [sys.executable, "-m", module, url, str(dest)]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, check=False, env=procs.environment()
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{module} failed ({proc.returncode}): {tail[0][:300]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    figures = {
        "bytes": got["bytes"],
        "complete": got["bytes"] == size and got["sha256"] == sha256,
        "seconds": got["seconds"],
        "mib_s": size / MIB / got["seconds"],
    }
    if "rss_peak" in got:
        figures["rss_before_mb"] = got["rss_before"] / MB
        figures["rss_peak_mb"] = got["rss_peak"] / MB
        figures["rss_growth_mb"] = (got["rss_peak"] - got["rss_before"]) / MB
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    curl = require_curl()
    work = procs.workdir("large")
    size = args.size_mib * MIB
    blobs = report.RESULTS / "blobs"  # kept between runs: made once per size
    blobs.mkdir(parents=True, exist_ok=True)
    report.console.print(f"  preparing a {args.size_mib:,} MiB JSON result ...")
    blob = blobhost.make_blob(blobs / f"result-{args.size_mib}mib.json", size)
    sha256 = _sha256(blob)  # also brings it into the page cache for every client
    _fsync(blob)  # no writeback of the blob may slow the first download
    keyfile = work / "blob.key"
    keyfile.touch(mode=0o600)
    key = secrets.token_bytes(32)
    keyfile.write_bytes(key)
    port = procs.free_port()
    host = procs.Service("blobhost", [sys.executable, "-m", "bench.blobhost", str(blob), str(port),
                                      str(keyfile)], port, work / "blobhost.log")  # fmt: skip
    tools = ("curl", "floor", "jobhook", "disk")
    rounds: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    with procs.running(host):
        for n in range(args.rounds):
            for tool in tools[n % len(tools) :] + tools[: n % len(tools)]:
                dest = work / f"{tool}.json"
                dest.unlink(missing_ok=True)
                url = blobhost.presign(host.url, key, blob.name, ttl=900)
                if tool == "curl":
                    figures = _curl(curl, url, dest, size)
                elif tool == "disk":
                    figures = _disk(blob, dest, size)
                else:
                    module = "bench.floor_download" if tool == "floor" else "bench.fetch_once"
                    figures = _python_fetch(module, url, dest, size, sha256)
                dest.unlink(missing_ok=True)
                rounds[tool].append(figures)
                extra = ""
                if tool == "curl":
                    extra = f" ({figures['durable_mib_s']:,.0f} MiB/s with fsync)"
                elif tool == "jobhook":
                    extra = f", peak RSS +{figures['rss_growth_mb']:.1f} MB"
                report.console.print(
                    f"  round {n + 1}/{args.rounds} {tool}: {figures['mib_s']:,.0f} MiB/s{extra}"
                )
    return _summarise(rounds, args)


def _summarise(rounds: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> dict[str, Any]:
    curl, jh, floor, disk = rounds["curl"], rounds["jobhook"], rounds["floor"], rounds["disk"]
    med = {
        "floor": {k: report.median([r[k] for r in floor]) for k in ("mib_s", "seconds")},
        "disk": {k: report.median([r[k] for r in disk]) for k in ("mib_s", "seconds")},
        "curl": {k: report.median([r[k] for r in curl])
                 for k in ("mib_s", "durable_mib_s", "seconds", "fsync_seconds")},
        "jobhook": {k: report.median([r[k] for r in jh])
                    for k in ("mib_s", "seconds", "rss_growth_mb", "rss_peak_mb")},
    }  # fmt: skip
    growth_max = max(r["rss_growth_mb"] for r in jh)
    ratio = med["jobhook"]["mib_s"] / med["curl"]["mib_s"]
    durable_ratio = med["jobhook"]["mib_s"] / med["curl"]["durable_mib_s"]
    floor_ratio = med["floor"]["mib_s"] / med["curl"]["mib_s"]
    # No durable download can land bytes faster than the disk takes them, network or not.
    disk_ratio = med["disk"]["mib_s"] / med["curl"]["mib_s"]
    # A ceiling only while jobhook stays under it: writing one 4 MiB chunk again and again, the
    # disk-alone row has run slower than jobhook's download here.
    out_of_reach = disk_ratio < TARGET_RATIO and med["jobhook"]["mib_s"] < med["disk"]["mib_s"]
    complete = all(r["complete"] for r in curl + jh + floor + disk)
    nan = float("nan")
    report.show(
        f"large: a {args.size_mib:,} MiB result over loopback, {args.rounds} rounds (medians)",
        ["client", "MiB/s", "seconds", "peak RSS growth MB", "writes"],
        [
            ["curl -o", med["curl"]["mib_s"], med["curl"]["seconds"], nan, "page cache"],
            ["curl -o, then fsync", med["curl"]["durable_mib_s"],
             med["curl"]["seconds"] + med["curl"]["fsync_seconds"], nan, "disk"],
            ["floor: plain recv_into + sha256 + write", med["floor"]["mib_s"],
             med["floor"]["seconds"], nan, "disk + sha256"],
            ["jobhook ResultFetcher", med["jobhook"]["mib_s"], med["jobhook"]["seconds"],
             med["jobhook"]["rss_growth_mb"], "disk + sha256 + rename"],
            ["disk alone: write from memory + fsync", med["disk"]["mib_s"],
             med["disk"]["seconds"], nan, "disk, no network"],
        ],
    )  # fmt: skip
    ok = {"ratio": ratio >= TARGET_RATIO, "rss": growth_max <= TARGET_RSS_MB, "complete": complete}
    ratio_verdict = report.verdict(ok["ratio"])
    if not ok["ratio"] and out_of_reach:
        ratio_verdict += " (out of reach: disk < target)"
    report.show(
        "large targets",
        ["target", "measured", "verdict"],
        [
            [f"jobhook >= {TARGET_RATIO:.2f} x curl MiB/s", f"{ratio:.2f}", ratio_verdict],
            [f"peak RSS growth <= {TARGET_RSS_MB:g} MB (worst round)", f"{growth_max:.1f} MB",
             report.verdict(ok["rss"])],
            ["every download complete (size; sha256 for jobhook)",
             "yes" if complete else "NO", report.verdict(complete)],
            ["(info) jobhook / (curl + fsync)", f"{durable_ratio:.2f}", ""],
            ["(the floor: plain sequential Python, x curl)", f"{floor_ratio:.2f}", "reference"],
            ["(jobhook x the floor)", f"{med['jobhook']['mib_s'] / med['floor']['mib_s']:.2f}",
             ""],
            ["(the ceiling: the disk alone, durable, x curl)", f"{disk_ratio:.2f}",
             "out of reach" if out_of_reach else "not a ceiling" if disk_ratio < TARGET_RATIO
             else "within reach"],
            ["(jobhook x the disk alone)", f"{med['jobhook']['mib_s'] / med['disk']['mib_s']:.2f}",
             ""],
        ],
    )  # fmt: skip
    return {
        "size_bytes": args.size_mib * MIB,
        "rounds": rounds,
        "medians": med,
        "ratio": ratio,
        "durable_ratio": durable_ratio,
        "floor_ratio": floor_ratio,
        "disk_ratio": disk_ratio,
        "ceiling_ratio": med["jobhook"]["mib_s"] / med["disk"]["mib_s"],
        "out_of_reach": out_of_reach,
        "rss_growth_max_mb": growth_max,
        "targets": ok,
    }
