"""Side measurements on the ingest workload, each beside bare Starlette in the same rounds.

``python -m bench.sides [--quick] [--rounds N] [--seconds S] [--prefill JOBS]``: the realistic
workload (Svix's KSUID message ids) into copies of the prefilled store, rows taking turns as in
``bench ingest``:

- the per-webhook log line: jobhook as shipped (``jobhook``), without the line
  (``jobhook-log-off``), and with the same line written straight to the sink as one JSON line
  (``jobhook-log-direct``, which keeps the record of each delivery): ``bench.variant``;
- the ASGI server: bare Starlette and jobhook on uvicorn (as shipped) and on granian
  (``bare-granian``, ``jobhook-granian``), so each server's ratio is taken over its own bare;
- the answer's writes: jobhook as shipped sends each answer in one write
  (``receiver.service.onewrite``); ``jobhook-two-writes`` on uvicorn's stock protocol (head and
  body apart, as bare Starlette sends them), and ``bare-one-write``, the bare endpoint on the
  one-write protocol, over which jobhook's "x its server's bare" is taken;
- and ``jobhook-random-ids`` (as in ``bench ingest``), measured before ``jobhook`` in each
  round here, where ``bench ingest`` measures it after.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import ingest, ingest_report, procs, report
from bench.__main__ import parse
from bench.prefill import CACHE, copy_store, ensure_prefilled, file_name


def _store(work: Any, name: str, jobs: int) -> Any:
    directory = work / name
    directory.mkdir()
    ids = "random" if name == ingest.RANDOM_IDS else "ksuid"
    if jobs:
        source = ensure_prefilled(CACHE / file_name(jobs, ids), jobs, ids)
        copy_store(source, directory / "jobhook.db")
    return directory


def run(args: Any) -> dict[str, Any]:
    work = procs.workdir("sides")
    jobs = 1_000_000 if args.prefill is None else args.prefill
    services = [procs.bare(work)]
    port = procs.free_port()
    services.append(procs.Service("bare-granian", [sys.executable, "-m", "bench.variant",
                    "granian-bare", str(port)], port, work / "bare-granian.log"))  # fmt: skip
    port = procs.free_port()
    services.append(procs.Service("bare-one-write", [sys.executable, "-m", "bench.variant",
                    "one-write-bare", str(port)], port, work / "bare-one-write.log"))  # fmt: skip
    names = (ingest.RANDOM_IDS, "jobhook", "jobhook-two-writes", "jobhook-log-off",
             "jobhook-log-direct", "jobhook-granian")  # fmt: skip
    for name in names:
        directory, port = _store(work, name, jobs), procs.free_port()
        config = procs.jobhook_config(directory, port)
        if name in ("jobhook", ingest.RANDOM_IDS):
            argv = procs.cli("serve", "--config", str(config))
        elif name == "jobhook-granian":
            argv = [sys.executable, "-m", "bench.variant", "granian", str(config), str(port)]
        else:
            argv = [sys.executable, "-m", "bench.variant", name.removeprefix("jobhook-"),
                    str(config)]  # fmt: skip
        services.append(procs.Service(name, argv, port, directory / f"{name}.log"))
    rounds: dict[str, list[dict[str, Any]]] = {s.name: [] for s in services}
    with ingest.running(services, {s.name: "/readyz" for s in services}):
        ingest.take_turns(services, rounds, work, args)
    med = {name: {key: report.median([r[key] for r in runs]) for key in ingest_report.KEYS}
           for name, runs in rounds.items()}  # fmt: skip
    over = {"bare-granian": "bare-granian", "jobhook-granian": "bare-granian",
            "bare-one-write": "bare-one-write", "jobhook": "bare-one-write",
            ingest.RANDOM_IDS: "bare-one-write", "jobhook-log-off": "bare-one-write",
            "jobhook-log-direct": "bare-one-write"}  # fmt: skip
    rows = [[name, m["rps"], m["rps"] / med["bare"]["rps"],
             m["rps"] / med[over.get(name, "bare")]["rps"], m["p50_us"] / 1000,
             m["p99_us"] / 1000, m["cpu_us_per_request"], m["load_average"]]
            for name, m in med.items()]  # fmt: skip
    report.show(
        f"side measurements ({jobs:,}-job store, {args.connections} connections, "
        f"{args.rounds} rounds x {args.seconds:g} s, medians)",
        ["row", "req/s", "x bare (uvicorn)", "x its server's bare", "p50 ms", "p99 ms",
         "CPU us/req", "load"],
        rows,
    )  # fmt: skip
    return {"prefilled_jobs": jobs, "commit": ingest_report.commit(), "rounds": rounds,
            "medians": med}  # fmt: skip


def main() -> None:
    args = parse(["ingest", *sys.argv[1:]])
    path = report.save("sides", run(args))
    report.console.print(f"  -> {path}")


if __name__ == "__main__":
    main()
