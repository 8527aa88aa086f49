"""``streamtasks sim`` (also ``python -m streamtasks.sim``): run seeded scenarios and print a summary.

Examples::

    streamtasks sim --protocol cooperative --seeds 200 --faults all
    streamtasks sim --protocol both --seeds 1000 --same-assignor --json
    streamtasks sim --protocol eager --seeds 1 --seed-base 4242   # replay one seed
    streamtasks sim --protocol consumer-client --seeds 1000 --json  # KIP-848, client-side
    streamtasks sim --protocol mixed --seeds 200   # classic and KIP-848 members, one group
    streamtasks sim --soak 10                 # every protocol on fresh seeds for 10 minutes
    streamtasks sim --protocol streams,streams-client --seeds 200   # KIP-1071 streams groups

Progress goes to stderr; the table (or ``--json``) to stdout. The exit status is 1 when any
scenario violated an invariant (each failure is printed with its seed, the minimal scenario
that still fails and the end of its event trace; a soak prints its replay command), 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.sim.runner import SAME_ASSIGNOR, BatchSummary, run_batch
from streamtasks.sim.scenario import FAULT_KINDS, Timeouts, parse_faults
from streamtasks.sim.soak import (
    DEFAULT_CHUNK,
    ChunkExecutor,
    ChunkResult,
    InlineExecutor,
    PoolExecutor,
    SoakPlan,
    SoakSummary,
    parse_protocols,
    progress_line,
    run_soak,
)
from streamtasks.sim.summary_table import format_table

__all__ = ["add_sim_arguments", "main", "run_sim"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m streamtasks.sim", description=__doc__.split("\n\n")[0])
    add_sim_arguments(p)
    return p


def add_sim_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``streamtasks sim`` and ``python -m streamtasks.sim`` (the same command)."""
    p.add_argument(
        "--protocol",
        default=None,
        help="classic (eager, cooperative, both: the two on the same seeds; the default) or "
        "KIP-848: consumer (server-side uniform), consumer-client (client-side, streams assignor "
        "with standbys), mixed (classic and KIP-848 members in one group on streamtasks' "
        "coordinator), or KIP-1071: streams (streams coordinator, sticky task assignor), "
        "streams-client (high_availability with warm-ups); 'streams,streams-client' runs both on "
        "the same seeds. With --soak: 'all' (the default: eager, cooperative, consumer, "
        "consumer-client, mixed, streams, streams-client) or a comma-separated list; 'both' "
        "adds nothing there (a soak runs eager and cooperative anyway, each on fresh seeds) and "
        "means eager,cooperative",
    )
    p.add_argument("--seeds", type=int, default=None, help="number of scenarios (one per seed; default 100)")
    p.add_argument(
        "--seed-base",
        type=int,
        default=None,
        help="first seed (default 0); with --soak, the seed the chunks' bases are drawn from "
        "(default: a fresh random one, printed, so the same bases can be drawn again)",
    )
    p.add_argument(
        "--soak",
        type=float,
        default=None,
        metavar="MINUTES",
        help="run every --protocol on fresh random seeds until MINUTES have passed, in chunks "
        "round-robin over the protocols; prints each failing seed's replay command (default: none, "
        "one batch of --seeds)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=None,
        help=f"--soak: seeds per chunk (default {DEFAULT_CHUNK}; smaller near the end of the time)",
    )
    p.add_argument(
        "--jobs", type=int, default=None, help="--soak: chunks run at once, in worker processes (default 1)"
    )
    p.add_argument(
        "--shrink",
        action="store_true",
        help="--soak: shrink each failure to a minimal scenario (slow; by default only its replay "
        "command is printed)",
    )
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


_BATCH_PROTOCOLS = ("eager", "cooperative", "both", "consumer", "consumer-client", "mixed")


def main(argv: Sequence[str] | None = None) -> int:
    return run_sim(_parser().parse_args(argv))


