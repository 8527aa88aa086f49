"""The transition table: data, docs and machine agree; illegal moves and events raise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import EnforceRebalance, Leave, Subscribe
from streamtasks.membership.consumer import TRANSITIONS, ConsumerMember, ConsumerMemberConfig, MemberState
from streamtasks.membership.consumer.transitions import check_event, check_transition

DOC = Path(__file__).resolve().parents[3] / "docs" / "membership.md"


def _doc_rows() -> set[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Transitions of the KIP-848 member", 1)[1].split("\n## ", 1)[0]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("from", "---") or set(cells[0]) <= {"-"}:
            continue
        for src in re.split(r",\s*", cells[0]):
            rows.add((src, cells[1], cells[2]))
    return rows


def test_the_docs_table_is_the_transition_table() -> None:
    table = {(src.name, trigger, dst.name) for src, trigger, dst in TRANSITIONS}
    assert _doc_rows() == table


def test_java_state_names() -> None:
    assert [s.name for s in MemberState] == [
        "UNSUBSCRIBED",
        "JOINING",
        "RECONCILING",
        "ACKNOWLEDGING",
        "STABLE",
        "FENCED",
        "PREPARE_LEAVING",
        "LEAVING",
        "FATAL",
        "STALE",
    ]


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (MemberState.UNSUBSCRIBED, MemberState.STABLE),
        (MemberState.JOINING, MemberState.STABLE),
        (MemberState.STABLE, MemberState.ACKNOWLEDGING),
        (MemberState.FATAL, MemberState.JOINING),
        (MemberState.LEAVING, MemberState.JOINING),
    ],
)
def test_illegal_transitions_raise(src: MemberState, dst: MemberState) -> None:
    with pytest.raises(LocalProtocolError, match="illegal transition"):
        check_transition(src, dst, "test")


def test_fatal_is_terminal() -> None:
    assert not [t for t in TRANSITIONS if t[0] is MemberState.FATAL]


def test_application_events_are_checked() -> None:
    with pytest.raises(LocalProtocolError):
        check_event(MemberState.LEAVING, Subscribe(topics=("foo",)))
    with pytest.raises(LocalProtocolError):
        check_event(MemberState.UNSUBSCRIBED, EnforceRebalance())
    check_event(MemberState.FATAL, Leave())


def test_a_member_without_topics_starts_unsubscribed() -> None:
    member = ConsumerMember(ConsumerMemberConfig(group_id="g", member_id="m", topics=()))
    assert member.state is MemberState.UNSUBSCRIBED
    assert member.poll(0) == []
    assert member.next_deadline_ms() is None
