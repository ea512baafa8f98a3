from __future__ import annotations

import importlib.util
import logging
import sys
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from hypothesis import settings as hypothesis_settings

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


# No per-example deadline: the property tests prove what an input does, not how fast, and beside
# a second worker an example's time is the machine's, not the code's.
hypothesis_settings.register_profile("jobhook", deadline=None)
hypothesis_settings.load_profile("jobhook")

SERIAL_GROUPS = {
    "tests/handlers/test_redis.py": "brokers",
    "tests/handlers/test_nats.py": "brokers",
    "tests/handlers/test_rabbitmq.py": "brokers",
    "tests/handlers/test_delivery_ids.py": "brokers",
}
"""Modules that must not run beside each other: the broker tests stop and start the machine's
Redis, NATS and RabbitMQ (``tests.services.stopped``), which the others in the group use."""

APART = {
    "tests/service/test_preflight.py",
    "tests/test_readme_blocks.py",
    "tests/reliability/test_crash_ledger.py",
    "tests/providers/test_bad_answers.py",
    "tests/store/test_contract.py",
    "tests/intake/test_poller.py",
}
"""Long modules with no fixture wider than a test: their tests are spread over the workers."""

LONGEST_FIRST = (
    "tests/deploy/test_container.py",
    "tests/reliability/test_crash_ledger.py",
    "tests/test_readme_blocks.py",
    "tests/service/test_openapi_fuzz.py",
    "tests/reliability/test_pg_outage.py",
    "tests/deploy/test_kubernetes.py",
    "tests/console/test_layout.py",
    "tests/console/test_browser.py",
    "tests/deploy/test_package.py",
    "tests/service/test_preflight.py",
)
"""Handed out first (``--no-loadscope-reorder``), so that no long module starts last and runs
alone at the end; the order of the rest is the collection's. From the slowest tests that
``scripts/check`` lists: a module missing here costs only balance."""


def work_unit(nodeid: str) -> str:
    """A test's unit of work under parallel workers: its module, its group, or itself."""
    module = nodeid.split("::", 1)[0]
    if module in APART:
        return nodeid
    return SERIAL_GROUPS.get(module, module)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a parallel worker, the ``LONGEST_FIRST`` modules go first (the order the controller
    hands the work units out in, with ``--no-loadscope-reorder``)."""
    if not hasattr(config, "workerinput"):
        return
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """``--dist loadscope`` with jobhook's work units (``work_unit``) instead of modules alone.

        A module's fixtures (a started service, a built wheel or image, a browser) are made once,
        as in a serial run; the modules of a ``SERIAL_GROUPS`` group run one after the other on
        one worker, and the tests of an ``APART`` module each on whichever worker is free.
        (pytest-xdist's own ``xdist_group`` marks rename test ids in a way pytest 9 ignores.)
        """
        if config.getvalue("dist") != "loadscope":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class WorkUnits(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return work_unit(nodeid)

        return WorkUnits(config, log)


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
def _loggers_of_this_test() -> Iterator[None]:
    """Every test's module loggers follow the logging configuration in force in that test, and
    none leaves its levels or handlers to the next.

    ``configure_logging`` sets the root logger's level: a test that configured ``debug`` would
    otherwise make every later test on its worker log at DEBUG, where an SDK's request log (the
    signed headers botocore writes) reaches the captured output the secret scan reads.
    """
    forget_cached_loggers()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    root.handlers[:] = handlers
    if root.level != level:
        root.setLevel(level)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        # Only where it changed: each setLevel clears every logger's cache.
        if isinstance(logger, logging.Logger) and logger.level != levels.get(name, logging.NOTSET):
            logger.setLevel(levels.get(name, logging.NOTSET))


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
