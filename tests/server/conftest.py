"""Fixtures the server's live tests share."""

from __future__ import annotations

import pytest

from tests.integration.harness import JavaPeer, JavaPeerMissing, java_peer


@pytest.fixture(scope="module")
def peer() -> JavaPeer:
    """The Java ``KafkaConsumer`` peer, compiled once; the test is skipped where it cannot run."""
    try:
        compiled = java_peer()
    except JavaPeerMissing as exc:
        pytest.skip(f"the Java consumer peer cannot run here: {exc}")
    return compiled
