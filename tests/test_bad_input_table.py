"""docs/bad-input.md names, for every bad form of every input, the test that shows what it
gets: each named test exists, and each property test written for that table is named in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "bad-input.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
PROPERTY_FILES = (
    "tests/providers/test_bad_answers.py",
    "tests/admin/test_bad_queries.py",
    "tests/pipeline/test_bad_result_urls.py",
    "tests/config/test_bad_config.py",
    "tests/service/test_preflight.py",
    "tests/cli/test_errors.py",
)


def _tests_in(path: str) -> set[str]:
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_test_the_table_names_exists() -> None:
    named = NAMED.findall(PAGE.read_text(encoding="utf-8"))
    assert len(named) > 50
    missing = [f"{path}::{name}" for path, name in named if name not in _tests_in(path)]
    assert not missing


def test_every_test_written_for_the_table_is_named_in_it() -> None:
    named = set(NAMED.findall(PAGE.read_text(encoding="utf-8")))
    unnamed = [f"{path}::{name}" for path in PROPERTY_FILES for name in sorted(_tests_in(path))
               if (path, name) not in named]  # fmt: skip
    assert not unnamed
