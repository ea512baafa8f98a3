"""README's and docs/index.md's lists of pages and providers follow mkdocs.yml and the registry.

A page added to the site's nav, or a provider added to ``PROVIDERS``, fails here until both lists
name it, so the two front pages cannot lag behind again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from receiver.providers import PROVIDERS

ROOT = Path(__file__).resolve().parent.parent

NAMED = {
    "azure-docintel": "Azure",
    "docextract": "DocExtract",
    "docling": "Docling",
    "docurift": "DocuRift",
    "generic": "`generic`",
    "google-docai": "Google",
    "knowhere": "Knowhere",
    "landingai": "LandingAI",
    "llamaparse": "LlamaParse",
    "mistral": "Mistral",
    "reducto": "Reducto",
    "textract": "Textract",
    "unstructured": "Unstructured",
}
"""How the front pages name each built-in provider (a new one is added here and there)."""


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s+- [^:]+: (\S+\.md)$", nav, flags=re.MULTILINE)


def _readme_documentation() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]


def _index_next() -> str:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    return text.split("\n## Where to go next\n", 1)[1]


def test_every_provider_has_a_name_on_the_front_pages() -> None:
    assert set(NAMED) == set(PROVIDERS)


@pytest.mark.parametrize("page", [p for p in _nav_pages() if p != "index.md"])
def test_readme_and_the_index_link_every_page_of_the_site(page: str) -> None:
    assert (ROOT / "docs" / page).is_file()
    assert f"(docs/{page})" in _readme_documentation(), f"README's Documentation lacks {page}"
    assert f"]({page})" in _index_next(), f"docs/index.md's 'Where to go next' lacks {page}"


@pytest.mark.parametrize("provider", sorted(NAMED))
def test_readme_and_the_index_name_every_provider(provider: str) -> None:
    name = NAMED[provider]
    providers_line = next(
        line for line in _readme_documentation().splitlines() if "(docs/providers.md)" in line
    )
    assert name in providers_line, f"README's Providers line lacks {name}"
    intro = (ROOT / "docs" / "index.md").read_text(encoding="utf-8").split("\n\n", 2)[1]
    assert name.strip("`").split()[0] in intro, f"docs/index.md's opening lacks {name}"
