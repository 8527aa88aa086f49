"""The sweep's report: ``DIR/summary.json`` and a self-contained ``DIR/report.html``.

Per point (one combination of the grid's dimensions): scenarios, violations, and p50 / p99 /
mean of each cost per membership change. The HTML embeds matplotlib PNGs (base64): cost against
group size per protocol and assignor on log axes, one figure per drill; p50 and p99 of
unavailability per membership change; then every violation with its replay command.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamtasks.sweeps.grid import DIMENSIONS, Grid

__all__ = ["COSTS", "percentile", "summarise", "write_report"]

#: (column, label) of the per-change costs the report plots and summarises.
COSTS: tuple[tuple[str, str], ...] = (
    ("rebalances_per_change", "rebalances per membership change"),
    ("moved_per_change", "partitions moved per membership change"),
    ("unowned_ms_per_change", "unowned partition-s per membership change"),
)
#: Plotted values are the column's times this (ms to s).
PLOT_SCALE = {"unowned_ms_per_change": 0.001}
#: Columns summarised per point (p50, p99, mean).
FIGURES = (
    "rebalances",
    "rebalances_per_change",
    "partitions_revoked",
    "partitions_moved",
    "moved_per_change",
    "converge_ms",
    "unowned_ms_per_change",
    "longest_unowned_ms",
    "warm_handovers",
    "restore_records",
    "coordinator_records",
    "events",
)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0-100) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def _series(row: dict[str, Any]) -> str:
    return f"{row['protocol']} / {row['assignor']}" + (
        f" / {row['standbys']} standby" if row["standbys"] else ""
    )


def summarise(rows: Sequence[dict[str, Any]], grid: Grid | None = None) -> dict[str, Any]:
    """The content of ``summary.json``."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[d] for d in DIMENSIONS)].append(row)
    points = []
    for key in sorted(groups, key=lambda k: tuple(str(v).zfill(12) for v in k)):
        members = groups[key]
        entry: dict[str, Any] = dict(zip(DIMENSIONS, key, strict=True))
        entry["scenarios"] = len(members)
        entry["violations"] = sum(1 for r in members if r["violations"])
        for column in FIGURES:
            values = [float(r[column]) for r in members if r[column] is not None]
            if values:
                entry[column] = {
                    "p50": round(percentile(values, 50), 3),
                    "p99": round(percentile(values, 99), 3),
                    "mean": round(sum(values) / len(values), 3),
                }
        points.append(entry)
    failures = [
        {
            **{d: r[d] for d in DIMENSIONS},
            "seed": r["seed"],
            "violation": r["violation"],
            "replay": r["replay"],
        }
        for r in rows
        if r["violations"]
    ]
    return {
        "grid": None if grid is None else grid.model_dump(mode="json"),
        "scenarios": len(rows),
        "scenarios_with_violations": len(failures),
        "events_simulated": sum(int(r["events"]) for r in rows),
        "points": points,
        "failures": failures,
    }


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _log_axes(ax: Any, sizes: Sequence[int]) -> None:
    """Log x and y with plain numbers on the ticks: the group sizes on x, 1-2-5 steps on y."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.3g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(sizes))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", alpha=0.3)


def _cost_figures(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """Per drill: the median of each cost against group size, one line per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    for drill in sorted({r["drill"] for r in rows}):
        mine = [r for r in rows if r["drill"] == drill]
        series = sorted({_series(r) for r in mine})
        fig, axes = plt.subplots(1, len(COSTS), figsize=(5.2 * len(COSTS), 4.4))
        for ax, (column, label) in zip(axes, COSTS, strict=True):
            for i, name in enumerate(series):
                by_size: dict[int, list[float]] = defaultdict(list)
                for r in mine:
                    if _series(r) == name:
                        by_size[int(r["members"])].append(float(r[column]) * PLOT_SCALE.get(column, 1.0))
                sizes = sorted(by_size)
                medians = [percentile(by_size[s], 50) for s in sizes]
                medians = [m if m > 0 else float("nan") for m in medians]
                ax.plot(
                    sizes,
                    medians,
                    marker="os^vD<>p*h"[i % 10],
                    linestyle=("-", "--", "-.", ":")[i % 4],
                    markersize=7 - (i % 3),
                    linewidth=1.8,
                    alpha=0.85,
                    label=name,
                )
            _log_axes(ax, sorted({int(r["members"]) for r in mine}))
            ax.set_xlabel("members (log scale)")
            ax.set_title(label, fontsize=11)
        axes[0].set_ylabel("median over seeds (log scale; zeros not drawn)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            labels,
            loc="lower center",
            ncol=min(4, len(labels)),
            frameon=False,
            bbox_to_anchor=(0.5, -0.08 - 0.05 * (len(labels) // 5)),
        )
        fig.suptitle(
            f"{drill}: cost against group size (partitions: "
            f"{', '.join(str(p) for p in sorted({r['partitions'] for r in mine}))})",
            fontsize=12,
        )
        fig.tight_layout()
        out.append((f"{drill}: cost against group size", _png(fig)))
        plt.close(fig)
    return out


def _unavailability_figure(rows: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """p50 and p99 of unowned partition-seconds per membership change, per drill and series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drills = sorted({r["drill"] for r in rows})
    fig, axes = plt.subplots(len(drills), 1, figsize=(10, 3.2 * len(drills) + 0.6), squeeze=False)
    for ax, drill in zip(axes[:, 0], drills, strict=True):
        mine = [r for r in rows if r["drill"] == drill]
        series = sorted({_series(r) for r in mine})
        per_series = [
            [float(r["unowned_ms_per_change"]) / 1000 for r in mine if _series(r) == s] for s in series
        ]
        p50 = [percentile(values, 50) for values in per_series]
        p99 = [percentile(values, 99) for values in per_series]
        ys = range(len(series))
        ax.barh([y - 0.2 for y in ys], p50, height=0.4, label="p50", color="#4C72B0")
        ax.barh([y + 0.2 for y in ys], p99, height=0.4, label="p99", color="#DD8452")
        for y, a, b in zip(ys, p50, p99, strict=True):
            ax.text(a, y - 0.2, f" {a:,.1f}", va="center", fontsize=9)
            ax.text(b, y + 0.2, f" {b:,.1f}", va="center", fontsize=9)
        ax.set_xlim(0, max([*p99, 1.0]) * 1.15)
        ax.set_yticks(list(ys), series)
        ax.invert_yaxis()
        ax.set_title(
            f"{drill}: unowned partition-seconds per membership change (all group sizes)", fontsize=11
        )
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(loc="lower right")
    axes[-1, 0].set_xlabel(
        "partition-seconds without an owner per membership change (p50, p99 over scenarios)"
    )
    fig.tight_layout()
    png = _png(fig)
    plt.close(fig)
    return "unavailability per membership change (p50, p99)", png


def _table(headers: Sequence[str], body: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _fmt(entry: dict[str, Any], column: str, q: str = "p50") -> str:
    value = entry.get(column)
    if not isinstance(value, dict):
        return "–"
    v = value[q]
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


def write_report(out: Path, rows: Sequence[dict[str, Any]], grid: Grid | None = None) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.html`` under ``out``; returns the summary."""
    summary = summarise(rows, grid)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    figures = [*_cost_figures(rows), _unavailability_figure(rows)] if rows else []
    points_table = _table(
        [
            *DIMENSIONS,
            "scenarios",
            "violations",
            "rebalances/change p50",
            "moved/change p50",
            "unowned ms/change p50",
            "p99",
            "longest unowned ms p99",
            "converge ms p99",
            "restore records p50",
            "coordinator records p50",
        ],
        [
            [
                *(p[d] for d in DIMENSIONS),
                p["scenarios"],
                p["violations"],
                _fmt(p, "rebalances_per_change"),
                _fmt(p, "moved_per_change"),
                _fmt(p, "unowned_ms_per_change"),
                _fmt(p, "unowned_ms_per_change", "p99"),
                _fmt(p, "longest_unowned_ms", "p99"),
                _fmt(p, "converge_ms", "p99"),
                _fmt(p, "restore_records"),
                _fmt(p, "coordinator_records"),
            ]
            for p in summary["points"]
        ],
    )
    failures = (
        _table(
            ["point", "seed", "violation", "replay"],
            [
                ["/".join(f"{d}={f[d]}" for d in DIMENSIONS), f["seed"], f["violation"], f["replay"]]
                for f in summary["failures"]
            ],
        )
        if summary["failures"]
        else "<p>No invariant was violated in any scenario.</p>"
    )
    name = html.escape(grid.name if grid is not None else "sweep")
    images = "".join(
        f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" src="data:image/png;base64,{png}">'
        for title, png in figures
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>streamtasks sweep: {name}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 3px 7px; text-align: right; }}
th {{ background: #f2f2f2; }} td:nth-child(-n+7) {{ text-align: left; }}
img {{ max-width: 100%; border: 1px solid #eee; margin: 0.5em 0 1.5em; }}
code {{ background: #f5f5f5; padding: 1px 3px; }}
</style></head><body>
<h1>streamtasks sweep: {name}</h1>
<p>{summary["scenarios"]:,} scenarios, {summary["events_simulated"]:,} events simulated,
<b>{summary["scenarios_with_violations"]} with invariant violations</b>.
Costs are the drill's own (the group's formation subtracted); unowned time is counted from the
drill's start. Rows: <code>rows/</code> (Parquet, one directory per dimension).</p>
<h2>Violations</h2>{failures}
{images}
<h2>Per point</h2>{points_table}
</body></html>
"""
    (out / "report.html").write_text(page)
    return summary
