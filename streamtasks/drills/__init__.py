"""Drills: live and simulated exercises of a group (rolling bounces, crashes) and their audits."""

import warnings
from typing import Any

from streamtasks.drills.ledger import DoubleOwnership, LedgerReport, OwnershipAudit, RecordAudit

__all__ = ["DoubleOwnership", "LedgerReport", "OwnershipAudit", "RecordAudit"]


def __getattr__(name: str) -> Any:
    # Deprecated: the live drills' audit was also called OwnershipLedger, the simulator's
    # ledger's name (streamtasks.sim.OwnershipLedger).
    if name == "OwnershipLedger":
        warnings.warn(
            "streamtasks.drills.OwnershipLedger is deprecated: use streamtasks.drills.OwnershipAudit",
            DeprecationWarning,
            stacklevel=2,
        )
        return OwnershipAudit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
