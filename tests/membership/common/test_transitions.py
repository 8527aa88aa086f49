"""The transition table as h11 keys it: (state, trigger) -> next state; the table decides."""

from __future__ import annotations

import enum

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import MemberState as Classic
from streamtasks.membership.classic.transitions import TABLE as CLASSIC
from streamtasks.membership.common import Leave, Subscribe, Transitions
from streamtasks.membership.consumer import MemberState as Consumer
from streamtasks.membership.consumer.transitions import TABLE as CONSUMER


class Light(enum.Enum):
    RED = "red"
    GREEN = "green"
    BROKEN = "broken"


ROWS = (
    (Light.RED, "go", Light.GREEN),
    (Light.GREEN, "stop", Light.RED),
    (Light.RED, "fault", Light.BROKEN),
    (Light.GREEN, "fault", Light.BROKEN),
)


def test_the_table_names_the_next_state() -> None:
    table = Transitions(ROWS, {})
    assert table.next_state(Light.RED, "go") is Light.GREEN
    assert table.next_state(Light.GREEN, "fault") is Light.BROKEN


def test_a_pair_outside_the_table_raises() -> None:
    table = Transitions(ROWS, {})
    with pytest.raises(LocalProtocolError, match=r"illegal transition from GREEN \(go\)"):
        table.next_state(Light.GREEN, "go")
    with pytest.raises(LocalProtocolError, match="illegal transition"):
        table.next_state(Light.BROKEN, "stop")


def test_one_pair_leading_to_two_states_is_refused() -> None:
    with pytest.raises(ValueError, match="two states"):
        Transitions((*ROWS, (Light.RED, "go", Light.BROKEN)), {})


def test_application_events_are_checked_per_state() -> None:
    table = Transitions(ROWS, {Leave: frozenset({Light.RED})})
    table.check_event(Light.RED, Leave())
    table.check_event(Light.BROKEN, Subscribe(topics=("t",)))  # not named: legal everywhere
    with pytest.raises(LocalProtocolError, match="Leave is not allowed in state GREEN"):
        table.check_event(Light.GREEN, Leave())


@pytest.mark.parametrize("table", [CLASSIC, CONSUMER], ids=["classic", "consumer"])
def test_every_protocol_row_is_a_lookup(table: Transitions[Classic] | Transitions[Consumer]) -> None:
    for src, trigger, dst in table.rows:
        assert table.next_state(src, trigger) is dst


def test_the_classic_fence_while_leaving_has_its_own_row() -> None:
    assert CLASSIC.next_state(Classic.LEAVING, "fenced: partitions lost, left") is Classic.CLOSED
    with pytest.raises(LocalProtocolError):
        CLASSIC.next_state(Classic.LEAVING, "fenced: partitions lost")


def test_a_stale_member_whose_poll_timer_expires_again_stays_stale() -> None:
    trigger = "poll timer expired: partitions lost, left"
    assert CONSUMER.next_state(Consumer.STALE, trigger) is Consumer.STALE
