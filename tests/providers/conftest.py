from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from structlog.testing import capture_logs

from receiver.providers import base
from tests.support import FIXTURES

if TYPE_CHECKING:
    from collections.abc import Iterator


def sample(provider: str) -> dict[str, Any]:
    """The provider's sample bodies from tests/fixtures/providers."""
    data: dict[str, Any] = json.loads((FIXTURES / "providers" / f"{provider}.json").read_text())
    return data


@pytest.fixture
def provider_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Events the adapters log in the test; a fresh logger, so no earlier cache hides them."""
    with capture_logs() as logs:
        monkeypatch.setattr(base, "log", structlog.get_logger(base.__name__))
        yield logs
