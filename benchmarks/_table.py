"""The plain-text table every benchmark script prints."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, a dashed rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*heads), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(line.rstrip() for line in lines)
