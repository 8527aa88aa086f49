"""The rolling-upgrade drills, live and small (two workers): each must pass its own verdict."""

from __future__ import annotations

import asyncio

import pytest

from streamtasks.drills.catalog import get_drill
from streamtasks.drills.rolling import DrillOptions, DrillResult, run_live_drill
from streamtasks.embedded import EmbeddedBroker, ExternalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _passes(
    kafka: EmbeddedBroker | ExternalCluster, name: str, peer: str | None = None, coordinator: bool = False
) -> tuple[DrillResult, str]:
    """Run drill ``name`` small (two workers, four partitions) and check the verdict every drill
    must pass; returns the result and the report to show with further checks."""
    lines: list[str] = []
    result = asyncio.run(
        run_live_drill(
            get_drill(name),
            DrillOptions(workers=2, partitions=4, rate=100, keys=50, peer=peer, coordinator=coordinator),
            kafka.bootstrap_servers,
            lines.append,
        )
    )
    report = "\n".join(lines) + f"\n{result.to_json()}"
    assert result.problems == [], report
    assert result.double_owned == 0, report
    assert result.acknowledged > 0
    assert result.lost == 0, report
    assert result.ok, report
    return result, report


@pytest.mark.parametrize("name", ["eager-to-cooperative", "userdata-probing", "faust-to-streamtasks"])
def test_drill_passes(kafka: EmbeddedBroker | ExternalCluster, name: str) -> None:
    spec = get_drill(name)
    result, _ = _passes(kafka, name)
    assert len(result.phases) == len(spec.stages)  # the start, then one phase per bounce
    assert {p for p, _, _, _ in result.ownership} == set(range(4))
    if spec.worker == "app":
        assert result.state_checked
        assert result.state_counts_short == 0


@pytest.mark.parametrize("peer", ["kafka-python", "confluent"])
def test_eager_to_cooperative_with_a_peer_library(kafka: EmbeddedBroker | ExternalCluster, peer: str) -> None:
    """Two streamtasks workers and one kafka-python or librdkafka member move from range to
    cooperative-sticky; the peer, which cannot offer both, moves in one bounce, last."""
    result, report = _passes(kafka, "eager-to-cooperative", peer=peer)
    assert result.peer_client == peer
    # every worker, the peer included, owned partitions at some point
    assert {w for _, w, _, _ in result.ownership} == {"w1", "w2", "p1"}, report


def test_classic_to_consumer_and_back(kafka: EmbeddedBroker | ExternalCluster) -> None:
    """Online migration to KIP-848 and the downgrade, every member bounced each way."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("KIP-848 groups need Apache Kafka 4.x (Tansu has no ConsumerGroupHeartbeat)")
    result, _ = _passes(kafka, "classic-to-consumer")
    assert len(result.phases) == 3


@pytest.mark.smoke  # the coordinator in front of Tansu too (make test's second part)
def test_classic_to_consumer_on_streamtasks_coordinator(kafka: EmbeddedBroker | ExternalCluster) -> None:
    """The same migration with the group on ``streamtasks coordinator`` in front of the cluster:
    classic members served by its JoinGroup/SyncGroup translation, then KIP-848 members, then
    classic again (on Tansu too: the coordinator only forwards to the cluster)."""
    result, report = _passes(kafka, "classic-to-consumer", coordinator=True)
    assert result.coordinator is not None
    assert result.coordinator != kafka.bootstrap_servers
    assert len(result.phases) == 3
    assert {w for _, w, _, _ in result.ownership} == {"w1", "w2"}, report
