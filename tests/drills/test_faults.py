"""The broker fault drills: their catalog entries, the resume clock, the verdict rows, and (live,
on a three-broker cluster) one crash and one rolling restart per protocol."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from streamtasks.drills.catalog import DRILLS, get_drill
from streamtasks.drills.drill_report import verdict_rows
from streamtasks.drills.faults import PROTOCOLS, _TimedAudit, also_is, fault_spec, resume_summary
from streamtasks.drills.ledger import FaultMark
from streamtasks.drills.rolling import DrillResult
from streamtasks.errors import ConfigError

FAULTS = ["broker-crash", "leader-crash", "broker-rolling-restart", "broker-hang"]


def test_the_fault_drills_are_in_the_catalog_on_each_protocol() -> None:
    assert [d.name for d in DRILLS if d.fault] == FAULTS
    for name in FAULTS:
        assert get_drill(name).available
        for protocol, stage in PROTOCOLS.items():
            spec = fault_spec(name, protocol)
            assert spec.worker == ("app" if protocol == "app" else "consumer")
            assert [s.args for s in spec.stages] == [stage.args]
            assert spec.bounces == ()
    with pytest.raises(ConfigError, match="--protocol"):
        fault_spec("broker-crash", "eager")
    with pytest.raises(ConfigError, match="not a broker fault drill"):
        fault_spec("eager-to-cooperative", "classic")


def _acked(audit: _TimedAudit, partition: int, offset: int) -> None:
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    future.set_result(SimpleNamespace(partition=partition, offset=offset))
    audit._acked(b"k", future)


def test_processing_resumes_when_every_partition_passed_what_was_acknowledged_at_the_fault() -> None:
    async def go() -> None:
        audit = _TimedAudit()
        for p, last in ((0, 10), (1, 4)):
            for offset in range(last + 1):
                _acked(audit, p, offset)
        mark = FaultMark(label="kill -9 node 1", node=1, at_s=3.0)
        at = time.time_ns() // 1_000_000 - 250
        audit.mark(mark, at, partitions=3)  # partition 2 had nothing acknowledged: any record counts
        for rid in ("0:10", "1:4", "0:11", "2:0"):  # 0:10 and 1:4 were acknowledged before it
            audit.processed(rid)
        assert mark.resumed_ms is None  # partition 1 has not moved past offset 4 yet
        audit.processed("1:5")
        assert mark.resumed_ms is not None
        assert 250 <= mark.resumed_ms < 5_000
        assert audit.waiting == []
        assert audit.report().processed == 5

    asyncio.run(go())


def test_a_fault_label_says_what_else_the_node_it_hits_is() -> None:
    coordinator, controller = (3, "the group coordinator"), (1, "the active controller")
    assert also_is(2, [coordinator, controller]) == ""
    assert also_is(3, [coordinator, controller]) == "; also the group coordinator"
    assert also_is(1, [coordinator, controller]) == "; also the active controller"
    assert also_is(3, [coordinator, (3, "the active controller")]) == (
        "; also the group coordinator and the active controller"
    )
    assert also_is(2, [(-1, "the active controller")]) == ""  # the cluster could not say


def test_the_cluster_acknowledged_again_when_every_partition_acknowledged_past_the_fault() -> None:
    async def go() -> None:
        audit = _TimedAudit()
        for offset in range(5):
            _acked(audit, 0, offset)
        mark = FaultMark(label="kill -9 node 1", node=1, at_s=3.0)
        audit.mark(mark, time.time_ns() // 1_000_000 - 250, partitions=2)
        _acked(audit, 1, 0)  # partition 1 had nothing acknowledged: any acknowledgement counts
        _acked(audit, 0, 4)  # acknowledged before the fault (a duplicate callback)
        assert mark.acked_ms is None
        _acked(audit, 0, 5)
        assert mark.acked_ms is not None
        assert mark.acked_ms >= 250
        assert audit.acking == []
        assert mark.resumed_ms is None  # nothing processed: acknowledged is not resumed

    asyncio.run(go())


def test_the_resume_summary_and_the_verdict_rows() -> None:
    marks = [
        FaultMark(label=f"f{i}", node=1, at_s=float(i), resumed_ms=ms)
        for i, ms in enumerate((400, 900, 5_000))
    ]
    assert resume_summary(marks) == "p50 900 ms / max 5,000 ms (3 faults)"
    assert resume_summary([*marks, FaultMark(label="x", node=2, at_s=9.0)]) == "never (see problems)"
    assert resume_summary([]) == "-"
    result = DrillResult(drill="broker-crash", broker="b", workers=3, partitions=6, rate=100)
    result.faults, result.resume, result.members_client = marks, resume_summary(marks), "confluent"
    rows = verdict_rows(result)
    assert ("members", "confluent", "-") in rows
    assert ("resumed after: f1 (at 1.0s)", "900 ms", "-") in rows
    marks[2].acked_ms = 4_100
    took = "5,000 ms (the cluster acknowledged again after 4,100 ms)"
    assert ("resumed after: f2 (at 2.0s)", took, "-") in verdict_rows(result)
    assert ("time until processing resumes", "p50 900 ms / max 5,000 ms (3 faults)", "-") in rows


# -- live: the bounded subset `make test` runs (the full set: `streamtasks drill run NAME`) ------

LIVE = [
    pytest.param(name, protocol, marks=[pytest.mark.integration, pytest.mark.slow])
    for protocol in ("classic", "app", "consumer")
    for name in ("broker-crash", "broker-rolling-restart")
]


@pytest.mark.parametrize(("name", "protocol"), LIVE)
def test_a_group_survives_the_drill_on_a_three_broker_cluster(
    name: str, protocol: str, kafka_cluster: Any
) -> None:
    """One crash and one rolling restart per protocol: 0 double-owned, 0 acknowledged offsets
    lost, the App's state read back right, processing resumed after every fault."""
    from streamtasks.drills.faults import FaultOptions, run_fault_drill
    from streamtasks.drills.rolling import DrillOptions

    options = DrillOptions(workers=2, partitions=4, rate=100, keys=100)
    fault = FaultOptions(protocol=protocol, down_s=5.0, steady_s=2.0)
    lines: list[str] = []
    start = time.monotonic()

    def say(line: str) -> None:  # timed: where a slow run spent its time
        lines.append(f"{time.monotonic() - start:6.1f}s {line}")

    try:
        result = asyncio.run(run_fault_drill(fault_spec(name, protocol), options, fault, kafka_cluster, say))
    finally:
        print("\n".join(lines))  # the drill's progress, shown when the test fails
        kafka_cluster.recover()  # the session's cluster, whole again for the next test
    detail = "\n".join([*lines, *result.problems, *result.violations, *result.lost_runs])
    assert result.ok, detail
    assert result.acknowledged > 500, detail
    assert result.faults, detail
    assert all(mark.resumed_ms is not None for mark in result.faults), detail
    if protocol == "app":
        assert result.state_checked, detail
