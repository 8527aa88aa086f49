"""Standby placement (:func:`assignors.task.standby.place_standbys`) on hand-made inputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assignors.task.standby import place_standbys

# p0 runs 0, 1; p1 runs 2, 3; p2 runs 4, 5 (it just took them over). p0 and p1 hold state for
# each other's tasks and for 4, 5: passes 1-3 alone give 3/3/0 (p2 cannot hold 4 or 5).
OWNER = [0, 0, 1, 1, 2, 2]
STATE = {0: [1], 1: [1], 2: [0], 3: [0], 4: [1, 0], 5: [0, 1]}


def loads(slots: list[int], n: int) -> list[int]:
    return [slots.count(p) for p in range(n)]


def place(
    *, keep: Mapping[int, Iterable[int]] | None = None, avoid: Mapping[int, int] | None = None
) -> list[int]:
    return place_standbys(
        range(6),
        num_tasks=6,
        capacity=[1, 1, 1],
        owner=OWNER,
        replicas=1,
        preferred=STATE.__getitem__,
        keep=None if keep is None else keep.__getitem__,
        avoid=avoid,
    )


def test_sticky_standbys_do_not_leave_a_process_without_any() -> None:
    slots = place()
    assert loads(slots, 3) == [2, 2, 2]
    assert all(slots[i] != OWNER[i] for i in range(6))


def test_a_chain_through_a_third_process_evens_the_standbys() -> None:
    # p0 ends with the standbys of 1 and 2, both run by p2: none can go to p2 directly, so p1
    # passes the standby of 0 to p2 and takes the one of 1
    owner = [0, 2, 2]
    slots = place_standbys(
        range(3), num_tasks=3, capacity=[1, 1, 1], owner=owner, replicas=1, preferred=lambda i: ()
    )
    assert loads(slots, 3) == [1, 1, 1]
    assert all(slots[i] != owner[i] for i in range(3))


def test_kept_standbys_stay_whatever_the_balance() -> None:
    # fallback_prior keeps every previous standby
    assert loads(place(keep=STATE), 3) == [3, 3, 0]


def test_planned_warmups_count_as_standbys_of_their_process() -> None:
    # p2 warms up two tasks of p0: the standbys stay with their state meanwhile
    assert loads(place(avoid={0: 2, 1: 2}), 3) == [3, 3, 0]
