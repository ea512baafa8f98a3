"""The contract suite's drivers for the polled platforms' simulators: Unstructured, LandingAI
ADE, Mistral OCR batches and LlamaParse.

Each simulator is served from a thread (``served_in_thread``) on a clock moved by hand; a job
is made in a state by starting it as far back on that clock as the state needs, its outcome
picked by its document's name as the simulators' own tests pick it (``corrupt`` fails).
"""

from __future__ import annotations

import contextlib
import uuid
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.contract_suite import REQUIRED_STATES, SimulatorDriver
from receiver.providers.landingai import LandingAIOptions
from receiver.sim import ManualClock
from receiver.sim.landingai import AdeJob, LandingAISim
from receiver.sim.llamaparse import LlamaParseSim, ParseJob
from receiver.sim.mistral import BatchJob, MistralSim
from receiver.sim.unstructured import UnstructuredJob, UnstructuredSim
from tests.providers.simdriver import served_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from receiver.sim.polled import PolledSim

_S = TypeVar("_S", bound="PolledSim")
_D = TypeVar("_D", bound="PolledDriver")

DURATION = 1_000.0
"""Simulated seconds a job runs: far longer than any wait in the suite."""


def _ago(state: State) -> float:
    """How long before now a job in ``state`` started (queued for a tenth of its run)."""
    return {State.QUEUED: 0.0, State.RUNNING: DURATION / 2}.get(state, DURATION)


class PolledDriver(SimulatorDriver):
    """What the polled platforms' drivers share: the clock, and a throttle made of the
    simulators' own per-window budget (``PolledSim.gate``)."""

    def __init__(self, sim: PolledSim, clock: ManualClock, base_url: str) -> None:
        self.sim = sim
        self.clock = clock
        self.base_url = base_url
        self.api_key = sim.api_key
        self._saved: tuple[float, float] | None = None

    async def throttle(self, retry_after: int) -> float | None:
        # A budget of one request a ``retry_after``-second window, spent now: the next answer
        # is a 429 whose Retry-After is the window's remainder, ``retry_after``.
        self._saved = (self.sim.requests_per_minute, self.sim.rate_window)
        self.sim.requests_per_minute, self.sim.rate_window = 1, float(retry_after)
        # The driver stands in for the window's earlier request.
        self.sim._window.clear()
        self.sim._window.append(self.clock.time())
        return float(retry_after)

    async def elapse(self, seconds: float) -> None:
        self.clock.advance(seconds)
        if self._saved is not None:
            start = self.sim._window[0] if self.sim._window else 0.0
            if self.clock.time() >= start + self.sim.rate_window - 1e-6:
                self.sim.requests_per_minute, self.sim.rate_window = self._saved
                self._saved = None

    async def webhook_body(self, job_id: str) -> Any:
        return None

    def reword_webhook(self, body: Any, word: str) -> Any:
        raise AssertionError(f"{self.provider.name} sends no webhooks")


class UnstructuredDriver(PolledDriver):
    """Unstructured's platform jobs; a partial job is one with a corrupt file beside a good one."""

    states = (*REQUIRED_STATES, State.PARTIAL)
    # COMPLETED, with failed files: the failed-files answer tells it.
    job_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})

    def __init__(self, sim: UnstructuredSim, clock: ManualClock, base_url: str) -> None:
        super().__init__(sim, clock, base_url)
        self.jobs = sim.jobs
        self.provider = get_provider("unstructured")

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        names = {State.FAILED: ["corrupt.pdf"], State.PARTIAL: ["a.pdf", "corrupt.pdf"]}
        files = [(str(uuid.uuid4()), name) for name in names.get(state, ["a.pdf"])]
        job = UnstructuredJob(str(uuid.uuid4()), self.clock.time() - _ago(state), files, "hi_res")
        self.jobs[job.id] = job
        return job.id

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "status": word}


class LandingAIDriver(PolledDriver):
    """LandingAI ADE's v1 parse jobs; a partial parse is one with a failed page (``torn``)."""

    states: tuple[State, ...] = (*REQUIRED_STATES, State.PARTIAL)
    # completed, with failed pages in its metadata.
    job_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})
    api: Literal["v1", "v2"] = "v1"

    def __init__(self, sim: LandingAISim, clock: ManualClock, base_url: str) -> None:
        super().__init__(sim, clock, base_url)
        self.jobs = sim.jobs
        self.provider = get_provider(
            "landingai", table=LandingAIOptions(jobs="parse", api_version=self.api)
        )

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        name = {State.FAILED: "corrupt.pdf", State.PARTIAL: "torn.pdf",
                State.CANCELLED: "stop.pdf"}.get(state, "doc.pdf")  # fmt: skip
        job_id = f"cjob_{uuid.uuid4().hex[:20]}"
        self.jobs[job_id] = AdeJob(job_id, "parse", self.clock.time() - _ago(state), name, False,
                                   api=self.api)  # fmt: skip
        return job_id

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "status": word}


