"""A caught-up warm-up taking over its task on KIP-848, with each process's task set driven by
the assignments its real member (:class:`ConsumerMember`, the streams assignor client-side,
against the real coordinator, no network) hands its app: both owners recycle, nothing is closed
or reopened and nothing is restored.

The old owner revokes under the metadata of its ending epoch, which still names the revoked
tasks active there (KIP-848: the assignment metadata is final for an epoch); the next epoch's
metadata names them standbys. The new owner is told first that the tasks are active there while
their partitions are still owned by the old owner, then gets the partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path

from streamtasks.app import AppEvent, TaskClosed, TaskCreated, TaskRecycled
from streamtasks.app.tasks import TaskSet
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.membership.consumer import AssignorMetadataChanged
from streamtasks.protocol.userdata import AssignmentInfo, decode_assignment_info
from streamtasks.state import INT64, STRING, StateDirectory
from tests.membership.consumer.helpers import Cluster, streams_member
from topology import TopicPartition, TopologyBuilder
from topology.ids import TaskId

CHANGELOG = "app-counts-changelog"
WRITTEN = 5  # changelog records of each task, in every copy of its store


def count(*_: object) -> None:
    raise AssertionError("nothing is processed here")


class Process:
    """One app process's task set, fed its member's assignment changes in order."""

    def __init__(self, c: Cluster, name: str, root: Path) -> None:
        self.node = c.nodes[name]
        self.seen = 0
        self.events: list[AppEvent] = []
        self.directory = StateDirectory(root / name, "app")
        self.tasks = TaskSet(
            c.topology,
            {0: count},
            directory=self.directory,
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
        )
        self.tasks.set_partition_counts(c.topology.partition_counts({"foo": 4}))

    def apply(self) -> list[AppEvent]:
        """Reconcile every assignment change the member made since the last call, as the app
        does; returns the task events."""
        before = len(self.events)
        changes = [a for a in self.node.actions[self.seen :] if isinstance(a, AssignmentChanged)]
        self.seen = len(self.node.actions)
        for change in changes:
            info = decode_assignment_info(change.user_data) if change.user_data else AssignmentInfo()
            asyncio.run(self.tasks.reconcile(change.owned, info, ends, lost=change.lost, keep_revoked=True))
        return self.events[before:]

    def write_state(self) -> None:
        """Every task holds the changelog's records (actives restored, standbys caught up)."""
        for task in self.tasks.tasks.values():
            for tp in task.changelog_partitions:
                rows = [(f"k{i}".encode(), i.to_bytes(8, "big")) for i in range(WRITTEN)]
                task.apply_changelog(tp, rows, WRITTEN)
            if task.is_active:
                assert task.restore_done()
                task.restore.finish(now_ms=0)  # the restorer's finish_restores: it runs

    def close(self) -> None:
        asyncio.run(self.tasks.close_all(clean=True))


async def ends(partitions: Iterable[TopicPartition]) -> Mapping[TopicPartition, int]:
    return {tp: WRITTEN for tp in partitions}


class StreamsCluster(Cluster):
    def __init__(self) -> None:
        super().__init__()
        builder = TopologyBuilder("app")
        builder.stream("foo").store("counts")
        self.topology = builder.build()


def kinds(events: list[AppEvent], kind: type) -> list[AppEvent]:
    return [e for e in events if isinstance(e, kind)]


