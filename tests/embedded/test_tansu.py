"""The Tansu broker: it stops cleanly, dies with its parent, and says when its binary is missing."""

from __future__ import annotations

import os

import pytest

from streamtasks.embedded import BOOTSTRAP_ENV, EmbeddedBroker, broker_binary
from streamtasks.errors import BrokerError
from tests.embedded.procs import alive, broker_outlives_killed_parent, wait_gone

own_broker = pytest.mark.skipif(bool(os.environ.get(BOOTSTRAP_ENV)), reason="uses its own embedded broker")


@pytest.mark.integration
@own_broker
def test_stop_ends_the_process_and_frees_the_port() -> None:
    broker = EmbeddedBroker().start()
    pid = broker.pid
    assert pid is not None
    assert alive(pid)
    broker.stop()
    broker.stop()  # idempotent
    assert not broker.running
    assert wait_gone(pid, 5)
    with pytest.raises(BrokerError):
        broker.api_versions()


@pytest.mark.integration
@own_broker
def test_broker_dies_with_a_parent_killed_by_sigkill() -> None:
    assert not broker_outlives_killed_parent("EmbeddedBroker().start()"), (
        "Tansu outlived its kill -9'd parent"
    )


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTASKS_TANSU_BIN", "/nonexistent/tansu")
    with pytest.raises(BrokerError, match="STREAMTASKS_TANSU_BIN"):
        broker_binary()
