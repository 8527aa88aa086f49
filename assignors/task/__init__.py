"""The built-in task assignors (KIP-924 shaped): ``high_availability`` (KIP-441), ``sticky`` and
``fallback_prior``, and the measures of an assignment the tests and benchmarks use."""

from assignors.task.fallback_prior import FallbackPriorTaskAssignor
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.quality import active_spread, colocated_standbys, moved_actives, warmup_count
from assignors.task.sticky import StickyTaskAssignor

__all__ = [
    "FallbackPriorTaskAssignor",
    "HighAvailabilityTaskAssignor",
    "StickyTaskAssignor",
    "active_spread",
    "colocated_standbys",
    "moved_actives",
    "warmup_count",
]
