"""``streamtasks.App(group_protocol="streams")`` in a KIP-1071 streams group on the embedded
Apache Kafka 4.4.0: the broker's task assignor places the active and standby tasks (the App's
``num_standby_replicas`` becomes the group's ``streams.num.standby.replicas``), the App runs
them, commits with the member epoch, and the per-offset audits of the classic and KIP-848
paths hold: every input offset the broker acknowledged is processed, no task is ever active on
two live workers, and the state read back from the changelogs is right.

* the crash audit (at-least-once): 3 workers, kill -9 of one, a fresh worker joins, a rolling
  bounce of every survivor; 0 lost, 0 dual-active;
* the same under exactly_once_v2 (TxnOffsetCommit with the streams member's id and epoch):
  every acknowledged offset exactly once in the committed output;
* the demo's stateful phase: standbys promoted after kill -9, a fresh worker takes actives,
  latest values and counts in the changelogs match what was produced.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

import pytest

from streamtasks.drills._proc import LOGS_ENV
from streamtasks.drills.crash_audit import run_crash_audit
from streamtasks.drills.stateful_demo import run_stateful_phase
from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.streams_group import STREAMS_GROUP_HEARTBEAT_API_KEY

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def streams_kafka(kafka: Cluster) -> Cluster:
    """The test cluster, or a skip where it has no streams-group coordinator."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    if kafka.api_versions().get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    return kafka


@pytest.mark.parametrize(("guarantee", "seed"), [("at_least_once", 7), ("exactly_once_v2", 3)])
def test_no_acknowledged_offset_is_lost_and_no_task_is_dual_active_across_crash_scale_out_and_bounce(
    streams_kafka: Cluster, guarantee: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = Path(os.environ.get(LOGS_ENV) or tmp_path) / f"streams-{guarantee}-{seed}"
    monkeypatch.setenv(LOGS_ENV, str(log_dir))
    out = io.StringIO()
    report = asyncio.run(
        run_crash_audit(
            streams_kafka.bootstrap_servers,
            out,
            seed=seed,
            workers=3,
            partitions=6,
            keys=500,
            rate=300,
            guarantee=guarantee,
            bounce=True,
            kill_busy=True,
            group_protocol="streams",
        )
    )
    print(out.getvalue())
    assert report.offsets.acknowledged > 1_000, report.line()
    assert report.complete, report.line()
    assert report.offsets.lost == 0, (report.line(), report.offsets.lost_runs, log_dir)
    assert report.dual_active == (), report.dual_active
    assert report.bounced == 3
    if guarantee == "exactly_once_v2":
        assert report.offsets.duplicates == 0, report.line()


def test_standbys_are_promoted_and_the_state_read_back_is_right(streams_kafka: Cluster) -> None:
    out = io.StringIO()
    report = asyncio.run(
        run_stateful_phase(
            streams_kafka.bootstrap_servers, out, partitions=4, keys=200, rate=300, group_protocol="streams"
        )
    )
    print(out.getvalue())
    assert report.problems == [], out.getvalue()  # dual-active spells would be problems
    assert report.keys == 200
    assert report.latest_mismatches == 0
    assert report.missing_counts == 0
    assert report.offsets is not None
    assert report.offsets.lost == 0, report.offsets.lost_runs
    assert report.offsets.acknowledged > 0
    # The broker placed a standby of each task on the other worker: the survivor promotes them.
    assert report.promoted_tasks >= 1
    assert report.crash_restored_records < report.crash_full_restore_records / 2
    # Kafka 4.4 has no warm-ups: the fresh worker gets actives moved cold.
    assert report.warmups == 0
    assert report.moved_to_new >= 1