def run_sim(args: argparse.Namespace) -> int:
    """Run what the flags of :func:`add_sim_arguments` ask for; the exit status."""
    try:
        faults = parse_faults(args.faults)
        if args.soak is None and _streams_protocols(args.protocol):
            return _streams(args, faults)
        soak = _soak_plan(args, faults) if args.soak is not None else None
        if soak is None:
            _check_batch(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if soak is not None:
        return _soak(soak, args.jobs or 1, as_json=args.json)
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


def _progress(label: str, total: int) -> Callable[[object], None]:
    """A batch's progress line on stderr (the KIP-848 and streams-group batches)."""

    def progress(s: object) -> None:
        print(
            f"[{label}] {getattr(s, 'scenarios', 0)}/{total} scenarios, {getattr(s, 'events', 0):,} events, "
            f"{getattr(s, 'violations', 0)} violations",
            file=sys.stderr,
            flush=True,
        )

    return progress


def _kip848(args: argparse.Namespace, faults: frozenset[str]) -> int:
    """``--protocol consumer|consumer-client|mixed``: the KIP-848 simulator (``streamtasks.sim.kip848``)."""
    from streamtasks.sim.kip848 import run_consumer_batch

    progress = _progress(args.protocol, args.seeds)
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


def _streams_protocols(text: str | None) -> tuple[str, ...]:
    """``--protocol streams``, ``streams-client`` or both, comma-separated (else empty)."""
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    return names if names and all(n in ("streams", "streams-client") for n in names) else ()


def _streams(args: argparse.Namespace, faults: frozenset[str]) -> int:
    """``--protocol streams[,streams-client]``: the streams-group simulator
    (``streamtasks.sim.streams``), one batch per protocol on the same seeds (``--jobs`` 1)."""
    from streamtasks.sim.streams import run_streams_batch

    if args.jobs not in (None, 1):
        raise ConfigError("--protocol streams runs in one process (--jobs 1)")
    seeds = range(args.seed_base or 0, (args.seed_base or 0) + (100 if args.seeds is None else args.seeds))
    summaries = []
    for mode in _streams_protocols(args.protocol):
        progress = _progress(mode, len(seeds))
        summaries.append(
            run_streams_batch(
                mode,
                seeds,
                faults=faults,
                shrink_failures=not args.no_shrink,
                progress=progress,
                progress_every=max(args.progress_every, 1),
            )
        )
    if args.json:
        print(json.dumps({"runs": [s.as_dict() for s in summaries]}, indent=2))
    else:
        for summary in summaries:
            print(summary.table())
            for failure in summary.failures:
                lines = failure.report().split("\n")
                print("\n" + "\n".join(lines[: 4 + failure.minimal_steps + args.trace_lines]))
    return 1 if any(s.violations for s in summaries) else 0


def _check_batch(args: argparse.Namespace) -> None:
    """Defaults and checks of a batch (no ``--soak``)."""
    for flag, value in (("--chunk", args.chunk), ("--jobs", args.jobs), ("--shrink", args.shrink or None)):
        if value is not None:
            raise ConfigError(f"{flag} applies to --soak only")
    args.protocol = args.protocol or "both"
    if args.protocol not in _BATCH_PROTOCOLS:
        raise ConfigError(
            f"unknown protocol {args.protocol!r}; choose from {', '.join(_BATCH_PROTOCOLS)} "
            "('all' and lists of protocols need --soak)"
        )
    args.seeds = 100 if args.seeds is None else args.seeds
    if args.seeds < 1:
        raise ConfigError("--seeds must be >= 1")
    args.seed_base = args.seed_base or 0


def _soak_plan(args: argparse.Namespace, faults: frozenset[str]) -> SoakPlan:
    """``--soak``'s arguments checked; the seed base drawn from the system's entropy if not given."""
    for flag, given in (
        ("--seeds", args.seeds is not None),
        ("--same-assignor", args.same_assignor),
        ("--static-session-ms", args.static_session_ms is not None),
    ):
        if given:
            raise ConfigError(f"{flag} does not apply to --soak (it runs fresh seeds of every protocol)")
    if args.shrink and args.no_shrink:
        raise ConfigError("--shrink and --no-shrink contradict each other")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, not {args.jobs}")
    given = args.seed_base is not None
    return SoakPlan(
        protocols=parse_protocols(args.protocol or "all"),
        faults=faults,
        seconds=args.soak * 60,
        seed_base=args.seed_base if given else random.SystemRandom().randrange(2**31),
        seed_base_given=given,
        chunk=DEFAULT_CHUNK if args.chunk is None else args.chunk,
        shrink=args.shrink,
    )


def _soak(plan: SoakPlan, jobs: int, *, as_json: bool) -> int:
    """``--soak``: chunks in this process (or ``jobs`` worker processes) until the time is up or
    Ctrl-C; the summary either way."""

    def on_chunk(result: ChunkResult, summary: SoakSummary, elapsed: float, left: float) -> None:
        print(progress_line(result, summary, elapsed, left), file=sys.stderr, flush=True)

    executor: ChunkExecutor
    pool = PoolExecutor(jobs) if jobs > 1 else None
    executor = pool if pool is not None else InlineExecutor()
    try:
        summary = run_soak(plan, now=time.monotonic, executor=executor, on_chunk=on_chunk)
    finally:
        if pool is not None:
            pool.close()
    print(json.dumps(summary.as_dict(), indent=2) if as_json else summary.report())
    return 1 if summary.violations else 0


if __name__ == "__main__":
    sys.exit(main())
