"""What upgrade_from / emulate_release pin (streamtasks.streams.wiring), shared by App and the
simulator's App model."""

from __future__ import annotations

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.streams import StreamsPartitionAssignor
from streamtasks.streams.wiring import (
    EagerStreamsPartitionAssignor,
    StreamsWire,
    streams_assignor_type,
    streams_wire,
)

EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE


@pytest.mark.parametrize(
    ("upgrade_from", "emulate_release", "wire"),
    [
        (
            None,
            None,
            StreamsWire(protocol=COOPERATIVE, metadata_version=None, latest_version=3, advertise_faust=False),
        ),
        (
            "0.1",
            None,
            StreamsWire(protocol=EAGER, metadata_version=1, latest_version=3, advertise_faust=False),
        ),
        (
            "0.2",
            None,
            StreamsWire(protocol=EAGER, metadata_version=2, latest_version=3, advertise_faust=False),
        ),
        (
            "0.3",
            None,
            StreamsWire(protocol=COOPERATIVE, metadata_version=2, latest_version=3, advertise_faust=False),
        ),
        (
            None,
            "0.3",
            StreamsWire(protocol=COOPERATIVE, metadata_version=None, latest_version=2, advertise_faust=False),
        ),
        (
            None,
            "0.2",
            StreamsWire(protocol=EAGER, metadata_version=None, latest_version=2, advertise_faust=False),
        ),
        (
            "faust",
            None,
            StreamsWire(protocol=EAGER, metadata_version=3, latest_version=3, advertise_faust=True),
        ),
    ],
)
def test_the_wire_each_setting_pins(
    upgrade_from: str | None, emulate_release: str | None, wire: StreamsWire
) -> None:
    assert streams_wire(upgrade_from, emulate_release) == wire


def test_unknown_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        streams_wire("0.9", None)
    with pytest.raises(ConfigError):
        streams_wire(None, "0.9")


def test_eager_wires_get_the_eager_pinned_assignor() -> None:
    assert streams_assignor_type(EAGER) is EagerStreamsPartitionAssignor
    assert streams_assignor_type(COOPERATIVE) is StreamsPartitionAssignor
