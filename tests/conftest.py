from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import pytest
import structlog

from receiver.config.load import load_settings
from receiver.config.settings import Settings
from receiver.ops.log import configure_logging
from tests.azuresupport import azurite, azurite_oauth, entra  # noqa: F401 (session fixtures)
from tests.reliability.secretscan import pytest_runtest_makereport  # noqa: F401 (a hook)
from tests.services import postgres_database
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """One Reducto source signed with SECRET, a SQLite store and a file handler in tmp_path."""
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]

[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


@pytest.fixture
def json_logs() -> Iterator[None]:
    """JSON logging for one test, then back to pytest's defaults."""
    configure_logging("debug", "json")
    forget_cached_loggers()
    yield
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _loggers_of_this_test() -> None:
    """Every test's module loggers follow the logging configuration in force in that test."""
    forget_cached_loggers()


def forget_cached_loggers() -> None:
    """Make the modules' loggers take the configuration now in force.

    ``cache_logger_on_first_use`` (the service configures logging once, at startup) makes each
    module's ``log`` keep the configuration of its first use; a test that configured another
    level before (the CLI's tests log at ``warning``) would leave its level behind.
    """
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("receiver", "handlers")):
            continue
        for value in vars(module).values():
            if isinstance(value, structlog._config.BoundLoggerLazyProxy):
                value.__dict__.pop("bind", None)


@pytest.fixture
def tracer() -> Iterator[None]:
    """Tracing on for one test (every span sampled, none exported), then off again."""
    from opentelemetry.sdk.trace import TracerProvider

    from receiver import tracing
    from receiver.ops.tracing import OtelBackend

    backend = OtelBackend(TracerProvider())
    tracing.install(backend)
    yield
    tracing.install(None)
    backend.shutdown()


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards (skips without the server)."""
    async with postgres_database() as url:
        yield url
