"""The leader step runs with CPython's cyclic garbage collector paused (it allocates a big
group's assignment and makes no cycles), and leaves the collector as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import ClassVar

import pytest

from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol
from streamtasks.membership.classic.leader import lead
from streamtasks.protocol.classic_group import JoinGroupMember
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription


class _Watching:
    """Records whether the collector ran while it assigned; fails on demand."""

    name: ClassVar[str] = "watching"
    version: ClassVar[int] = 0

    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail
        self.collector_enabled: list[bool] = []

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        self.collector_enabled.append(gc.isenabled())
        if self.fail is not None:
            raise self.fail
        return GroupAssignment(members={m: () for m in group.members})


MEMBERS = [
    JoinGroupMember(
        member_id="m1",
        group_instance_id=None,
        metadata=encode_subscription(ConsumerProtocolSubscription(topics=("t",), user_data=None)),
    )
]


@pytest.fixture
def collector_state() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:  # pragma: no cover - the test run has it enabled
        gc.disable()


@pytest.mark.usefixtures("collector_state")
def test_the_collector_is_paused_for_the_step_and_runs_again_after() -> None:
    gc.enable()
    assignor = _Watching()
    lead(MEMBERS, assignor=assignor, partitions_per_topic={"t": 1})
    assert assignor.collector_enabled == [False]
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_state")
def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    lead(MEMBERS, assignor=_Watching(), partitions_per_topic={"t": 1})
    assert not gc.isenabled()


@pytest.mark.usefixtures("collector_state")
def test_the_collector_runs_again_when_the_step_fails() -> None:
    gc.enable()
    with pytest.raises(KeyboardInterrupt):
        lead(MEMBERS, assignor=_Watching(fail=KeyboardInterrupt()), partitions_per_topic={"t": 1})
    assert gc.isenabled()
