"""What the server advertises for TxnOffsetCommit: the versions both it and the backing broker
read, and nothing when the broker has no transactions to forward to."""

from __future__ import annotations

from streamtasks.server.api_versions import REFUSED_APIS, advertised_apis
from streamtasks.server.txn_api import TXN_OFFSET_COMMIT


def test_txn_offset_commit_is_advertised_at_the_versions_the_broker_also_serves() -> None:
    assert TXN_OFFSET_COMMIT not in REFUSED_APIS
    assert advertised_apis({18: (0, 4), TXN_OFFSET_COMMIT: (0, 5)})[TXN_OFFSET_COMMIT] == (0, 5)
    assert advertised_apis({18: (0, 4), TXN_OFFSET_COMMIT: (0, 3)})[TXN_OFFSET_COMMIT] == (0, 3)
    assert advertised_apis({18: (0, 4), TXN_OFFSET_COMMIT: (0, 7)})[TXN_OFFSET_COMMIT] == (0, 5)


def test_txn_offset_commit_is_left_out_when_the_broker_has_no_transactions() -> None:
    assert TXN_OFFSET_COMMIT not in advertised_apis({18: (0, 4)})
