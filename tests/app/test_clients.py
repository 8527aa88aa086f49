"""The App's exactly-once precondition (``require_transactional_commits``): a bootstrap server
that does not advertise TxnOffsetCommit v3+ (a ``streamtasks coordinator`` before it served it, a
proxy that drops it) stops the App at start with one error naming the server and the cause, not
an abort at every commit. The coordinator that serves it: tests/server/test_streams_migration_live.py."""

from __future__ import annotations

import asyncio

import pytest

from streamtasks.app.clients import require_transactional_commits
from streamtasks.app.config import make_app_config
from streamtasks.errors import BrokerError
from tests.runtime.test_consumer_driver import _api_versions_server


def test_a_server_without_txn_offset_commit_is_refused_naming_it_and_the_way_out() -> None:
    async def run() -> str:
        server = await asyncio.start_server(_api_versions_server(None), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cfg = make_app_config(
            application_id="a",
            bootstrap_servers=f"127.0.0.1:{port}",
            processing_guarantee="exactly_once_v2",
        )
        try:
            with pytest.raises(BrokerError) as refused:
                await require_transactional_commits(cfg)
        finally:
            server.close()
        return str(refused.value)

    said = asyncio.run(run())
    assert "does not serve TxnOffsetCommit (API key 28, v3 needed)" in said
    assert "at_least_once" in said
