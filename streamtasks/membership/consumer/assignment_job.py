"""The client-side assignment a KIP-848 member computes when the coordinator asks it to:
:class:`AssignmentJob`.

The seed KIP's two calls: PrepareAssignment (the group's subscriptions and the assignor to run),
then InstallAssignment (the assignment computed here, :mod:`.client_assignment`). The job is
the one owner of the call in flight and of how many assignments it got installed; the
:class:`~streamtasks.membership.consumer.machine.ConsumerMember` holds one and acts on what an
answer means for the member (:class:`JobAnswer`).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.common import Kernel
from streamtasks.membership.common.states import MemberState
from streamtasks.membership.consumer import phases as P
from streamtasks.membership.consumer.actions import Request, SendRequest
from streamtasks.membership.consumer.config import ConsumerMemberConfig
from streamtasks.membership.consumer.records import Api, Job
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E

__all__ = ["AssignmentJob", "JobAnswer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobAnswer:
    """What an answer to the job's call means for the member: an assignment was installed
    (its part of the new target is to be fetched now), or the coordinator is gone (``lost``:
    why; ``""``: it is not)."""

    installed: bool = False
    lost: str = ""


_NOTHING = JobAnswer()


class AssignmentJob:
    """PrepareAssignment, then InstallAssignment; at most one job at a time."""

    __slots__ = ("_config", "_installed", "_job", "_k")

    def __init__(
        self, config: ConsumerMemberConfig, kernel: Kernel[MemberState, Api, Request, SendRequest]
    ) -> None:
        self._config = config
        self._k = kernel
        self._job: Job | None = None
        self._installed = 0

    @property
    def computing(self) -> bool:
        """A PrepareAssignment or InstallAssignment of this member is in flight."""
        return self._job is not None

    @property
    def installed(self) -> int:
        """How many client-side assignments this member computed and got installed."""
        return self._installed

    def start(self, epoch: int, now_ms: int) -> None:
        """ShouldComputeAssignment: PrepareAssignment, unless a computation is under way."""
        if self._job is None:
            self._send(Api.PREPARE, P.prepare_request(self._config, epoch), epoch, now_ms)

    def dropped(self) -> None:
        """The member gave up every request in flight (or its membership): no job."""
        self._job = None

    def answered(
        self,
        resp: ConsumerGroupPrepareAssignmentResponse | ConsumerGroupInstallAssignmentResponse,
        epoch: int,
        now_ms: int,
    ) -> JobAnswer:
        """The next call for an answer, or the job's end; an answer the job no longer waits
        for (another phase, no job) changes nothing."""
        api = Api.PREPARE if isinstance(resp, ConsumerGroupPrepareAssignmentResponse) else Api.INSTALL
        if self._job is None or self._job.phase is not api:
            return _NOTHING
        self._job = None
        if resp.error is not E.NONE:
            return self._failed(api, resp.error, resp.error_message)
        if isinstance(resp, ConsumerGroupInstallAssignmentResponse):
            self._installed += 1
            return JobAnswer(installed=True)
        request = P.install_request(self._config, epoch, resp)
        if isinstance(request, str):
            self._k.report(request, None)
        else:
            self._send(Api.INSTALL, request, epoch, now_ms)
        return _NOTHING

    def _send(self, api: Api, request: Request, epoch: int, now_ms: int) -> None:
        deadline = now_ms + self._config.request_timeout_ms
        self._job = Job(phase=api, request_id=self._k.send(api, request, deadline, epoch))

    def _failed(self, api: Api, code: E, message: str | None) -> JobAnswer:
        if code in P.COORDINATOR_CODES:
            return JobAnswer(lost=f"{api.value} answered {code.name}")
        if code is not E.STALE_MEMBER_EPOCH and code is not E.UNKNOWN_MEMBER_ID:
            # STALE_MEMBER_EPOCH: retried when the next heartbeat answer asks again;
            # UNKNOWN_MEMBER_ID: no longer the member asked, nothing to do.
            self._k.report(f"{api.value} failed with {code.name}: {message or ''}".rstrip(": "), code)
        return _NOTHING
