"""Simulated jobs: each walks through its provider's status words on a timeline."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.sim.clock import Clock

Outcome = Literal["succeeded", "failed"]
ResultMode = Literal["inline", "url"]
WebhookMode = Literal["svix", "direct", "none"]
"""How a job's webhooks go: Svix-signed, unsigned ("direct", Reducto's other mode), or none."""


@dataclass(frozen=True, slots=True)
class Phase:
    """One status word, entered at ``start`` (a fraction of the job's duration)."""

    word: str
    state: str
    start: float
    success_only: bool = False

    @property
    def terminal(self) -> bool:
        return self.state not in ("queued", "running")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A job as seen at one instant: its phase and how far along it is."""

    index: int
    phase: Phase
    progress: float
    phase_progress: float
    entered_at: float


@dataclass(eq=False, slots=True)
class Job:
    """One simulated job; its status is a pure function of the clock."""

    id: str
    number: int
    created: float
    duration: float
    wall_duration: float
    pages: int
    outcome: Outcome
    result: ResultMode
    result_bytes: int
    metadata: dict[str, Any]
    phases: tuple[Phase, ...]
    announced: int = 0
    error_code: str | None = None
    """What a failed job's error object says (one of its provider's documented codes)."""
    kind: str = ""
    """What was asked of the provider (Reducto: Parse, Extract, Split, Pipeline)."""
    webhook_url: str | None = None
    """Where this job's webhooks go, when its submission named a URL (else the simulator's)."""
    webhook_mode: WebhookMode = "svix"
    document: str | None = None
    """The document a submission named (its URL), when one did."""
    webhook_headers: dict[str, str] = field(default_factory=dict)
    """Headers its submission asked the (unsigned) callbacks to carry."""
    result_fetched_at: float | None = None
    """When its result was first fetched at the shape's ``result_route`` (single-use results)."""
    result_fetches: int = 0

    @property
    def blob_id(self) -> str:
        return f"res_{self.number:06d}_{self.id[-8:]}"

    @property
    def finishes_at(self) -> float:
        return self.created + self.wall_duration

    def entered_at(self, index: int) -> float:
        return self.created + self.phases[index].start * self.wall_duration

    def index_at(self, now: float) -> int:
        index = 0
        for i in range(1, len(self.phases)):
            if self.entered_at(i) <= now:
                index = i
        return index

    def snapshot(self, now: float) -> Snapshot:
        index = self.index_at(now)
        phase = self.phases[index]
        if phase.terminal or self.wall_duration <= 0:
            return Snapshot(index, phase, 1.0, 1.0, self.entered_at(index))
        progress = min(max((now - self.created) / self.wall_duration, 0.0), 1.0)
        end = self.phases[index + 1].start
        span = end - phase.start
        within = (progress - phase.start) / span if span > 0 else 1.0
        return Snapshot(index, phase, progress, min(max(within, 0.0), 1.0), self.entered_at(index))


@dataclass(slots=True)
class JobBook:
    """Every job of one simulator, in creation order, plus the schedule of their transitions."""

    clock: Clock
    new_id: Callable[[random.Random], str]
    phases_for: Callable[[Outcome], tuple[Phase, ...]]
    seed: int = 0
    _rng: random.Random = field(init=False)
    _jobs: dict[str, Job] = field(init=False, default_factory=dict)
    _blobs: dict[str, Job] = field(init=False, default_factory=dict)
    _due: list[tuple[float, int, Job]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def create(
        self,
        *,
        count: int,
        pages: int,
        outcome: Outcome,
        result: ResultMode,
        duration: float,
        speed: float,
        result_bytes: int,
        metadata: dict[str, Any],
        error_code: str | None = None,
        kind: str = "",
        webhook_url: str | None = None,
        webhook_mode: WebhookMode = "svix",
        document: str | None = None,
        webhook_headers: dict[str, str] | None = None,
    ) -> list[Job]:
        """Start ``count`` identical jobs now; their ids come from the seeded generator."""
        now = self.clock.time()
        made = []
        for _ in range(count):
            job_id = self.new_id(self._rng)
            while job_id in self._jobs:
                job_id = self.new_id(self._rng)
            job = Job(
                job_id,
                len(self._jobs),
                now,
                duration,
                duration / speed,
                pages,
                outcome,
                result,
                result_bytes,
                dict(metadata),
                self.phases_for(outcome),
                error_code=error_code if outcome == "failed" else None,
                kind=kind,
                webhook_url=webhook_url,
                webhook_mode=webhook_mode,
                document=document,
                webhook_headers=dict(webhook_headers or {}),
            )
            self._jobs[job.id] = job
            self._blobs[job.blob_id] = job
            heapq.heappush(self._due, (job.entered_at(1), job.number, job))
            made.append(job)
        return made

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def cancel(self, job: Job, phase: Phase) -> bool:
        """End ``job`` now in ``phase`` (its provider's cancelled word); False when it has ended."""
        now = self.clock.time()
        index = job.index_at(now)
        if job.phases[index].terminal:
            return False
        elapsed = (now - job.created) / job.wall_duration if job.wall_duration > 0 else 0.0
        start = max(job.phases[index].start, min(elapsed, 1.0))
        job.phases = (*job.phases[: index + 1], Phase(phase.word, phase.state, start))
        heapq.heappush(self._due, (job.entered_at(index + 1), job.number, job))
        return True

    def by_blob(self, blob_id: str) -> Job | None:
        return self._blobs.get(blob_id)

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    def __len__(self) -> int:
        return len(self._jobs)

    def advance(self, now: float) -> list[tuple[Job, int]]:
        """The phases entered since the last call (``job.announced`` moves), oldest first."""
        entered: list[tuple[float, int, Job, int]] = []
        while self._due and self._due[0][0] <= now:
            _, _, job = heapq.heappop(self._due)
            current = job.index_at(now)
            for index in range(job.announced + 1, current + 1):
                entered.append((job.entered_at(index), job.number, job, index))
            job.announced = max(job.announced, current)
            if current + 1 < len(job.phases):
                heapq.heappush(self._due, (job.entered_at(current + 1), job.number, job))
        entered.sort(key=lambda item: (item[0], item[1], item[3]))
        return [(job, index) for _, _, job, index in entered]
