"""The windowed count example's processors run by the test driver (no broker): every window is
emitted once, when stream time passes its end plus the grace, with the count Python computes by
the same rules; late clicks are dropped."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from streamtasks.state.serdes import BYTES, STRING
from streamtasks.testing import TestOutputTopic, TopologyTestDriver
from tests.example_loader import load_example

BASE = 1_700_000_040_000  # a minute boundary


example = load_example("examples/windowed_count/windowed_count.py", "windowed_count_example_offline")


@pytest.fixture
def driver() -> Iterable[TopologyTestDriver]:
    with TopologyTestDriver(
        example.topology(),
        example.PROCESSORS,
        stores={example.STORE: (STRING, example.INT64)},
        partitions={example.SOURCE: example.PARTITIONS},
    ) as d:
        yield d


def emitted(out: TestOutputTopic) -> list[tuple[str, int, int]]:
    """The windows emitted since the last call."""
    rows = []
    for r in out.read_records():
        value = json.loads(r.value)
        assert value["window_end"] == value["window_start"] + example.WINDOW_MS
        rows.append((r.key, value["window_start"], value["count"]))
    return rows


def click(driver: TopologyTestDriver, user: str | None, at: int, partition: int = 0) -> None:
    driver.input_topic(example.SOURCE, STRING, BYTES).pipe(user, b"click", timestamp=at, partition=partition)


def open_windows(driver: TopologyTestDriver) -> list[tuple[Any, int, Any]]:
    return driver.window_store(example.STORE).all()


def test_a_window_is_emitted_once_when_stream_time_passes_its_end_and_grace(
    driver: TopologyTestDriver,
) -> None:
    out = driver.output_topic(example.OUTPUT, STRING, BYTES)
    click(driver, "ann", BASE + 1_000)
    click(driver, "ann", BASE + 59_999)
    click(driver, "bob", BASE + 30_000)
    click(driver, "ann", BASE + 65_000)  # the next window; the first is still within its grace
    assert emitted(out) == []
    assert open_windows(driver) == [("ann", BASE, 2), ("ann", BASE + 60_000, 1), ("bob", BASE, 1)]
    click(driver, "ann", BASE + 5_000)  # out of order, within the grace: counted
    click(driver, "bob", BASE + 69_999)  # stream time one ms short of BASE's end + grace
    assert emitted(out) == []
    click(driver, None, BASE + 70_000)  # a tick: BASE's window closes
    assert emitted(out) == [("ann", BASE, 3), ("bob", BASE, 1)]
    assert [w[:2] for w in open_windows(driver)] == [("ann", BASE + 60_000), ("bob", BASE + 60_000)]
    assert driver.window_store(example.STORE).fetch("ann", BASE, BASE + 120_000) == [(BASE + 60_000, 1)]
    assert driver.window_store(example.STORE).fetch_all(BASE, BASE) == []
    click(driver, "ann", BASE + 10_000)  # late: its window was emitted
    click(driver, None, BASE + 10 * 60_000)
    assert emitted(out) == [("ann", BASE + 60_000, 1), ("bob", BASE + 60_000, 1)]
    assert open_windows(driver) == []


def test_the_example_clicks_give_the_expected_windows(driver: TopologyTestDriver) -> None:
    out = driver.output_topic(example.OUTPUT, STRING, BYTES)
    rows = example.clicks(BASE)
    for c in rows:
        click(driver, c.user, c.timestamp, c.partition)
    got = emitted(out)
    expected = example.expected_counts(rows)
    assert len(got) == len({(u, s) for u, s, _ in got}) == len(expected) == 36
    assert {(u, s): n for u, s, n in got} == expected
    assert sum(expected.values()) < sum(1 for c in rows if c.user is not None)  # some were late
    assert driver.stream_time(example.SOURCE, 0) == driver.stream_time(example.SOURCE, 1) == BASE + 600_000
