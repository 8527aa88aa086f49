"""The KIP-848 simulator: the real coordinator and member machines over the simulated network
(``python -m streamtasks.sim --protocol consumer|consumer-client``); see docs/simulation.md."""

from streamtasks.sim.kip848.runner import ConsumerBatchSummary, run_consumer_batch, run_consumer_scenario
from streamtasks.sim.kip848.world import (
    CLIENT,
    MODES,
    SERVER,
    ConsumerRunResult,
    ConsumerSettings,
    ConsumerWorld,
)

__all__ = [
    "CLIENT",
    "MODES",
    "SERVER",
    "ConsumerBatchSummary",
    "ConsumerRunResult",
    "ConsumerSettings",
    "ConsumerWorld",
    "run_consumer_batch",
    "run_consumer_scenario",
]
