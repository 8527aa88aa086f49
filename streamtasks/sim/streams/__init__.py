"""The streams-group (KIP-1071) side of the simulator: the real streams coordinator and the real
sans-IO streams members in the shared :class:`~streamtasks.sim.world.World`
(``--protocol streams`` and ``streams-client``); see docs/simulation.md."""

from streamtasks.sim.streams.runner import (
    StreamsBatchSummary,
    run_streams_batch,
    run_streams_scenario,
    streams_scenario,
)
from streamtasks.sim.streams.side import MODES, StreamsRunResult, StreamsSettings, StreamsSide, streams_world

__all__ = [
    "MODES",
    "StreamsBatchSummary",
    "StreamsRunResult",
    "StreamsSettings",
    "StreamsSide",
    "run_streams_batch",
    "run_streams_scenario",
    "streams_scenario",
    "streams_world",
]
