"""A drill's report: ``report.json`` and a self-contained ``report.html`` (matplotlib PNGs inlined).

Three things a person looks at after an upgrade rehearsal:

* the **verdict table**: double-owned partitions, lost and duplicated records, the longest
  unowned stretch, rebalances, revocations, restores, and each phase's figures;
* the **ownership timeline**: one row per partition, one coloured bar per owner (a colour per
  worker), so a gap (white) or an overlap (a red mark where a partition was given to a second
  owner) stands out; the bounces are vertical lines;
* **throughput and lag**: records acknowledged and processed per second, and the backlog
  (acknowledged minus processed), with the bounces and every new group generation marked.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from streamtasks.drills.rolling import DrillResult
from streamtasks.errors import ConfigError

__all__ = ["render_html", "verdict_rows", "write_report"]


def verdict_rows(result: DrillResult) -> list[tuple[str, str, str]]:
    """``(measure, value, verdict)`` rows: verdict is ``ok``, ``FAIL`` or ``-`` (reported only)."""
    worst_gap = max(result.longest_unowned_ms.values(), default=0)
    rows = [
        ("double-owned partitions", str(result.double_owned), "ok" if result.double_owned == 0 else "FAIL"),
        ("input offsets acknowledged", f"{result.acknowledged:,}", "-"),
        ("lost records (never processed)", f"{result.lost:,}", "ok" if result.lost == 0 else "FAIL"),
        ("lost by a peer library (its worker committed past them)", f"{result.peer_lost:,}", "-"),
        ("duplicates (processed twice or more)", f"{result.duplicates:,}", "-"),
        ("longest unowned stretch", f"{worst_gap:,} ms", "-"),
        ("rebalances (generations seen)", str(result.rebalances), "-"),
        ("partitions revoked", str(result.revoked), "-"),
        ("restores completed", str(result.restores), "-"),
    ]
    if result.latest_checked:
        rows.append(
            ("keys with a wrong latest value", str(result.state_wrong_latest),
             "ok" if result.state_wrong_latest == 0 else "FAIL")
        )  # fmt: skip
    if result.state_checked:
        rows.append(
            ("keys counted short", str(result.state_counts_short),
             "ok" if result.state_counts_short == 0 else "FAIL")
        )  # fmt: skip
    if result.faults:
        rows.append(("members", result.members_client, "-"))
        for mark in result.faults:
            took = "never" if mark.resumed_ms is None else f"{mark.resumed_ms:,} ms"
            if mark.acked_ms is not None:
                took += f" (the cluster acknowledged again after {mark.acked_ms:,} ms)"
            rows.append((f"resumed after: {mark.label} (at {mark.at_s:.1f}s)", took, "-"))
        rows.append(("time until processing resumes", result.resume, "-"))
        rows.append(("lapsed assignments taken back (no rebalance)", str(len(result.taken_back)), "-"))
        for at_s, worker, generation, partitions in result.taken_back:
            took = f"generation/epoch {generation}, {partitions} partitions"
            rows.append((f"taken back by {worker} (at {at_s:.1f}s)", took, "-"))
    for problem in result.problems:
        rows.append(("problem", problem, "FAIL"))
    return rows


def _bounces(result: DrillResult) -> list[tuple[float, str]]:
    return [(t, label) for t, label in result.markers if not label.startswith("generation")]


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _ownership_png(result: DrillResult) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workers = sorted({w for _, w, _, _ in result.ownership})
    palette = plt.get_cmap("tab10")
    colour = {w: palette(i % 10) for i, w in enumerate(workers)}
    end = max(
        [e for _, _, _, e in result.ownership if e is not None] + [s for s, _, _ in result.samples] + [1.0]
    )
    fig, ax = plt.subplots(figsize=(11, 0.45 * result.partitions + 1.6))
    for p, w, start, stop in result.ownership:
        ax.broken_barh([(start, (end if stop is None else stop) - start)], (p - 0.38, 0.76), color=colour[w])
    for p, at in result.violation_marks:
        ax.plot([at], [p], marker="x", color="red", markersize=12, markeredgewidth=3)
    for t, label in _bounces(result):
        ax.axvline(t, color="black", linewidth=0.8, linestyle="--")
        short = label.split(":")[0]  # "bounce 1"; the phase table has the full names
        ax.text(t, 1.01, " " + short, ha="left", va="bottom", fontsize=8, transform=ax.get_xaxis_transform())
    ax.set_yticks(range(result.partitions))
    ax.set_yticklabels([f"p{p}" for p in range(result.partitions)])
    ax.set_ylim(-0.6, result.partitions - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, end)
    ax.set_xlabel("seconds since the drill started")
    ax.set_title(f"{result.drill}: who owned each partition (white = nobody, red x = a second owner)", pad=18)
    from matplotlib.patches import Patch

    handles = [Patch(color=colour[w]) for w in workers]
    ax.legend(handles, workers, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="worker", fontsize=8)
    data = _png(fig)
    plt.close(fig)
    return data


def _throughput_png(result: DrillResult) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s for s, _, _ in result.samples]
    acked = [a for _, a, _ in result.samples]
    done = [p for _, _, p in result.samples]

    def rate(values: list[int], window: int = 4) -> list[float]:
        """Records per second over the last ``window`` samples (about 2 s)."""
        out = []
        for i in range(len(values)):
            j = max(0, i - window)
            dt = t[i] - t[j]
            out.append((values[i] - values[j]) / dt if dt > 0 else 0.0)
        return out

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    top.plot(t, rate(acked), label="acknowledged by the broker", color="tab:blue", linewidth=1)
    top.plot(t, rate(done), label="processed", color="tab:green", linewidth=1)
    top.set_ylabel("records / s")
    top.legend(loc="upper right", fontsize=8)
    bottom.plot(t, [a - p for a, p in zip(acked, done, strict=True)], color="tab:orange", linewidth=1)
    bottom.set_ylabel("backlog (records)")
    bottom.set_xlabel("seconds since the drill started")
    for ax in (top, bottom):
        for s, label in result.markers:
            if label.startswith("generation"):
                ax.axvline(s, color="grey", linewidth=0.5, alpha=0.6)
            else:
                ax.axvline(s, color="black", linewidth=0.9, linestyle="--")
    top.set_title(f"{result.drill}: throughput and backlog (dashed: phases, grey: new generations)")
    data = _png(fig)
    plt.close(fig)
    return data


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}.ok{color:#070}"
    ".fail{color:#b00;font-weight:bold}img{max-width:100%}"
)


def render_html(result: DrillResult, images: dict[str, bytes]) -> str:
    """One HTML page, images inlined as data URIs."""
    verdict = "PASS" if result.ok else "FAIL"
    rows = "".join(
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td class='{c.lower()}'>{c}</td></tr>"
        for a, b, c in verdict_rows(result)
    )
    heads = ("phase", "seconds", "rebalances", "revoked", "longest unowned ms", "double-owned", "restores")
    phase_rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            p.name, p.seconds, p.rebalances, p.revoked, p.longest_unowned_ms, p.double_owned, p.restores
        )) + "</tr>"
        for p in result.phases
    )  # fmt: skip
    pictures = "".join(
        f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
        f"src='data:image/png;base64,{base64.b64encode(data).decode()}'>"
        for title, data in images.items()
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>streamtasks drill {html.escape(result.drill)}: {verdict}</title>
<style>{_STYLE}</style></head><body>
<h1>streamtasks drill <code>{html.escape(result.drill)}</code>: {verdict}</h1>
<p>{result.workers} workers, {result.partitions} partitions, {result.rate} records/s,
broker {html.escape(result.broker)}</p>
<h2>Verdict</h2><table><tr><th>measure</th><th>value</th><th>verdict</th></tr>{rows}</table>
<h2>Phases</h2><table><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr>{phase_rows}</table>
{pictures}
</body></html>
"""


def write_report(result: DrillResult, directory: str | Path) -> Path:
    """Write ``report.json``, the PNGs and ``report.html`` into ``directory``; returns the HTML path."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--report draws its plots with matplotlib: pip install 'streamtasks-kafka[drills]'"
        ) from None
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    images = {
        "Ownership timeline": _ownership_png(result),
        "Throughput and backlog": _throughput_png(result),
    }
    (out / "ownership.png").write_bytes(images["Ownership timeline"])
    (out / "throughput.png").write_bytes(images["Throughput and backlog"])
    page = out / "report.html"
    page.write_text(render_html(result, images))
    return page
