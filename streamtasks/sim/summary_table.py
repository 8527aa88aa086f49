"""The summary table the CLI prints (and its JSON form)."""

from __future__ import annotations

from collections.abc import Sequence

from streamtasks.sim.runner import BatchSummary

__all__ = ["ROWS", "format_table"]

#: (label, key in ``BatchSummary.as_dict()``) in table order.
ROWS: tuple[tuple[str, str], ...] = (
    ("scenarios", "scenarios"),
    ("events", "events"),
    ("messages", "messages"),
    ("simulated seconds", "simulated_seconds"),
    ("violations", "violations"),
    ("membership changes", "membership_changes"),
    ("rebalances", "rebalances"),
    ("rebalances / membership change", "rebalances_per_membership_change"),
    ("partitions revoked", "partitions_revoked"),
    ("revoked / membership change", "revoked_per_membership_change"),
    ("partitions lost", "partitions_lost"),
    ("partitions moved", "partitions_moved"),
    ("moved / membership change", "moved_per_membership_change"),
    ("revoked, then returned", "revoked_then_returned"),
    ("partition-s without owner", "partition_seconds_without_owner"),
    ("unowned partition-s / change", "unowned_partition_seconds_per_membership_change"),
    ("handovers without commit", "handovers_without_commit"),
    ("KIP-814 unmonitored partitions", "kip814_unmonitored_partitions"),
    ("lapsed assignments taken back", "lapsed_assignments_taken_back"),
    ("max ms to converge after last step", "max_ms_to_converge_after_last_step"),
    ("max rebalances after last step", "max_rebalances_after_last_step"),
)


def format_table(summaries: Sequence[BatchSummary]) -> str:
    """One column per summary (protocol), one row per figure."""
    data = [s.as_dict() for s in summaries]
    headers = ["", *(str(d["protocol"]) for d in data)]
    rows = [[label, *(_fmt(d[key]) for d in data)] for label, key in ROWS]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    faults = sorted({",".join(s.faults) or "none" for s in summaries})
    lines = [
        f"faults: {'; '.join(faults)}; seeds from {summaries[0].seed_base if summaries else 0}",
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        ),
    ]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 1_000 else f"{value:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
