"""``python -m streamtasks.sim``: run seeded scenarios and print a summary.

Examples::

    python -m streamtasks.sim --protocol cooperative --seeds 200 --faults all
    python -m streamtasks.sim --protocol both --seeds 1000 --same-assignor --json
    python -m streamtasks.sim --protocol eager --seeds 1 --seed-base 4242   # replay one seed
    python -m streamtasks.sim --protocol consumer-client --seeds 1000 --json  # KIP-848, client-side
    python -m streamtasks.sim --protocol mixed --seeds 200   # classic and KIP-848 members, one group

Progress goes to stderr; the table (or ``--json``) to stdout. The exit status is 1 when any
scenario violated an invariant (each failure is printed with its seed, the minimal scenario
that still fails and the end of its event trace).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.sim.report import format_table
from streamtasks.sim.runner import SAME_ASSIGNOR, BatchSummary, run_batch
from streamtasks.sim.scenario import FAULT_KINDS, Timeouts, parse_faults

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m streamtasks.sim", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--protocol",
        choices=("eager", "cooperative", "both", "consumer", "consumer-client", "mixed"),
        default="both",
        help="classic (eager, cooperative, both) or KIP-848: consumer (server-side uniform), "
        "consumer-client (client-side, streams assignor with standbys), mixed (classic and "
        "KIP-848 members in one group on streamtasks' coordinator)",
    )
    p.add_argument("--seeds", type=int, default=100, help="number of scenarios (one per seed)")
    p.add_argument("--seed-base", type=int, default=0, help="first seed")
    p.add_argument(
        "--faults",
        default="all",
        help=f"'all', 'none' or a comma-separated subset of {','.join(FAULT_KINDS)} (default: all)",
    )
    p.add_argument(
        "--same-assignor",
        action="store_true",
        help="use cooperative_sticky under both protocols (eager via 'cooperative_sticky,range')",
    )
    p.add_argument(
        "--static-session-ms",
        type=int,
        default=None,
        help="session timeout of static members (default: the 10 s every member uses; the "
        "rebalance timeout is 15 s)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-shrink", action="store_true", help="report failures without shrinking them")
    p.add_argument("--progress-every", type=int, default=100, help="scenarios between progress lines")
    p.add_argument("--trace-lines", type=int, default=60, help="trace lines printed per failure")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        faults = parse_faults(args.faults)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print("error: --seeds must be >= 1", file=sys.stderr)
        return 2
    if args.protocol in ("consumer", "consumer-client", "mixed"):
        return _kip848(args, faults)
    protocols = (
        [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE]
        if args.protocol == "both"
        else [RebalanceProtocol[args.protocol.upper()]]
    )
    seeds = range(args.seed_base, args.seed_base + args.seeds)
    summaries: list[BatchSummary] = []
    for protocol in protocols:

        def progress(s: BatchSummary, total: int = args.seeds) -> None:
            print(
                f"[{s.protocol.name.lower()}] {s.scenarios}/{total} scenarios, {s.events:,} events, "
                f"{s.violations} violations",
                file=sys.stderr,
                flush=True,
            )

        summaries.append(
            run_batch(
                protocol,
                seeds,
                faults=faults,
                assignors=SAME_ASSIGNOR[protocol] if args.same_assignor else None,
                timeouts=Timeouts(static_session_ms=args.static_session_ms)
                if args.static_session_ms
                else None,
                shrink_failures=not args.no_shrink,
                progress=progress,
                progress_every=max(args.progress_every, 1),
            )
        )
    if args.json:
        print(json.dumps({"runs": [s.as_dict() for s in summaries]}, indent=2))
    else:
        print(format_table(summaries))
        for s in summaries:
            for failure in s.failures:
                head, *rest = failure.report().split("\n")
                print("\n" + head)
                trace_at = rest.index("trace (last events):") if "trace (last events):" in rest else len(rest)
                print("\n".join(rest[:trace_at]))
                tail = rest[trace_at + 1 :][-args.trace_lines :]
                if tail:
                    print("trace (last events):")
                    print("\n".join(tail))
    return 1 if any(s.violations for s in summaries) else 0


def _kip848(args: argparse.Namespace, faults: frozenset[str]) -> int:
    """``--protocol consumer|consumer-client|mixed``: the KIP-848 simulator (``streamtasks.sim.kip848``)."""
    from streamtasks.sim.kip848 import run_consumer_batch

    def progress(s: object, total: int = args.seeds) -> None:
        done = getattr(s, "scenarios", 0)
        print(
            f"[{args.protocol}] {done}/{total} scenarios, {getattr(s, 'events', 0):,} events, "
            f"{getattr(s, 'violations', 0)} violations",
            file=sys.stderr,
            flush=True,
        )

    summary = run_consumer_batch(
        args.protocol,
        range(args.seed_base, args.seed_base + args.seeds),
        faults=faults,
        shrink_failures=not args.no_shrink,
        progress=progress,
        progress_every=max(args.progress_every, 1),
    )
    if args.json:
        print(json.dumps({"runs": [summary.as_dict()], "violations": summary.violations}, indent=2))
    else:
        print(summary.table())
        for failure in summary.failures:
            lines = failure.report().split("\n")
            print("\n" + "\n".join(lines[: 4 + failure.minimal_steps + args.trace_lines]))
    return 1 if summary.violations else 0


if __name__ == "__main__":
    sys.exit(main())
