"""Reading the Dockerfile as the tests need it: instructions, the final stage, its ENV."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        result.append((keyword.upper(), args.strip()))
        pending = ""
    return result


def final_stage() -> list[tuple[str, str]]:
    """The runtime stage: everything from the last FROM on."""
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def image_env() -> dict[str, str]:
    """The environment the runtime stage sets (``KEY=value`` forms only)."""
    pairs = " ".join(args for keyword, args in final_stage() if keyword == "ENV").split()
    return dict(pair.split("=", 1) for pair in pairs)
