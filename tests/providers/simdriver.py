"""The contract suite's driver for the simulators jobhook ships (``receiver.sim``)."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from typing import TYPE_CHECKING, Any

import uvicorn

from receiver.models import State
from receiver.providers.contract_suite import REQUIRED_STATES, SimulatorDriver
from receiver.providers.pointer import Pointer
from receiver.service.serving import free_port
from receiver.sim import ManualClock, Simulator, build_app

if TYPE_CHECKING:
    from collections.abc import Iterator

    from starlette.types import ASGIApp

    from receiver.providers import Provider

API_KEY = "contract-key-123"
DURATION = 100.0


class SimDriver(SimulatorDriver):
    """One of ``receiver.sim``'s providers, served on loopback, its clock moved by hand.

    ``job_words`` and ``webhook_words`` are JSON pointers to the status word in the job API's
    answer and in the webhook body.
    """

    def __init__(
        self,
        sim: Simulator,
        clock: ManualClock,
        base_url: str,
        provider: Provider,
        *,
        job_word: str,
        webhook_word: str,
        webhook_metadata: frozenset[State],
    ) -> None:
        self.sim = sim
        self.clock = clock
        self.base_url = base_url
        self.provider = provider
        self.api_key = API_KEY
        self._job_word = job_word
        self._webhook_word = webhook_word
        self.webhook_metadata = webhook_metadata
        cancellable = (State.CANCELLED,) if sim.shape.cancelled is not None else ()
        self.states = (*REQUIRED_STATES, *cancellable)

    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        outcome = "failed" if state is State.FAILED else "succeeded"
        [job_id] = self.sim.create_jobs(outcome=outcome, duration=DURATION, metadata=metadata)
        job = self.sim.jobs.get(job_id)
        assert job is not None
        if state is State.CANCELLED:
            assert self.sim.shape.cancelled is not None
            self.clock.advance(DURATION * 0.2)
            assert self.sim.jobs.cancel(job, self.sim.shape.cancelled)
            self.clock.advance(0.001)
            return job_id
        index = next(i for i, p in enumerate(job.phases) if p.state == state.value)
        self.clock.advance(max(job.entered_at(index) - self.clock.time(), 0.0) + 0.001)
        return job_id

    async def webhook_body(self, job_id: str) -> Any:
        job = self.sim.jobs.get(job_id)
        assert job is not None
        snap = job.snapshot(self.clock.time())
        if snap.index == 0 or not self.sim.shape.sends_webhook(job, snap.index):
            return None
        # What the simulator's sender posts on entering the phase, decoded.
        return self.sim.shape.webhook_body(job, snap.phase, snap.entered_at, "msg_contract")

    async def throttle(self, retry_after: int) -> float | None:
        self.sim.inject(status=429, retry_after=retry_after)
        return retry_after

    def reword_job(self, body: Any, word: str) -> Any:
        return _reword(body, self._job_word, word)

    def reword_webhook(self, body: Any, word: str) -> Any:
        return _reword(body, self._webhook_word, word)


def _reword(body: Any, pointer: str, word: str) -> Any:
    parts = Pointer.parse(pointer).tokens
    copied = copy.deepcopy(body)
    parent = copied
    for key in parts[:-1]:
        parent = parent[key]
    parent[parts[-1]] = word
    return copied


@contextlib.contextmanager
def served_in_thread(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` on loopback from a thread of its own, so one server lasts a whole module
    of tests (each test has its own event loop); yields its base URL."""
    port = free_port("127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                            access_log=False, lifespan="on", loop="asyncio")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"sim-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the simulator on port {port} did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


@contextlib.contextmanager
def sim_driver(
    name: str,
    provider: Provider,
    *,
    job_word: str = "/status",
    webhook_word: str = "/status",
    webhook_metadata: frozenset[State] = frozenset({State.SUCCEEDED, State.FAILED}),
) -> Iterator[SimDriver]:
    """The ``name`` simulator served on loopback, driven for the contract suite."""
    clock = ManualClock()
    sim = Simulator(name, api_key=API_KEY, duration=DURATION, clock=clock, result_bytes=4096)
    with served_in_thread(build_app(sim)) as url:
        yield SimDriver(sim, clock, url, provider, job_word=job_word, webhook_word=webhook_word,
                        webhook_metadata=webhook_metadata)  # fmt: skip