def test_a_warmup_hand_over_recycles_on_both_owners(tmp_path: Path) -> None:
    c = StreamsCluster()
    streams_member(c, "a", c.topology, {})
    c.run(3_000)
    streams_member(c, "b", c.topology, {})
    c.run(3_000)
    a, b = Process(c, "a", tmp_path), Process(c, "b", tmp_path)
    a.apply()
    b.apply()
    assert set(a.tasks.roles().values()) == {"active"}
    warm = sorted(t for t, role in b.tasks.roles().items() if role == "warmup")
    assert warm
    a.write_state()
    b.write_state()
    before = {p: dict(p.tasks.tasks) for p in (a, b)}
    stores = {p: {t: task.stores["counts"] for t, task in p.tasks.tasks.items()} for p in (a, b)}

    info = b.tasks.info
    caught_up = streams_member(
        c, "b", c.topology, {t: WRITTEN for t in info.standby_tasks | info.warmup_tasks}
    )
    c.handle("b", AssignorMetadataChanged(name="streamtasks", metadata=caught_up))
    c.run(4_000)
    c.assert_exclusive()
    assert {tp.partition for tp in c.owned("b")} == {t.partition for t in warm}
    from_a, from_b = a.apply(), b.apply()

    # every task stays on both processes: none is closed or created, each is the same object
    # with the same open store
    for p, events in ((a, from_a), (b, from_b)):
        assert kinds(events, TaskClosed) == kinds(events, TaskCreated) == []
        assert p.tasks.tasks == before[p]
        for t, task in p.tasks.tasks.items():
            assert task.stores["counts"] is stores[p][t]
            assert not task.closed
            assert not task.stores["counts"].closed
    # the old owner recycled the moved actives to standbys, checkpointed where they stood
    assert [(e.task, e.from_role, e.to_role) for e in kinds(from_a, TaskRecycled)] == [
        (t, "active", "standby") for t in warm
    ]
    for t in warm:
        assert a.directory.read_checkpoint(t) == {TopicPartition(CHANGELOG, t.partition): WRITTEN}
    # the new owner recycled the warm-ups to actives (kept as standbys while the partitions
    # were pending), and has nothing to restore: its stores are where the changelog ends
    recycled = [(e.task, e.to_role) for e in kinds(from_b, TaskRecycled)]
    assert [(t, role) for t, role in recycled if role == "active"] == [(t, "active") for t in warm]
    for t in warm:
        task = b.tasks.tasks[t]
        assert task.is_active
        assert task.restore_done()
        assert task.restored_records == 0
    assert a.tasks.roles() == {t: "standby" if t in warm else "active" for t in before[a]}
    a.close()
    b.close()


MOVED = TaskId(0, 3)


def revoking_owner(tmp_path: Path) -> tuple[Process, list[TopicPartition], AssignmentInfo]:
    """One process active for all four tasks (state written); the partitions it keeps when
    ``MOVED``'s is revoked, and the ending epoch's metadata (all four still active there)."""
    c = StreamsCluster()
    streams_member(c, "a", c.topology, {})
    c.run(3_000)
    a = Process(c, "a", tmp_path)
    a.apply()
    a.write_state()
    owned = [p for p in sorted(c.owned("a")) if p.partition != MOVED.partition]
    return a, owned, AssignmentInfo(active_tasks=frozenset(TaskId(0, p) for p in range(4)))


def test_a_task_recycled_at_its_revocation_is_closed_if_the_next_epoch_drops_it(tmp_path: Path) -> None:
    """The kept task is a standby of no assignment: the next assignment that does not name it
    closes it (clean, checkpointed)."""
    a, owned, ending = revoking_owner(tmp_path)
    asyncio.run(a.tasks.reconcile(owned, ending, ends, keep_revoked=True))
    assert a.tasks.roles()[MOVED] == "standby"
    kept = a.tasks.tasks[MOVED]
    nothing = AssignmentInfo(active_tasks=frozenset(TaskId(0, p.partition) for p in owned))
    before = len(a.events)
    asyncio.run(a.tasks.reconcile(owned, nothing, ends, keep_revoked=True))
    closed = kinds(a.events[before:], TaskClosed)
    assert [(e.task, e.role, e.clean) for e in closed] == [(MOVED, "standby", True)]
    assert kept.closed
    assert a.directory.read_checkpoint(MOVED) == {TopicPartition(CHANGELOG, MOVED.partition): WRITTEN}
    a.close()


def test_without_keep_revoked_a_revoked_active_named_active_is_closed(tmp_path: Path) -> None:
    """The classic path (its revocations come with the new assignment's metadata) and a
    stopping app close a revoked active the metadata still names active."""
    a, owned, ending = revoking_owner(tmp_path)
    before = len(a.events)
    asyncio.run(a.tasks.reconcile(owned, ending, ends))
    assert [(e.task, e.role) for e in kinds(a.events[before:], TaskClosed)] == [(MOVED, "active")]
    a.close()


def test_a_lost_active_is_closed_dirty_even_when_revocations_are_kept(tmp_path: Path) -> None:
    a, owned, ending = revoking_owner(tmp_path)
    a.tasks.checkpoint_all()
    assert a.directory.read_checkpoint(MOVED) is not None
    before = len(a.events)
    lost = [TopicPartition("foo", MOVED.partition)]
    asyncio.run(a.tasks.reconcile(owned, ending, ends, lost=lost, keep_revoked=True))
    closed = [(e.task, e.role, e.clean) for e in kinds(a.events[before:], TaskClosed)]
    assert closed == [(MOVED, "active", False)]
    assert MOVED not in a.tasks.tasks
    # no write it did not see acknowledged: its stores are kept, checkpointed where they are
    assert a.directory.read_checkpoint(MOVED) == {TopicPartition("app-counts-changelog", MOVED.partition): 5}
    a.close()