class LandingAIV2Driver(LandingAIDriver):
    """LandingAI ADE's v2 parse jobs (``client.v2.parse_jobs``): a partial parse names its failed
    pages in ``result.metadata``; a document named ``stop`` ends ``cancelled``."""

    states = (*REQUIRED_STATES, State.PARTIAL, State.CANCELLED)
    api = "v2"


class MistralDriver(PolledDriver):
    """Mistral's OCR batch jobs; a failed batch is one whose input was refused, a partial one
    has a request whose ``custom_id`` says ``corrupt``."""

    states = (*REQUIRED_STATES, State.PARTIAL)
    # SUCCESS, with failed_requests: the counts tell it.
    job_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})

    def __init__(self, sim: MistralSim, clock: ManualClock, base_url: str) -> None:
        super().__init__(sim, clock, base_url)
        self.jobs = sim.jobs
        self.provider = get_provider("mistral")

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        ids = {State.PARTIAL: ["doc-1", "corrupt-2"]}.get(state, ["doc-1"])
        requests = [{"custom_id": i, "body": {"document": {"type": "document_url",
                     "document_url": f"https://docs.example/{i}.pdf"}}} for i in ids]  # fmt: skip
        invalid = "file f-1: every line must be a JSON object with a body"
        job = BatchJob(str(uuid.uuid4()), self.clock.time() - _ago(state), ["f-1"], "/v1/ocr",
                       "mistral-ocr-latest", dict(metadata), requests,
                       invalid=invalid if state is State.FAILED else None)  # fmt: skip
        self.jobs[job.id] = job
        return job.id

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "status": word}


class LlamaParseDriver(PolledDriver):
    """LlamaParse's parse jobs; a partial job is one with a failed page (``torn``). Its webhooks
    are the simulator's (``LlamaParseSim.payload``), as a ``"json"`` configuration sends them."""

    states = (*REQUIRED_STATES, State.PARTIAL, State.CANCELLED)
    # COMPLETED, with a failed page among the pages: the expanded answer tells it.
    job_reports = MappingProxyType({State.PARTIAL: State.SUCCEEDED})
    webhook_metadata = frozenset()

    def __init__(self, sim: LlamaParseSim, clock: ManualClock, base_url: str) -> None:
        super().__init__(sim, clock, base_url)
        self.llama = sim
        self.provider = get_provider("llamaparse")

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        name = {State.FAILED: "corrupt.pdf", State.PARTIAL: "torn.pdf"}.get(state, "doc.pdf")
        job = ParseJob(str(uuid.uuid4()), self.clock.time() - _ago(state), name, "fast",
                       cancelled=state is State.CANCELLED)  # fmt: skip
        self.llama.jobs[job.id] = job
        return job.id

    async def webhook_body(self, job_id: str) -> Any:
        return self.llama.payload(self.llama.jobs[job_id])

    def reword_job(self, body: Any, word: str) -> Any:
        return {**body, "job": {**body["job"], "status": word}}

    def reword_webhook(self, body: Any, word: str) -> Any:
        return {**body, "event_type": word}


@contextlib.contextmanager
def _polled_driver(
    name: str, make_sim: Callable[..., _S], make_driver: Callable[[_S, ManualClock, str], _D]
) -> Iterator[_D]:
    """A polled platform's simulator on its manual clock, served on loopback, and its driver."""
    clock = ManualClock()
    sim = make_sim(api_key=f"contract-{name}-key", duration=DURATION, clock=clock.time)
    with served_in_thread(sim.app()) as url:
        sim.public_url = url
        yield make_driver(sim, clock, url)


def unstructured_driver() -> contextlib.AbstractContextManager[UnstructuredDriver]:
    return _polled_driver("unstructured", UnstructuredSim, UnstructuredDriver)


def landingai_driver() -> contextlib.AbstractContextManager[LandingAIDriver]:
    return _polled_driver("landingai", LandingAISim, LandingAIDriver)


def landingai_v2_driver() -> contextlib.AbstractContextManager[LandingAIV2Driver]:
    return _polled_driver("landingai", LandingAISim, LandingAIV2Driver)


def mistral_driver() -> contextlib.AbstractContextManager[MistralDriver]:
    return _polled_driver("mistral", MistralSim, MistralDriver)


def llamaparse_driver() -> contextlib.AbstractContextManager[LlamaParseDriver]:
    return _polled_driver("llamaparse", LlamaParseSim, LlamaParseDriver)
