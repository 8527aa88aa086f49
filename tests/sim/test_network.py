"""The simulated network: delays within the profile, FIFO links, loss, duplication, cuts."""

from __future__ import annotations

import random

import pytest

from streamtasks.errors import ConfigError
from streamtasks.sim.network import LinkProfile, Network


def test_links_are_fifo_and_delays_stay_in_the_profile() -> None:
    net = Network(random.Random(1), LinkProfile(min_delay_ms=1, max_delay_ms=50))
    times = [net.transmit("m", "up", now)[0] for now in range(0, 100, 2)]
    assert times == sorted(times)
    assert all(t >= now + 1 for t, now in zip(times, range(0, 100, 2), strict=True))


def test_same_seed_same_deliveries() -> None:
    profile = LinkProfile(min_delay_ms=1, max_delay_ms=30, loss=0.2, duplication=0.2)
    runs = []
    for _ in range(2):
        net = Network(random.Random(42), profile)
        runs.append([net.transmit("m", "down", t) for t in range(0, 500, 5)])
    assert runs[0] == runs[1]
    flat = runs[0]
    assert any(not d for d in flat)  # some lost
    assert any(len(d) == 2 for d in flat)  # some duplicated


def test_a_partition_drops_messages_sent_and_in_flight() -> None:
    net = Network(random.Random(3))
    assert net.transmit("m", "up", 0)
    net.partition("m", until_ms=1_000)
    assert net.transmit("m", "up", 10) == []
    assert not net.arrives("m", 500)
    assert net.transmit("other", "up", 10)
    assert net.arrives("m", 1_000)
    assert not net.faults_active(1_000)


def test_degraded_profile_applies_until_its_end() -> None:
    net = Network(random.Random(5))
    lossy = LinkProfile(loss=0.99)
    net.degrade(lossy, until_ms=100)
    assert net.profile(50) == lossy
    assert net.profile(100) == net.default


def test_bad_profiles_are_rejected() -> None:
    with pytest.raises(ConfigError):
        LinkProfile(min_delay_ms=5, max_delay_ms=1)
    with pytest.raises(ConfigError):
        LinkProfile(loss=1.0)
