from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from streamtasks.cli import main
from streamtasks.scenario import PROCESS_NAMESPACE

SAMPLE = str(Path(__file__).parents[2] / "streamtasks" / "scenarios" / "sample.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_assign_prints_a_table_per_process_and_followup(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE)
    assert code == 0
    for name in ("alpha", "bravo", "charlie", "delta"):
        assert name in out
    assert "follow-up rebalance: due" in out  # delta has no state: warm-ups, then a probing rebalance
    assert "validation: ok" in out


def test_assign_json_is_complete_and_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] is True
    actives = [t for p in doc["processes"] for t in p["active"]]
    assert sorted(actives) == sorted(f"{s}_{p}" for s in (0, 1) for p in range(6))
    delta = next(p for p in doc["processes"] if p["name"] == "delta")
    assert delta["warmup"], "the stateless newcomer should warm up stateful tasks"
    assert doc["followup_rebalance"]["due"] is True
    assert doc["followup_rebalance"]["in_ms"] == 600000
    for proc in doc["processes"]:
        assert not set(proc["active"]) & set(proc["standby"])


@pytest.mark.parametrize("assignor", ["sticky", "fallback_prior", "high_availability"])
def test_every_builtin_task_assignor_runs_on_the_sample(
    capsys: pytest.CaptureFixture[str], assignor: str
) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE, "--assignor", assignor, "--json")
    assert code == 0
    assert json.loads(out)["assignor"] == assignor


def test_unknown_assignor_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "assign", SAMPLE, "--assignor", "nope")
    assert code == 2
    assert "no task assignor named 'nope'" in err
    assert "high_availability" in err


def test_bad_scenario_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("application_id: app\n")
    code, _, err = run(capsys, "assign", str(path))
    assert code == 2
    assert "partitions" in err


def test_assignors_lists_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assignors", "--json")
    assert code == 0
    listing = json.loads(out)
    assert {"high_availability", "sticky", "fallback_prior"} <= set(listing["task"])
    assert {"range", "round_robin", "sticky", "cooperative_sticky", "uniform"} <= set(listing["partition"])


# -- files that are not a scenario: exit 2 and one line that names the file and the problem ----

DEEP = 100_000  # far beyond Python's recursion limit


def _junk() -> bytes:
    return bytes(range(256)) * 4  # every byte value; 0x80 cannot start a UTF-8 sequence


def _scenario_with_task(task: str) -> bytes:
    return (
        "application_id: app\npartitions: {in: 2}\ntopology: {subtopologies: [{sources: [in]}]}\n"
        f"processes: [{{name: a, previous_active: ['{task}']}}]\n"
    ).encode()


#: (file name, content, what the one-line message must say)
BAD_FILES: list[tuple[str, bytes, str]] = [
    ("latin1.yaml", "application_id: caf\xe9\n".encode("latin-1"), "not UTF-8 text: byte 0xe9 at offset 19"),
    ("junk.yaml", _junk(), "not UTF-8 text: byte 0x80 at offset 128"),
    ("junk.json", _junk(), "not UTF-8 text"),
    ("bom_then_junk.yaml", b"\xef\xbb\xbfab\xff", "not UTF-8 text: byte 0xff at offset 5"),
    ("deep.yaml", b"[" * DEEP, "nests too deeply to be read as YAML"),
    ("deep_map.yaml", b"{a: " * DEEP, "nests too deeply to be read as YAML"),
    ("deep.json", b"[" * DEEP, "nests too deeply to be read as JSON"),
    ("empty.yaml", b"", "is empty"),
    ("blank.json", b" \n\t\n", "is empty"),
    ("comments.yaml", b"# nothing but a comment\n", "not an empty document"),
    ("null.json", b"null", "not an empty document"),
    ("list.yaml", b"- application_id: app\n", "not a list"),
    ("list.json", b'[{"application_id": "app"}]', "not a list"),
    ("scalar.yaml", b"wordcount\n", "not a string"),
    ("number.json", b"42", "not a number"),
    ("boolean.yaml", b"true\n", "not a boolean"),
    (
        "unclosed.yaml",
        b"application_id: [unclosed\n",
        "not valid YAML: while parsing a flow sequence, expected ',' or ']', "
        "but got '<stream end>' at line 2, column 1",
    ),
    ("tab.yaml", b"a:\n\t- b\n", "found character '\\t' that cannot start any token at line 2, column 1"),
    ("control.yaml", b"application_id: \x01\n", "not valid YAML: special characters are not allowed"),
    (
        "two_docs.yaml",
        b"a: 1\n---\nb: 2\n",
        "not valid YAML: expected a single document in the stream, but found another document at line 2",
    ),
    ("python_tag.yaml", b"a: !!python/object:os.system {}\n", "could not determine a constructor"),
    ("broken.json", b'{"application_id": ', "not valid JSON: Expecting value"),
    ("huge_int.yaml", b"now_ms: " + b"9" * 5000 + b"\n", "not valid YAML: a number has more than"),
    ("huge_int.json", b'{"now_ms": ' + b"9" * 5000 + b"}", "not valid JSON: a number has more than"),
    ("unicode_digit_task.yaml", _scenario_with_task("0_\u00b2"), "not a task id: '0_²'"),
    ("long_task.yaml", _scenario_with_task("0_" + "9" * 5000), "not a task id: '0_99"),
]


