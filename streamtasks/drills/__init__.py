"""Drills: live and simulated exercises of a group (rolling bounces, crashes) and their audits."""

from streamtasks.drills.ledger import DoubleOwnership, LedgerReport, OwnershipLedger, RecordAudit

__all__ = ["DoubleOwnership", "LedgerReport", "OwnershipLedger", "RecordAudit"]
