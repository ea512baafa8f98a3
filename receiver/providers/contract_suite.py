"""The shared contract suite: what every provider adapter proves against a simulator of its API.

A provider package's own tests subclass ``ProviderContract`` and give it a ``driver`` fixture
that yields a ``SimulatorDriver`` (a running simulator of that provider, and the adapter under
test); pytest then collects the inherited tests, as saq's backends share one test class::

    import pytest
    from receiver.providers.contract_suite import ProviderContract

    class TestAcme(ProviderContract):
        @pytest.fixture
        async def driver(self):
            async with running_acme_simulator() as sim:
                yield AcmeDriver(sim)

The suite talks to the simulator over HTTP through jobhook's own ``JobAPI`` (or the provider's
``job_api_class``), so it checks the adapter as the service runs it. It needs pytest (and an
asyncio plugin in ``auto`` mode), which is why jobhook itself never imports it.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import hashlib
import json
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
import pytest

from receiver.errors import PayloadError, ProviderError
from receiver.models import State
from receiver.providers.jobapi import JobAPI, JobNotFoundError
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping
    from pathlib import Path

    from receiver.models import ResultRef
    from receiver.providers.base import Provider

__all__ = [
    "MALFORMED",
    "REQUIRED_STATES",
    "ProviderContract",
    "SimulatorDriver",
    "mutations",
    "required_states",
]

REQUIRED_STATES = (State.QUEUED, State.RUNNING, State.SUCCEEDED, State.FAILED)
"""The states a provider's job API reports, so every driver can make a job in each; ``queued``
only where a status word maps to it (Textract's jobs are ``IN_PROGRESS`` from the start)."""
UNKNOWN_JOB = "job_contract_never_made"
MALFORMED: tuple[Any, ...] = (None, [], "x", 42, True, {}, {"data": "x"}, {"data": {}}, [{}])
"""Bodies that name no job in any provider's format."""
ODD_VALUES: tuple[Any, ...] = (None, True, -1, 1.5, "", "x", [], {}, [None], {"x": None})
MAX_MUTATIONS = 2_000
UNKNOWN_WORD = "Teleporting-Contract"


class SimulatorDriver(abc.ABC):
    """A running simulator of one provider, and the adapter under test, as the suite drives them.

    ``states`` lists what the simulator can make a job report: at least ``REQUIRED_STATES``,
    plus ``partial``, ``cancelled`` or ``expired`` where the provider has them.
    """

    provider: Provider
    """The adapter under test, as ``get_provider`` builds it for a source."""
    base_url: str
    """The simulator's job API, as a source's ``api_base_url`` would name it."""
    api_key: str
    """A key the simulator accepts."""
    states: tuple[State, ...] = REQUIRED_STATES
    webhook_metadata: frozenset[State] = frozenset({State.SUCCEEDED, State.FAILED})
    """The states whose webhook carries back the metadata the job was submitted with."""
    job_reports: Mapping[State, State] = MappingProxyType({})
    """Job states whose status word in the job API names another state (Google's partial
    batch is ``SUCCEEDED``: its documents' statuses tell it)."""
    webhook_reports: Mapping[State, State] = MappingProxyType({})
    """Job states whose webhook names another state (Textract's SNS message says SUCCEEDED
    for a partial success: only the job API tells it)."""
    unknown_job: str = UNKNOWN_JOB
    """A job id in the provider's form (``model:result``, ``project:location:operation``)
    that names no job of the simulator."""

    @abc.abstractmethod
    async def job_in(self, state: State, *, metadata: dict[str, Any]) -> str:
        """A new job that the simulator reports in ``state`` from now on; its id."""

    @abc.abstractmethod
    async def webhook_body(self, job_id: str) -> Any:
        """The decoded body of the webhook (or callback) the provider sends about the job's
        current state; None when it sends none for that state."""

    @abc.abstractmethod
    async def throttle(self, retry_after: int) -> float | None:
        """Make the job API's next answer a throttle (a 429 with ``Retry-After: retry_after``
        where the simulator can choose); the wait it announces (``retry_after``, or the
        provider's fixed one), or None when the provider announces none (the adapter then
        chooses its own)."""

    async def elapse(self, seconds: float) -> None:  # noqa: B027 (optional: most need nothing)
        """Move the simulator's clock as the budget's clock moved (the adapter waited
        ``seconds``); a simulator whose throttles last one answer needs nothing."""

    @abc.abstractmethod
    def reword_job(self, body: Any, word: str) -> Any:
        """A job API answer with its status word replaced by ``word``."""

    @abc.abstractmethod
    def reword_webhook(self, body: Any, word: str) -> Any:
        """A webhook body with its status word replaced by ``word``."""


class _Clock:
    """The rate budget's clock in the suite: sleeping moves it (and the simulator's, through
    ``SimulatorDriver.elapse``), so no test waits for real."""

    def __init__(self, driver: SimulatorDriver) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []
        self._driver = driver

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await self._driver.elapse(seconds)


def required_states(provider: Provider) -> tuple[State, ...]:
    """``REQUIRED_STATES`` less ``queued`` when no status word of ``provider`` maps to it."""
    words = set(provider.status_words.values())
    return tuple(s for s in REQUIRED_STATES if s is not State.QUEUED or s in words)


def mutations(body: Any, depth: int = 3) -> Iterator[Any]:
    """Copies of ``body`` each with one member removed or replaced by an odd value."""
    count = 0
    for path in _paths(body, depth):
        for value in (_REMOVE, *ODD_VALUES):
            mutated = copy.deepcopy(body)
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            if value is _REMOVE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            yield mutated
            count += 1
            if count >= MAX_MUTATIONS:
                return


_REMOVE = object()


def _paths(body: Any, depth: int) -> Iterator[tuple[Any, ...]]:
    if depth == 0:
        return
    items: list[tuple[Any, Any]] = []
    if isinstance(body, dict):
        items = list(body.items())
    elif isinstance(body, list):
        items = list(enumerate(body[:3]))
    for key, value in items:
        yield (key,)
        for rest in _paths(value, depth - 1):
            yield (key, *rest)


class ProviderContract:
    """The contract tests; a subclass supplies the ``driver`` fixture (a ``SimulatorDriver``)."""

    source: ClassVar[str] = "contract"
    metadata: ClassVar[dict[str, Any]] = {"contract": "m-1", "batch": 7}

    @pytest.fixture
    def clock(self, driver: SimulatorDriver) -> _Clock:
        return _Clock(driver)

    @pytest.fixture
    async def api(self, driver: SimulatorDriver, clock: _Clock) -> AsyncIterator[JobAPI]:
        """The job API the service would build for a source of this provider."""
        limiter = RateLimiter(6_000, name=self.source, clock=clock.time, sleep=clock.sleep)
        factory = driver.provider.job_api_class or JobAPI
        async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
            api: JobAPI = factory(
                source=self.source,
                provider=driver.provider,
                base_url=driver.base_url,
                api_key=Secret(driver.api_key),
                client=client,
                limiter=limiter,
            )
            yield api

    async def fetch_result(self, api: JobAPI, job_id: str, ref: ResultRef, dest: Path) -> bytes:
        """The result's bytes as jobhook would store them: assembled by the job API
        (``ref.assemble``: ``JobAPI.write_result`` into ``dest``, its sha256 checked), inline
        JSON, or the URL's body (with the API key when the job API serves the result itself,
        as the resolver sends it). A provider whose results need more overrides this.
        """
        if ref.assemble is not None:
            sha256, size = await api.write_result(job_id, ref, dest)
            data = await asyncio.to_thread(dest.read_bytes)
            assert (hashlib.sha256(data).hexdigest(), len(data)) == (sha256, size)
            return data
        if ref.url is None:
            return json.dumps(ref.inline).encode()
        async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
            response = await client.get(ref.url, headers=api.result_headers(ref.url))
        assert response.status_code == 200, f"result URL answered {response.status_code}"
        return response.content

    def test_the_driver_covers_the_required_states(self, driver: SimulatorDriver) -> None:
        missing = [s.value for s in required_states(driver.provider) if s not in driver.states]
        assert not missing, f"the simulator driver cannot make jobs that are {missing}"

    def test_status_words_cover_every_terminal_state_reported(
        self, driver: SimulatorDriver
    ) -> None:
        mapped = set(driver.provider.status_words.values())
        said = {driver.job_reports.get(s, s) for s in driver.states if s.terminal}
        assert said <= mapped, f"no status word means {sorted(s.value for s in said - mapped)}"

    async def test_each_state_of_the_job_api_parses(
        self, driver: SimulatorDriver, api: JobAPI
    ) -> None:
        for state in driver.states:
            job_id = await driver.job_in(state, metadata=self.metadata)
            status = await api.get_job(job_id)
            assert status.state is state, f"a {state.value} job parsed as {status.state.value}"
            words = driver.provider.status_words
            said = driver.job_reports.get(state, state)
            assert words.get(status.provider_status) is said, status.provider_status
            if state in (State.SUCCEEDED, State.PARTIAL):
                assert status.result is not None, f"a {state.value} job has no result reference"
            if state is State.FAILED:
                assert status.error or status.error_code, "a failed job says nothing of why"
            if not state.terminal:
                assert status.result is None, f"a {state.value} job has a result"

    async def test_a_webhook_parses_to_its_job_state_and_metadata(
        self, driver: SimulatorDriver
    ) -> None:
        if not driver.provider.webhooks:
            await self._skip_without_webhooks(driver)
        seen = 0
        for state in driver.states:
            job_id = await driver.job_in(state, metadata=self.metadata)
            body = await driver.webhook_body(job_id)
            if body is None:
                continue
            seen += 1
            if driver.provider.unsigned_only:  # a hint: it names the job, and is never believed
                assert body.get(driver.provider.hint_job_field or "") == job_id
                with pytest.raises(PayloadError):
                    driver.provider.parse_webhook(body, source=self.source, message_id="msg_c1")
                continue
            event = driver.provider.parse_webhook(body, source=self.source, message_id="msg_c1")
            assert (event.source, event.job_id) == (self.source, job_id)
            said = driver.webhook_reports.get(state, state)
            assert event.state is said, f"a {state.value} webhook parsed as {event.state.value}"
            assert (event.message_id, event.via) == ("msg_c1", "webhook")
            assert driver.provider.status_words.get(event.provider_status) is said
            if state in driver.webhook_metadata:
                assert event.metadata == self.metadata, f"a {state.value} webhook's metadata"
        assert seen, "the simulator sent no webhook for any state"

    async def _skip_without_webhooks(self, driver: SimulatorDriver) -> None:
        """The rule for a provider whose ``webhooks`` is False: its webhook cases are skipped,
        once its simulator is seen to send none in any state (else the flag hides a webhook
        jobhook would refuse)."""
        for state in driver.states:
            job_id = await driver.job_in(state, metadata=self.metadata)
            body = await driver.webhook_body(job_id)
            assert body is None, f"webhooks is False, yet a {state.value} job sends {body!r}"
        pytest.skip(f"{driver.provider.name} sends no webhooks: its jobs are polled")

    async def test_an_unknown_status_word_is_kept_and_queued(
        self, driver: SimulatorDriver, api: JobAPI
    ) -> None:
        job_id = await driver.job_in(State.SUCCEEDED, metadata=self.metadata)
        body = driver.reword_job(await api.job_body(job_id), UNKNOWN_WORD)
        status = driver.provider.parse_job(body, source=self.source, job_id=job_id)
        assert (status.state, status.provider_status) == (State.QUEUED, UNKNOWN_WORD)
        assert status.result is None
        if not driver.provider.webhooks or driver.provider.unsigned_only:
            return  # no webhook, or only hints whose words are never read
        webhook = await driver.webhook_body(job_id)
        assert webhook is not None, "the simulator sent no webhook for a succeeded job"
        event = driver.provider.parse_webhook(
            driver.reword_webhook(webhook, UNKNOWN_WORD), source=self.source, message_id="m"
        )
        assert (event.job_id, event.state, event.provider_status) == (
            job_id,
            State.QUEUED,
            UNKNOWN_WORD,
        )

    async def test_a_result_reference_is_fetchable(
        self, driver: SimulatorDriver, api: JobAPI, tmp_path: Path
    ) -> None:
        job_id = await driver.job_in(State.SUCCEEDED, metadata=self.metadata)
        status = await api.get_job(job_id, urgent=True)
        ref = status.result
        assert ref is not None
        pointed = (ref.url, ref.inline, ref.assemble)
        assert any(p is not None for p in pointed), "the reference points at nothing"
        data = await self.fetch_result(api, job_id, ref, tmp_path / "result")
        assert data, "the result is empty"
        if ref.sha256 is not None:
            assert hashlib.sha256(data).hexdigest() == ref.sha256

    async def test_reading_fields_from_a_damaged_result_never_raises(
        self, driver: SimulatorDriver, api: JobAPI, tmp_path: Path
    ) -> None:
        job_id = await driver.job_in(State.SUCCEEDED, metadata=self.metadata)
        ref = (await api.get_job(job_id, urgent=True)).result
        assert ref is not None
        try:
            result = json.loads(await self.fetch_result(api, job_id, ref, tmp_path / "result"))
        except ValueError:
            pytest.skip(f"{driver.provider.name}'s result is not JSON: no fields are read from it")
        if not isinstance(result, dict):
            pytest.skip(f"{driver.provider.name}'s result is not a JSON object")
        list(driver.provider.result_fields(result))
        for damaged in mutations(result):
            if not isinstance(damaged, dict):
                continue
            try:
                list(driver.provider.result_fields(damaged))
            except Exception as exc:  # the contract: a reader never raises, whatever it holds
                pytest.fail(f"{type(exc).__name__}: {exc} reading fields of {damaged!r}"[:600])

    async def test_an_unknown_job_is_job_not_found(
        self, driver: SimulatorDriver, api: JobAPI
    ) -> None:
        with pytest.raises(JobNotFoundError):
            await api.get_job(driver.unknown_job)

    async def test_a_429_with_retry_after_defers_the_budget(
        self, driver: SimulatorDriver, api: JobAPI, clock: _Clock
    ) -> None:
        job_id = await driver.job_in(State.RUNNING, metadata=self.metadata)
        announced = await driver.throttle(7)
        with pytest.raises(ProviderError) as caught:
            await api.get_job(job_id)
        assert not isinstance(caught.value, JobNotFoundError)
        wait = caught.value.retry_after
        if announced is not None:
            assert wait == announced, f"the throttle announced {announced}s, the error says {wait}"
        assert wait is not None, "a throttle that says nothing of when to come back"
        assert wait > 0, f"a throttle that says to come back in {wait}s"
        before = clock.now
        await api.limiter.acquire()
        # A float wait comes back through the clock's sums: a nanosecond's rounding is no early.
        assert clock.now - before >= wait - 1e-9, "the next request did not wait for Retry-After"
        assert (await api.get_job(job_id)).state is State.RUNNING

    def test_a_webhook_naming_no_job_is_a_payload_error(self, driver: SimulatorDriver) -> None:
        for body in MALFORMED:
            with pytest.raises(PayloadError) as caught:
                driver.provider.parse_webhook(body, source=self.source, message_id="m")
            assert caught.value.status_code == 400, repr(body)

    def test_a_job_answer_without_status_is_a_provider_error(self, driver: SimulatorDriver) -> None:
        for body in MALFORMED:
            with pytest.raises(ProviderError):
                driver.provider.parse_job(body, source=self.source, job_id="j1")

    async def test_damaged_webhooks_raise_only_payload_errors(
        self, driver: SimulatorDriver
    ) -> None:
        if not driver.provider.webhooks:
            await self._skip_without_webhooks(driver)
        for state in (State.SUCCEEDED, State.FAILED):
            body = await driver.webhook_body(await driver.job_in(state, metadata=self.metadata))
            for damaged in mutations(body):
                try:
                    driver.provider.parse_webhook(damaged, source=self.source, message_id="m")
                except PayloadError:
                    pass
                except Exception as exc:  # the contract: nothing else, whatever the body
                    pytest.fail(f"{type(exc).__name__}: {exc} for the webhook {damaged!r}")

    async def test_damaged_job_answers_raise_only_provider_errors(
        self, driver: SimulatorDriver, api: JobAPI
    ) -> None:
        for state in (State.SUCCEEDED, State.FAILED, State.RUNNING):
            job_id = await driver.job_in(state, metadata=self.metadata)
            body = await api.job_body(job_id)
            for damaged in mutations(body):
                try:
                    driver.provider.parse_job(damaged, source=self.source, job_id=job_id)
                except ProviderError:
                    pass
                except Exception as exc:  # the contract: nothing else, whatever the body
                    pytest.fail(f"{type(exc).__name__}: {exc} for the job answer {damaged!r}")
