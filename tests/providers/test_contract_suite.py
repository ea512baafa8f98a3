"""Every built-in provider passes the shared contract suite against its simulator.

A provider joins by one line in ``DRIVERS``: its name (the test id) and a function that opens
its simulator driver (a context manager yielding a ``SimulatorDriver``; one simulator serves
all the tests of its provider, from a thread: ``tests.providers.simdriver.served_in_thread``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.contract_suite import ProviderContract
from tests.providers.clouddrivers import azure_driver, google_driver, textract_driver
from tests.providers.configs import generic_for
from tests.providers.platformdrivers import (
    landingai_driver,
    landingai_v2_driver,
    llamaparse_driver,
    mistral_driver,
    unstructured_driver,
)
from tests.providers.simdriver import sim_driver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

    from receiver.providers.contract_suite import SimulatorDriver

    Opener = Callable[[], AbstractContextManager[SimulatorDriver]]

SUCCEEDED = frozenset({State.SUCCEEDED})
NONE: frozenset[State] = frozenset()

DRIVERS: dict[str, Opener] = {
    "reducto": lambda: sim_driver("reducto", get_provider("reducto")),
    "docurift": lambda: sim_driver("docurift", get_provider("docurift"), job_word="/data/status",
                                   webhook_word="/type", webhook_metadata=SUCCEEDED),
    "knowhere": lambda: sim_driver("knowhere", get_provider("knowhere"), webhook_metadata=NONE),
    "docextract": lambda: sim_driver("docextract", get_provider("docextract"),
                                     webhook_word="/data/status", webhook_metadata=NONE),
    "generic": lambda: sim_driver("knowhere", generic_for("knowhere"), webhook_metadata=NONE),
    "generic-as-reducto": lambda: sim_driver("reducto", generic_for("reducto")),
    "textract": textract_driver,
    "azure-docintel": azure_driver,
    "google-docai": google_driver,
    "docling": lambda: sim_driver("docling", get_provider("docling"), job_word="/task_status",
                                  webhook_word="/progress/kind", webhook_metadata=NONE),
    "unstructured": unstructured_driver,
    "landingai": landingai_driver,
    "landingai-v2": landingai_v2_driver,
    "mistral": mistral_driver,
    "llamaparse": llamaparse_driver,
}  # fmt: skip


@pytest.fixture(scope="module", params=list(DRIVERS))
def served(request: pytest.FixtureRequest) -> Iterator[SimulatorDriver]:
    with DRIVERS[request.param]() as driver:
        yield driver


class TestBuiltinProviders(ProviderContract):
    @pytest.fixture
    def driver(self, served: SimulatorDriver) -> SimulatorDriver:
        return served
