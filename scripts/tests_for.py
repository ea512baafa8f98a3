"""Which tests a change touched: the test paths for changed files, for ``scripts/quick``.

With no argument, the files changed since this branch left ``main`` (committed, staged, unstaged
and untracked); with paths, those. Each maps to tests by the layout the suite mirrors:

- a test module runs itself; a helper module under ``tests/`` runs its folder (at the top, the
  test modules that import it);
- ``receiver/<package>/<module>.py`` runs the test modules named for the module anywhere under
  ``tests/`` (``test_<module>*.py``), else the package's folder ``tests/<package>/``;
- ``receiver/<module>.py`` and ``handlers/<module>.py`` run the modules named for them (the
  handlers' folder for a handler without one);
- ``docs/``, ``README.md`` and ``mkdocs.yml`` run the lists' test, ``scripts/words.py`` its test.

Prints one path per line: the Python files to lint first (prefixed ``lint:``), then the tests.

    python scripts/tests_for.py [PATH ...]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def changed(base: str = "main") -> list[str]:
    """The files changed since the merge base with ``base``, and the untracked ones."""

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
        return [line for line in out.stdout.splitlines() if line]

    try:
        since = git("merge-base", "HEAD", base)[0]
    except (subprocess.CalledProcessError, IndexError):
        since = "HEAD"
    names = git("diff", "--name-only", since) + git("ls-files", "--others", "--exclude-standard")
    return sorted(set(names))


def _named_for(stem: str) -> list[Path]:
    return sorted(TESTS.rglob(f"test_{stem}*.py"))


def tests_for(name: str) -> list[Path]:
    """The test paths that cover the file ``name`` (relative to the repository's root)."""
    path = Path(name)
    parts = path.parts
    if not parts or path.suffix not in (".py", ".md", ".yml", ".toml", ""):
        return []
    if parts[0] == "tests":
        if path.suffix != ".py":
            return [ROOT / path] if (ROOT / path).is_dir() else []
        if path.name.startswith("test_"):
            return [ROOT / path] if (ROOT / path).exists() else []
        if path.parent != Path("tests"):
            return [ROOT / path.parent]
        module = f"tests.{path.stem}"
        return sorted(t for t in TESTS.rglob("test_*.py") if module in t.read_text("utf-8"))
    if parts[0] in ("receiver", "handlers") and path.suffix == ".py":
        stem = path.stem if path.stem != "__init__" else path.parent.name
        found = _named_for(stem)
        if found:
            return found
        if len(parts) > 2 and (TESTS / parts[1]).is_dir():
            return [TESTS / parts[1]]
        if parts[0] == "handlers":
            return [TESTS / "handlers"]
        return []
    if parts[0] == "docs" or name in ("README.md", "mkdocs.yml"):
        return [TESTS / "test_doc_lists.py"]
    if name == "scripts/words.py":
        return [TESTS / "test_words.py"]
    return []


def main(argv: list[str]) -> int:
    names = argv or changed()
    lint = [n for n in names if n.endswith(".py") and (ROOT / n).exists()]
    paths = {p for n in names for p in tests_for(n)}
    # A module inside a folder that runs anyway would only be named twice.
    kept = [p for p in paths if not any(d != p and d in p.parents for d in paths)]
    tests = sorted(str(p.relative_to(ROOT)) for p in kept)
    for name in lint:
        print(f"lint:{name}")
    for name in tests:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
