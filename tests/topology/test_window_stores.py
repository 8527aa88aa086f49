"""Window stores in the topology: declaration, checks, changelog configs, fingerprints."""

from __future__ import annotations

import pytest

from streamtasks.errors import TopologyError
from topology import TopologyBuilder
from topology.model import WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS, StateStore


def test_window_store_is_declared_with_its_size_and_retention() -> None:
    builder = TopologyBuilder("clicks")
    builder.stream("clicks").window_store("counts", size_ms=60_000, retention_ms=70_000).store("meta")
    topo = builder.build()
    (window,) = [s for s in topo.subtopologies[0].stores if s.is_window]
    assert (window.kind, window.window_size_ms, window.retention_ms) == ("window", 60_000, 70_000)
    assert window.retain_duplicates is False
    assert topo.internal_topics() == ("clicks-counts-changelog", "clicks-meta-changelog")
    (task, *_) = topo.tasks({"clicks": 2})
    assert [s.name for s in task.stores] == ["counts", "meta"]
    assert task.store_names == ("counts", "meta")


def test_changelog_configs_follow_kafka_streams() -> None:
    window = StateStore(name="w", kind="window", window_size_ms=60_000, retention_ms=70_000)
    assert window.changelog_configs() == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(70_000 + 86_400_000),
    }
    assert (
        WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS == 86_400_000
    )  # windowstore.changelog.additional.retention.ms
    assert window.changelog_configs(additional_retention_ms=0)["retention.ms"] == "70000"
    assert StateStore(name="kv").changelog_configs() == {"cleanup.policy": "compact"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size_ms": 0, "retention_ms": 10}, "positive window size"),
        ({"size_ms": 60_000, "retention_ms": 59_999}, "at least the window size"),
    ],
)
def test_bad_window_stores_are_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        TopologyBuilder("app").stream("t").window_store("w", **kwargs)


def test_a_key_value_store_takes_no_window_settings() -> None:
    with pytest.raises(TopologyError, match="takes no window size"):
        StateStore(name="kv", retention_ms=5)
    with pytest.raises(TopologyError, match="unknown kind"):
        StateStore(name="x", kind="session")  # type: ignore[arg-type]


def test_window_settings_are_part_of_the_fingerprint_key_value_stores_unchanged() -> None:
    def topo(retention: int) -> bytes:
        builder = TopologyBuilder("app")
        builder.stream("t").window_store("w", size_ms=1_000, retention_ms=retention)
        return builder.build().fingerprint()

    assert topo(1_000) != topo(2_000)
    assert StateStore(name="kv").describe() == {"name": "kv", "logging": True}
