"""The client-side assignment job: one PrepareAssignment, then InstallAssignment, at a time."""

from __future__ import annotations

from assignors.partition.range import RangeAssignor
from streamtasks.membership.common import ErrorReported, Kernel
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.consumer import ConsumerMemberConfig
from streamtasks.membership.consumer.actions import Request, SendRequest
from streamtasks.membership.consumer.assignment_job import AssignmentJob, JobAnswer
from streamtasks.membership.consumer.records import ANSWERS, Api
from streamtasks.membership.consumer.transitions import TABLE
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E

CONFIG = ConsumerMemberConfig(
    group_id="g", member_id="m", topics=("foo",), client_assignors=(RangeAssignor(),)
)


def _job() -> tuple[Kernel[S, Api, Request, SendRequest], AssignmentJob]:
    k: Kernel[S, Api, Request, SendRequest] = Kernel(TABLE, S.STABLE, SendRequest, ANSWERS)
    return k, AssignmentJob(CONFIG, k)


def _sent(k: Kernel[S, Api, Request, SendRequest]) -> list[object]:
    return [a.request for a in k.flush() if isinstance(a, SendRequest)]


def test_prepare_then_install_then_done() -> None:
    k, job = _job()
    job.start(3, 0)
    job.start(3, 0)  # under way: no second
    (prepare,) = _sent(k)
    assert isinstance(prepare, ConsumerGroupPrepareAssignmentRequest)
    assert prepare.member_epoch == 3
    ready = ConsumerGroupPrepareAssignmentResponse(error=E.NONE, group_epoch=4, assignor_name="range")
    assert job.answered(ready, 3, 10) == JobAnswer()
    (install,) = _sent(k)
    assert isinstance(install, ConsumerGroupInstallAssignmentRequest)
    assert job.computing
    assert job.answered(ready, 3, 10) == JobAnswer()  # not the phase waited for: nothing
    assert job.answered(ConsumerGroupInstallAssignmentResponse(error=E.NONE), 3, 20) == JobAnswer(
        installed=True
    )
    assert (job.computing, job.installed) == (False, 1)


def test_failures_lose_the_coordinator_wait_or_are_reported() -> None:
    k, job = _job()
    for code, answer, reported in (
        (E.NOT_COORDINATOR, JobAnswer(lost="ConsumerGroupPrepareAssignment answered NOT_COORDINATOR"), False),
        (E.STALE_MEMBER_EPOCH, JobAnswer(), False),
        (E.UNKNOWN_MEMBER_ID, JobAnswer(), False),
        (E.INVALID_REQUEST, JobAnswer(), True),
    ):
        job.start(1, 0)
        k.flush()
        assert job.answered(ConsumerGroupPrepareAssignmentResponse(error=code), 1, 5) == answer
        assert not job.computing
        assert any(isinstance(a, ErrorReported) for a in k.flush()) is reported


def test_an_unknown_assignor_is_reported_and_nothing_installed() -> None:
    k, job = _job()
    job.start(1, 0)
    k.flush()
    assert (
        job.answered(ConsumerGroupPrepareAssignmentResponse(error=E.NONE, assignor_name="nope"), 1, 5)
        == JobAnswer()
    )
    (report,) = k.flush()
    assert isinstance(report, ErrorReported)
    assert "nope" in report.reason
    assert (job.computing, job.installed) == (False, 0)
