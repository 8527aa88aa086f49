"""``groups describe --offsets`` rows and task lags, and ``reset-offsets`` plans (pure)."""

from __future__ import annotations

import pytest

from streamtasks.errors import ConfigError
from streamtasks.groups.offsets import (
    ResetSpec,
    offset_rows,
    owners_of,
    parse_datetime_ms,
    plan_reset,
    render_offsets,
    render_reset,
    task_lags,
)
from streamtasks.groups.view import ClassicGroupView, ClassicMemberView, MemberTasks
from topology.ids import TaskId, TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def _member(
    client: str, partitions: tuple[TopicPartition, ...], active: tuple[TaskId, ...]
) -> ClassicMemberView:
    return ClassicMemberView(
        member_id=f"{client}-1", instance_id=None, client_id=client, client_host="/h", partitions=partitions,
        tasks=MemberTasks(active=active, standby=(), warmup=()),
    )  # fmt: skip


def test_rows_give_lag_owner_and_task_and_task_lags_sum_per_task() -> None:
    view = ClassicGroupView(
        group_id="g", state="Stable", protocol_type="consumer", protocol="streamtasks",
        members=(_member("x", (A0, B0), (TaskId(0, 0),)), _member("y", (A1,), (TaskId(0, 1), TaskId(1, 1)))),
    )  # fmt: skip
    owners, tasks = owners_of(view)
    assert owners == {A0: "x", B0: "x", A1: "y"}
    # x's a-0 and b-0 both feed 0_0; y has two tasks of partition 1: its partition's task is unknown
    assert tasks == {A0: "0_0", B0: "0_0"}
    rows = offset_rows({A0: 5, A1: 2}, {A0: 9, A1: 2, B0: 4}, owners, tasks)
    assert [(r.partition, r.committed, r.end, r.lag, r.owner, r.task) for r in rows] == [
        (A0, 5, 9, 4, "x", "0_0"),
        (A1, 2, 2, 0, "y", None),
        (B0, None, 4, 4, "x", "0_0"),  # nothing committed: the whole log is lag
    ]
    assert task_lags(rows) == {"0_0": 8}
    table = render_offsets(rows).splitlines()
    assert table[0].split() == [
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "OWNER",
        "TASK",
    ]
    assert table[3].split() == ["b", "0", "-", "4", "4", "x", "0_0"]
    assert render_offsets(()) == "no committed or assigned partitions"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ResetSpec(to="earliest"), [2, 0]),
        (ResetSpec(to="latest"), [10, 7]),
        (ResetSpec(to="offset", value=5), [5, 5]),
        (ResetSpec(to="offset", value=99), [10, 7]),  # clamped to the log end
        (ResetSpec(to="shift", value=-3), [2, 4]),  # 4-3 clamped to the start; none committed: the end - 3
        (ResetSpec(to="datetime", value=123), [6, 7]),  # no offset at that time: the log end
    ],
)
def test_reset_plans_clamp_to_the_log(spec: ResetSpec, expected: list[int]) -> None:
    plan = plan_reset(
        "g", spec, partitions=[A1, A0], committed={A0: 4}, earliest={A0: 2, A1: 0}, latest={A0: 10, A1: 7},
        at_time={A0: 6, A1: -1},
    )  # fmt: skip
    assert [new for _, _, new in plan.moves] == expected
    assert [tp for tp, _, _ in plan.moves] == [A0, A1]
    document = plan.to_json(executed=False)
    assert document["partitions"][0] == {
        "topic": "a",
        "partition": 0,
        "current_offset": 4,
        "new_offset": expected[0],
    }
    assert render_reset(plan, executed=False).startswith("group g: dry run (add --execute to commit)")


def test_datetimes_are_utc_unless_zoned_and_bad_ones_are_one_clear_error() -> None:
    assert parse_datetime_ms("1970-01-01T00:00:01") == 1000
    assert parse_datetime_ms("1970-01-01T01:00:01+01:00") == 1000
    with pytest.raises(ConfigError, match="not an ISO-8601 time: 'yesterday'"):
        parse_datetime_ms("yesterday")
    with pytest.raises(ConfigError, match="unknown target"):
        plan_reset(
            "g", ResetSpec(to="sideways"), partitions=[A0], committed={}, earliest={A0: 0}, latest={A0: 1}
        )
