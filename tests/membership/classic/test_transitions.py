"""The transitions table: the code's and the documentation's are the same, and the machine
refuses anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import MemberState
from streamtasks.membership.classic.transitions import TRANSITIONS, check_transition

DOC = Path(__file__).resolve().parents[3] / "docs" / "membership.md"


def documented() -> set[tuple[MemberState, str, MemberState]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Transitions", 1)[1].split("\n## ", 1)[0]
    rows: set[tuple[MemberState, str, MemberState]] = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("from", "---"):
            continue
        for src in cells[0].split(","):
            rows.add((MemberState[src.strip()], cells[1], MemberState[cells[2]]))
    return rows


def test_documented_transitions_are_the_code_table() -> None:
    assert documented() == set(TRANSITIONS)


def test_every_state_is_reachable_and_left() -> None:
    targets = {dst for _, _, dst in TRANSITIONS}
    sources = {src for src, _, _ in TRANSITIONS}
    assert targets | {MemberState.UNJOINED} == set(MemberState)
    assert sources == set(MemberState)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (MemberState.CLOSED, MemberState.STABLE),
        (MemberState.FAILED, MemberState.JOINING),
        (MemberState.UNJOINED, MemberState.SYNCING),
    ],
)
def test_transitions_outside_the_table_are_refused(src: MemberState, dst: MemberState) -> None:
    with pytest.raises(LocalProtocolError, match="illegal transition"):
        check_transition(src, dst, "test")