def assert_one_line_error(err: str, name: str, problem: str) -> None:
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert err.startswith("streamtasks: error: ")
    assert name in err
    assert problem in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("name", "content", "problem"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_that_is_not_a_scenario_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, content: bytes, problem: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run(capsys, "assign", str(path))
    assert (code, out) == (2, "")
    assert_one_line_error(err, name, problem)


def test_a_directory_is_not_a_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "dir.yaml"
    path.mkdir()
    code, _, err = run(capsys, "assign", str(path))
    assert code == 2
    assert_one_line_error(err, "dir.yaml", "cannot read scenario")


def test_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "assign", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert_one_line_error(err, "missing.yaml", "No such file or directory")


def test_a_file_name_with_a_newline_still_gives_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "two\nlines.yaml"
    path.write_bytes(b"\xff")
    code, _, err = run(capsys, "assign", str(path))
    assert code == 2
    assert_one_line_error(err, "two lines.yaml", "not UTF-8 text")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_utf8_byte_order_mark_is_accepted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    text = Path(SAMPLE).read_text(encoding="utf-8")
    if suffix == ".json":
        text = json.dumps(yaml.safe_load(text))
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    code, _, _ = run(capsys, "assign", str(path), "--json")
    assert code == 0


def test_the_command_exits_2_without_a_traceback(tmp_path: Path) -> None:
    """The process itself, as a shell sees it (the entry point is ``sys.exit(main())``)."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes("application_id: caf\xe9\n".encode("latin-1"))
    proc = subprocess.run(
        [sys.executable, "-m", "streamtasks.cli", "assign", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "latin1.yaml", "not UTF-8 text")


def test_assign_reads_a_packaged_example_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file named "sample" here: the packaged example is read
    code, out, _ = run(capsys, "assign", "sample", "--json")
    assert code == 0
    assert json.loads(out) == json.loads(run(capsys, "assign", SAMPLE, "--json")[1])


def test_assign_names_the_packaged_examples_when_the_file_is_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "assign", "nosuch")
    assert code == 2
    assert "cannot read scenario nosuch" in err
    assert "packaged examples, by name: sample" in err


def test_a_file_in_the_working_directory_wins_over_a_packaged_example(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample").write_text("application_id: [unclosed")
    code, _, err = run(capsys, "assign", "sample")
    assert code == 2
    assert "scenario sample is not valid YAML" in err


def test_the_table_names_processes_and_their_capacity(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE)
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("process"))
    assert header.split() == ["process", "capacity", "rack", "active", "standby", "warm-up"]
    assert "NONE" not in out


def test_an_unknown_task_is_named_with_its_process_not_its_uuid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(_scenario_with_task("7_0"))
    code, out, err = run(capsys, "assign", str(path))
    assert (code, out) == (2, "")
    assert_one_line_error(err, "s.yaml", "process 'a' reports previous tasks 7_0")
    assert str(uuid.uuid5(PROCESS_NAMESPACE, "a")) not in err


def test_a_closed_stdout_ends_the_command_quietly() -> None:
    """``streamtasks assign sample | head -1``: the reader is gone before the table is written;
    the command stops with 141 (128 + SIGPIPE, what a shell shows) and no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "streamtasks", "assign", "sample"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")
