"""The KIP-848 simulator: the real coordinator and member machines over the simulated network
(``python -m streamtasks.sim --protocol consumer|consumer-client``); see docs/simulation.md."""

from streamtasks.sim.kip848.runner import ConsumerBatchSummary, run_consumer_batch, run_consumer_scenario
from streamtasks.sim.kip848.side import (
    CLIENT,
    MODES,
    SERVER,
    ConsumerRunResult,
    ConsumerSettings,
    ConsumerSide,
    consumer_world,
)

__all__ = [
    "CLIENT",
    "MODES",
    "SERVER",
    "ConsumerBatchSummary",
    "ConsumerRunResult",
    "ConsumerSettings",
    "ConsumerSide",
    "run_consumer_batch",
    "consumer_world",
    "run_consumer_scenario",
]
