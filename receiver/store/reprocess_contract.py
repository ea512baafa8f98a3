"""The store's part of reprocessing at the provider (issue 21): one link per old job, claimed
before its submission so a job is sent once, even by several replicas."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.store.rows import ReprocessRow


class ReprocessContract(abc.ABC):
    """What every backend stores of a resubmission (implemented in ``store.reprocesses``)."""

    @abc.abstractmethod
    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        """Claim the right to submit a job again; False when it is being or was submitted, or
        its submission's outcome is unknown (unless ``force``). A claim left ``submitting``
        since before ``stale_before`` (its replica died) can be taken over, and so can one that
        ``failed``."""

    @abc.abstractmethod
    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        """Record a claimed submission's outcome: the new job's id, or the error (claimable
        again; with ``unknown``, the job may exist at the provider: only ``force`` claims it)."""

    @abc.abstractmethod
    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        """The reprocess link of an old job, if it was ever claimed."""

    @abc.abstractmethod
    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        """The link whose submission created ``new_job_id``, if any."""

    @abc.abstractmethod
    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        """The links of several old jobs of one source, by job id."""
