"""Fail on words in code that are wrong the day after: an issue number or a measured figure.

Comments and docstrings of receiver/ and handlers/ say why, not how fast it was on one day nor
which issue asked for it: a figure belongs in docs/performance.md or docs/reliability.md, said
once with the command that measured it, and git keeps the history. A provider's documented
fact (results kept 24 hours, 15 requests a second) is not a measurement and may stay.

    python scripts/words.py [PATH ...]      (default: receiver handlers)
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an issue number", re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)),
    ("a time in microseconds", re.compile(r"\d\s*(?:µs|us)\b")),
    ("a rate", re.compile(r"\d\s*(?:req/s|requests?/s|[KMG]i?B/s)\b", re.IGNORECASE)),
    ("a ratio to a bare server", re.compile(r"[\u00d7x]\s*bare\b")),
    ("a percentile's value", re.compile(r"\bp(?:50|90|95|99|99\.9)\b\s*(?:of\s*)?[=:~]?\s*\d")),
    ("a resident size", re.compile(r"\d\s*(?:[KMG]i?B)\s+resident", re.IGNORECASE)),
    ("a measurement", re.compile(r"\bmeasured\b", re.IGNORECASE)),
    ("a timing", re.compile(r"\btook\s+~?\d[\d.,]*\s*(?:ms|s|µs|us)\b")),
    (
        "a before-and-after",
        re.compile(
            r"\d[\d.,]*\s*(?:ms|µs|us|MB|%)?\s*(?:->|→)\s*~?\d[\d.,]*\s*(?:ms|µs|us|req/s|MB|%)"
        ),
    ),
    ("a share of a core", re.compile(r"\d\s*%\s*of\s+a\s+core")),
)


def prose(source: str) -> Iterator[tuple[int, str]]:
    """Each line of a comment or a docstring in ``source``, with its line number."""
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
        elif token.type == tokenize.STRING and previous in (
            tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
        ):  # fmt: skip
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token.type


def findings(path: Path) -> Iterator[str]:
    """``path:line: what`` for each stale word in the file's comments and docstrings."""
    for number, line in prose(path.read_text(encoding="utf-8")):
        for what, pattern in RULES:
            if pattern.search(line):
                yield f"{path}:{number}: {what} in prose: {line.strip()}"


def main(argv: list[str]) -> int:
    roots = [Path(arg) for arg in argv] or [Path("receiver"), Path("handlers")]
    files = [
        p for root in roots for p in ([root] if root.is_file() else sorted(root.rglob("*.py")))
    ]
    found = [finding for path in files for finding in findings(path)]
    for finding in found:
        print(finding)
    if found:
        print(
            f"{len(found)} stale word(s): say why, not the figure (it goes to docs/performance.md"
            " with its command) nor the issue (git keeps history)."
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
