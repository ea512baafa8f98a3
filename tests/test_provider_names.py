"""No module of receiver/ outside ``providers/`` and ``sim/`` names a built-in provider in code:
no string constant that is a provider's name (or one of its modules' paths) and no import of a
provider's own module. Docstrings and other prose may name them; the demo and the default
configuration are the exceptions, and a signature scheme may carry its own name (DocuRift's
and DocExtract's schemes are named after their providers).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from receiver.providers import PROVIDERS

REPO = Path(__file__).resolve().parents[1]
RECEIVER = REPO / "receiver"
OWN = ("providers", "sim")
EXEMPT = {
    "receiver/cli/demo.py",
    "receiver/cli/demo_console.py",
    "receiver/cli/demo_setup.py",
    "receiver/config/load.py",  # the default configuration: a Reducto source
}
SHARED = {"__init__", "base", "jobapi", "contract_suite", "ratelimit", "assembled", "pointer"}
"""The family's shared modules under receiver/providers/; every other module there is one
provider's own."""
NAMES = frozenset(PROVIDERS)
OWN_MODULES = frozenset(
    f"receiver.providers.{path.stem}"
    for path in (RECEIVER / "providers").glob("*.py")
    if path.stem not in SHARED
)


def _prose(tree: ast.AST) -> set[int]:
    """The ids of the string constants that stand alone as statements (docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _scheme_names(tree: ast.AST) -> set[int]:
    """The ids of the constants a signature scheme's class names itself with (``scheme = ``)."""
    found = set()
    for node in ast.walk(tree):
        target = value = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == "scheme" and value is not None:
            found.add(id(value))
    return found


def _imported(node: ast.AST, module: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: -node.level]
            base = ".".join([*parts, base] if base else parts)
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return []


def naming(source: str, module: str, *, scheme_module: bool = False) -> list[str]:
    """Where ``source`` (the text of ``module``) names a built-in provider in code."""
    tree = ast.parse(source)
    allowed = _prose(tree) | (_scheme_names(tree) if scheme_module else set())
    found = []
    for node in ast.walk(tree):
        for target in _imported(node, module):
            if target in OWN_MODULES or any(target.startswith(m + ".") for m in OWN_MODULES):
                found.append(f"line {node.lineno}: imports {target}")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in allowed
            and (node.value in NAMES or node.value in OWN_MODULES)
        ):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def modules() -> list[Path]:
    return [
        path
        for path in sorted(RECEIVER.rglob("*.py"))
        if path.relative_to(RECEIVER).parts[0] not in OWN
        and path.relative_to(REPO).as_posix() not in EXEMPT
    ]


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_the_module_names_no_provider(path: Path) -> None:
    relative = path.relative_to(REPO)
    module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    found = naming(
        path.read_text(encoding="utf-8"),
        module,
        scheme_module=relative.parts[1] == "signatures",
    )
    assert not found, f"{relative} names a provider: {'; '.join(found)}"


@pytest.mark.parametrize(
    "source",
    ['if cfg.provider == "textract":\n    pass\n', 'DEFAULT = ("reducto",)\n',
     "from receiver.providers.textract import AwsSettings\n",
     "from receiver.providers import azure\n", "import receiver.providers.knowhere\n",
     'load("receiver.providers.google")\n', 'scheme = "docurift"\n'],
)  # fmt: skip
def test_the_check_finds_a_name_added_back(source: str) -> None:
    assert naming(source, "receiver.config.sources")


def test_prose_and_a_schemes_own_name_may_name_one() -> None:
    source = '"""Reducto\'s webhooks: provider = "reducto"."""\nclass V:\n    scheme = "docurift"\n'
    assert naming(source, "receiver.signatures.hmac", scheme_module=True) == []


def test_every_built_in_provider_is_looked_for() -> None:
    assert {"reducto", "textract", "azure-docintel", "google-docai", "generic"} <= NAMES
    assert "receiver.providers.textract" in OWN_MODULES
    assert "receiver.providers.base" not in OWN_MODULES
