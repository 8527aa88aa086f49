"""The wordcount example's own processors and topology, run by the test driver (no broker):
what ``examples/wordcount/wordcount.py`` runs on two App instances, checked word by word."""

from __future__ import annotations

import collections
from collections.abc import Iterable

import pytest

from streamtasks.state.serdes import BYTES, INT64, STRING
from streamtasks.testing import TopologyTestDriver
from tests.example_loader import load_example

wordcount = load_example("examples/wordcount/wordcount.py", "wordcount_example_offline")


@pytest.fixture
def driver() -> Iterable[TopologyTestDriver]:
    with TopologyTestDriver(
        wordcount.topology(),
        {0: wordcount.split, 1: wordcount.count},
        stores={"counts": (STRING, INT64)},
        partitions={"text-lines": 4},
    ) as d:
        yield d


def test_every_word_is_counted_once_per_occurrence(driver: TopologyTestDriver) -> None:
    lines = driver.input_topic("text-lines", BYTES, STRING)
    for i, line in enumerate(wordcount.TEXT.splitlines() * 3):
        lines.pipe(None, line, timestamp=1_000 + i)
    expected = collections.Counter(wordcount.TEXT.lower().split() * 3)
    assert driver.store("counts").to_dict() == dict(expected)
    # word-counts holds each new count; the last per word is the total
    latest = driver.output_topic("word-counts", STRING, STRING).read_key_values_to_map()
    assert latest == {w: str(n) for w, n in expected.items()}


def test_counts_go_up_by_one_in_order_per_word(driver: TopologyTestDriver) -> None:
    driver.input_topic("text-lines", BYTES, STRING).pipe(None, "Stream a STREAM b stream", timestamp=7)
    out = driver.output_topic("word-counts", STRING, STRING).read_records()
    stream = [r.value for r in out if r.key == "stream"]
    assert stream == ["1", "2", "3"]
    assert {r.timestamp for r in out} == {7}


def test_an_empty_line_counts_nothing(driver: TopologyTestDriver) -> None:
    driver.input_topic("text-lines", BYTES, STRING).pipe(None, "   ")
    assert driver.output_topic("word-counts", STRING, STRING).is_empty()
    assert len(driver.store("counts")) == 0
