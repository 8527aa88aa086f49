from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtasks.errors import CheckpointError, StateError
from streamtasks.state import read_checkpoint, write_checkpoint
from topology import TopicPartition

# Surrogates cannot be encoded as UTF-8, so no topic name holds one (the writer rejects them).
topics = st.text(st.characters(codec="utf-8").filter(lambda c: not c.isspace()), min_size=1, max_size=20)
offset_maps = st.dictionaries(
    st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=20
)


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / ".checkpoint") is None


def test_written_file_is_kafkas_text_format_sorted(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    write_checkpoint(path, {TopicPartition("b", 0): 7, TopicPartition("a", 10): 5, TopicPartition("a", 2): 0})
    assert path.read_text() == "0\n3\na 2 0\na 10 5\nb 0 7\n"


def test_empty_mapping_writes_a_valid_empty_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    write_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_checkpoint(path) == {}


def test_reads_a_file_without_final_newline_and_with_crlf(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(b"0\r\n2\r\nt 0 1\r\nt  1\t2")
    assert read_checkpoint(path) == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 2}


@given(offsets=offset_maps)
@settings(max_examples=50)
def test_round_trip(offsets: dict[TopicPartition, int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ".checkpoint"
        write_checkpoint(path, offsets)
        assert read_checkpoint(path) == offsets
        assert os.listdir(tmp) == [".checkpoint"]


def test_rewrite_replaces_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    write_checkpoint(path, {TopicPartition("t", 0): 1})
    write_checkpoint(path, {TopicPartition("t", 1): 2})
    assert read_checkpoint(path) == {TopicPartition("t", 1): 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".checkpoint"]


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    # A non-empty directory at the target makes the final rename fail after the data was written.
    target = tmp_path / ".checkpoint"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):  # noqa: PT011 - the platform decides which OSError
        write_checkpoint(target, {TopicPartition("t", 0): 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".checkpoint"]
    assert (target / "keep").read_text() == "x"


def test_write_into_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_checkpoint(tmp_path / "gone" / ".checkpoint", {})


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ({TopicPartition("", 0): 1}, "empty or contains whitespace"),
        ({TopicPartition("a b", 0): 1}, "empty or contains whitespace"),
        ({TopicPartition("a\nb", 0): 1}, "empty or contains whitespace"),
        ({TopicPartition("t", -1): 1}, "partition -1 .* out of range"),
        ({TopicPartition("t", 2**31): 1}, "out of range"),
        ({TopicPartition("t", 0): -1}, "offset -1 of t-0 is out of range"),
        ({TopicPartition("t", 0): 2**63}, "out of range"),
        ({TopicPartition("\ud800", 0): 1}, "not encodable"),
    ],
)
def test_writer_rejects_what_it_could_not_read_back(
    tmp_path: Path, offsets: dict[TopicPartition, int], match: str
) -> None:
    path = tmp_path / ".checkpoint"
    with pytest.raises(CheckpointError, match=match):
        write_checkpoint(path, offsets)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "line", "match"),
    [
        (b"", 1, "file ends where the version was expected"),
        (b"1\n0\n", 1, "unsupported version 1"),
        (b"x\n0\n", 1, "version is not an integer"),
        (b"0\n", 2, "file ends where the entry count was expected"),
        (b"0\n-1\n", 2, "negative entry count"),
        (b"0\n+1\nt 0 1\n", 2, "entry count is not an integer"),
        (b"0\n2\nt 0 1\n", 4, "file ends where entry 2 of 2 was expected"),
        (b"0\n1\nt 0 1\nu 0 2\n", 4, "unexpected content after the 1 entries"),
        (b"0\n1\nt 0 1\n\n", 4, "unexpected content after the 1 entries"),
        (b"0\n0\ngarbage", 3, "unexpected content after the 0 entries"),
        (b"0\n1\nt 0\n", 3, "expected '<topic> <partition> <offset>'"),
        (b"0\n1\nt 0 1 2\n", 3, "expected '<topic> <partition> <offset>'"),
        (b"0\n1\n\n", 3, "expected '<topic> <partition> <offset>'"),
        (b"0\n1\nt x 1\n", 3, "partition is not an integer"),
        (b"0\n1\nt 0 1.5\n", 3, "offset is not an integer"),
        (b"0\n1\nt 0 \xd9\xa1\n", 3, "offset is not an integer"),  # an Arabic-Indic digit
        (b"0\n1\nt -1 1\n", 3, "negative partition -1"),
        (b"0\n1\nt 2147483648 1\n", 3, "partition 2147483648 is out of range"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "offset 9223372036854775808 is out of range"),
        (b"0\n2\nt 0 1\nt 0 2\n", 4, "duplicate entry for t-0"),
        (b"0\n1\n\xff 0 1\n", None, "not UTF-8"),
    ],
)
def test_malformed_checkpoint_raises_naming_file_and_line(
    tmp_path: Path, content: bytes, line: int | None, match: str
) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=match) as caught:
        read_checkpoint(path)
    assert str(path) in str(caught.value)
    if line is not None:
        assert f"line {line}:" in str(caught.value)
    assert isinstance(caught.value, StateError)
    assert isinstance(caught.value, ValueError)


def test_negative_offset_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n2\nt 0 -1\nt 1 5\n")
    with caplog.at_level(logging.WARNING, logger="streamtasks.state.checkpoint"):
        assert read_checkpoint(path) == {TopicPartition("t", 1): 5}
    assert "skipped negative offset -1 of t-0" in caplog.text


def test_kafka_streams_unknown_offset_sentinel_is_skipped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n2\nt 0 -4\nt 1 5\n")
    with caplog.at_level(logging.WARNING, logger="streamtasks.state.checkpoint"):
        assert read_checkpoint(path) == {TopicPartition("t", 1): 5}
    assert caplog.records == []
