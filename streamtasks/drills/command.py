"""``streamtasks drill list`` / ``streamtasks drill run NAME``: the command-line side of the drills.

``run`` starts an embedded broker (``--broker``) or uses ``--bootstrap-servers``, runs the drill
(:mod:`streamtasks.drills.rolling`) with a live progress display (rich, when the output is a
terminal; plain lines otherwise), prints the verdict table (or JSON with ``--json``), writes a
report with ``--report DIR``, and exits 0 on PASS, 1 on FAIL, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from typing import Any, TextIO

from streamtasks.drills.catalog import DRILLS, get_drill
from streamtasks.errors import ConfigError
from streamtasks.runtime.client_file import add_client_config_argument, settings_from_args
from streamtasks.runtime.security import ClientSettings, client_config_path

__all__ = ["add_drill_arguments", "run_drill_command"]


def add_drill_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="drill_command", required=True)
    listing = sub.add_parser("list", help="the drills, one line each (unavailable ones say why)")
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    run = sub.add_parser("run", help="run one drill live; exit status 0 = PASS, 1 = FAIL")
    run.add_argument("name", help="a drill name from `streamtasks drill list`")
    run.add_argument(
        "--bootstrap-servers", help="use this Kafka cluster (default: an embedded broker, see --broker)"
    )
    run.add_argument(
        "--broker",
        choices=("auto", "kafka", "tansu"),
        help="embedded broker (default: $STREAMTASKS_BROKER, else auto)",
    )
    add_client_config_argument(run)
    run.add_argument("--workers", type=int, default=3, help="workers in the group")
    run.add_argument("--partitions", type=int, default=6, help="partitions of the input topic")
    run.add_argument("--rate", type=int, default=200, help="records produced per second")
    run.add_argument(
        "--peer",
        choices=("kafka-python", "confluent"),
        help="consumer drills: one consumer of this library in the group too, bounced last (default: none)",
    )
    run.add_argument(
        "--coordinator",
        action="store_true",
        help="run the group on `streamtasks coordinator`, started in front of the cluster (the workers "
        "bootstrap to it), instead of the cluster's own group coordinator",
    )
    run.add_argument(
        "--protocol",
        choices=("classic", "consumer", "app"),
        default="classic",
        help="broker fault drills: the group's protocol (classic cooperative, KIP-848, the stateful App "
        "with a standby); --coordinator puts streamtasks coordinator in front (default: classic)",
    )
    run.add_argument(
        "--library",
        choices=("streamtasks", "confluent", "kafka-python", "java"),
        default="streamtasks",
        help="broker fault drills: the group's members (another library's: the reference rows; java: "
        "kafka-clients' KafkaConsumer of the embedded broker's version)",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--report", metavar="DIR", help="write report.json and report.html here (default: none)")
    run.add_argument(
        "--simulate",
        action="store_true",
        help="run the drill's script in the simulator instead (App drills: assignment level, no records)",
    )
    run.add_argument("--members", type=int, default=100, help="--simulate: group members")
    run.add_argument("--seed", type=int, default=0, help="--simulate: the scenario's seed")


def _list(args: argparse.Namespace, out: TextIO) -> int:
    if args.json:
        rows = [
            {"name": d.name, "summary": d.summary, "available": d.available, "unavailable": d.unavailable}
            for d in DRILLS
        ]
        out.write(json.dumps(rows, indent=2) + "\n")
        return 0
    width = max(len(d.name) for d in DRILLS)
    for d in DRILLS:
        note = "" if d.available else f"  [unavailable: {d.unavailable}]"
        out.write(f"{d.name:<{width}}  {d.summary}{note}\n")
    return 0


class _Progress:
    """Progress lines: a rich status line on a terminal, plain timestamped lines otherwise."""

    def __init__(self, out: TextIO, quiet: bool) -> None:
        self._out, self._quiet = out, quiet
        self._status: Any = None
        if not quiet and out.isatty():
            try:
                from rich.console import Console

                self._status = Console(file=out).status("starting")
            except ImportError:
                self._status = None

    def __enter__(self) -> _Progress:
        if self._status is not None:
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def say(self, text: str) -> None:
        if self._quiet:
            return
        if self._status is not None:
            self._status.update(text.strip())
            if not text.startswith("  "):
                self._status.console.log(text)
        else:
            self._out.write(text + "\n")
            self._out.flush()


def print_verdict(result: Any, out: TextIO) -> None:
    from streamtasks.drills.drill_report import verdict_rows

    where = f" (on streamtasks coordinator {result.coordinator})" if result.coordinator else ""
    out.write(f"\nstreamtasks drill {result.drill}{where}: {'PASS' if result.ok else 'FAIL'}\n\n")
    rows = verdict_rows(result)
    w0 = max(len(a) for a, _, _ in rows)
    w1 = max(len(b) for _, b, _ in rows)
    for a, b, c in rows:
        out.write(f"{a:<{w0}}  {b:>{w1}}  {c}\n")
    heads = ("phase", "seconds", "rebalances", "revoked", "max unowned ms", "double-owned", "restores")
    table = [
        (p.name, f"{p.seconds:.1f}", str(p.rebalances), str(p.revoked), str(p.longest_unowned_ms),
         str(p.double_owned), str(p.restores))
        for p in result.phases
    ]  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(heads)] if table else []
    if table:
        out.write("\n" + "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)) + "\n")
        for r in table:
            out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + "\n")
    for v in result.violations:
        out.write(f"double ownership: {v}\n")
    if result.lost_runs:
        out.write(f"lost input offsets: {', '.join(result.lost_runs)}\n")
    if result.peer_lost_runs:
        out.write(f"lost by a peer library: {', '.join(result.peer_lost_runs)}\n")
        for commit in result.peer_commits:
            out.write(f"  {commit}, past records it never processed\n")
    out.flush()


def _run(args: argparse.Namespace, out: TextIO) -> int:
    from streamtasks.drills.rolling import DrillOptions

    spec = get_drill(args.name)
    if not spec.available:
        raise ConfigError(f"drill {spec.name!r} is not available: {spec.unavailable}")
    if spec.worker == "mixed":  # Kafka Streams' Java workers and Apps in one streams group
        from streamtasks.drills.mixed_command import run_mixed_command

        return run_mixed_command(args, out)
    if args.simulate:
        if spec.fault:
            raise ConfigError(f"drill {spec.name!r} runs on a live cluster only (no --simulate)")
        if args.coordinator:
            raise ConfigError("--coordinator runs the drill live; --simulate takes no coordinator")
        return _simulate(args, spec, out)
    options = DrillOptions(
        workers=args.workers, partitions=args.partitions, rate=args.rate, peer=args.peer,
        coordinator=args.coordinator,
    )  # fmt: skip
    if options.workers < 2 or options.partitions < 1 or options.rate < 1:
        raise ConfigError("a drill needs --workers >= 2, --partitions >= 1 and --rate >= 1")
    if spec.fault:
        from streamtasks.drills.faults import FaultOptions, fault_spec

        if args.bootstrap_servers or client_config_path(args.client_config) is not None:
            raise ConfigError(
                "a broker fault drill starts its own three-broker cluster (it kills its brokers)"
            )
        spec = fault_spec(spec.name, args.protocol)
        fault = FaultOptions(protocol=args.protocol, members=args.library)
    elif args.protocol != "classic" or args.library != "streamtasks":
        raise ConfigError("--protocol and --library are options of the broker fault drills")
    else:
        fault = None
    aiokafka_log = logging.getLogger("aiokafka")
    quiet_from = aiokafka_log.level
    # for the run only (main() may be called in-process); a fault drill's brokers die on purpose
    aiokafka_log.setLevel(logging.CRITICAL if fault is not None else logging.ERROR)
    try:
        if fault is not None:
            return _run_faults(args, spec, options, fault, out)
        return _run_live(args, spec, options, out)
    finally:
        aiokafka_log.setLevel(quiet_from)


def _run_live(args: argparse.Namespace, spec: Any, options: Any, out: TextIO) -> int:
    from streamtasks.drills.rolling import run_live_drill
    from streamtasks.embedded import ExternalCluster, start_broker

    bootstrap = args.bootstrap_servers or os.environ.get("STREAMTASKS_BOOTSTRAP")
    settings: ClientSettings | None = None
    if client_config_path(args.client_config) is not None:  # the cluster's TLS/SASL settings
        settings = settings_from_args(bootstrap, args.client_config)
        bootstrap = settings.bootstrap_servers
    cluster: Any = ExternalCluster(bootstrap) if bootstrap else start_broker(args.broker)
    try:
        with _Progress(sys.stderr if args.json else out, quiet=False) as progress:
            protocol = f" ({settings.security_protocol})" if settings is not None else ""
            progress.say(f"drill {spec.name} on {cluster.bootstrap_servers}{protocol}: {spec.summary}")
            target = settings if settings is not None else cluster.bootstrap_servers
            result = asyncio.run(run_live_drill(spec, options, target, progress.say))
    finally:
        cluster.stop()
    return _finish(args, result, out)


def _run_faults(args: argparse.Namespace, spec: Any, options: Any, fault: Any, out: TextIO) -> int:
    from streamtasks.drills.faults import run_fault_drill
    from streamtasks.embedded import start_cluster

    with _Progress(sys.stderr if args.json else out, quiet=False) as progress:
        progress.say("starting a three-broker Apache Kafka cluster")
        cluster = start_cluster(brokers=3)
        try:
            where = " through streamtasks coordinator" if options.coordinator else ""
            progress.say(
                f"drill {spec.name} ({args.protocol}, {fault.members} members{where}) on "
                f"{cluster.bootstrap_servers}: {spec.summary}"
            )
            result = asyncio.run(run_fault_drill(spec, options, fault, cluster, progress.say))
        finally:
            cluster.stop()
    return _finish(args, result, out)


def _finish(args: argparse.Namespace, result: Any, out: TextIO) -> int:
    if args.report:
        from streamtasks.drills.drill_report import write_report

        page = write_report(result, args.report)
        (sys.stderr if args.json else out).write(f"report: {page}\n")
    if args.json:
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        print_verdict(result, out)
    return 0 if result.ok else 1


def _simulate(args: argparse.Namespace, spec: Any, out: TextIO) -> int:
    from streamtasks.drills.simulated import simulate_drill

    result = simulate_drill(spec, members=args.members, partitions=args.partitions, seed=args.seed)
    if args.report:
        os.makedirs(args.report, exist_ok=True)
        with open(os.path.join(args.report, "report.json"), "w") as fh:
            json.dump(result.to_json(), fh, indent=2)
    if args.json:
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
        return 0 if result.ok else 1
    converged = "never" if result.converged_after_ms is None else f"{result.converged_after_ms:,} ms"
    rows: tuple[tuple[str, str, str], ...] = (
        ("invariant violations", str(len(result.violations)), "ok" if not result.violations else "FAIL"),
        (
            "converged after the last step",
            converged,
            "ok" if result.converged_after_ms is not None else "FAIL",
        ),
        ("hand-overs without a commit", f"{result.handover_without_commit:,}", "-"),
        ("rebalances", f"{result.rebalances:,}", "-"),
        ("partitions revoked", f"{result.revoked:,}", "-"),
        ("partitions lost (not revoked)", f"{result.lost:,}", "-"),
        ("partitions moved", f"{result.moved:,}", "-"),
        ("unowned partition-ms", f"{result.orphan_partition_ms:,}", "-"),
        ("simulated time", f"{result.sim_ms / 1000:,.1f} s ({result.events:,} events)", "-"),
    )
    if spec.worker == "app":
        rows += (
            ("App checks", f"{len(result.problems)} problems", "ok" if not result.problems else "FAIL"),
            ("members per userdata version at the end", _counts(result.userdata_versions, "v"), "-"),
            ("generations per assignor protocol", _counts(result.generations_by_protocol), "-"),
            ("rejoins for version probing", f"{result.version_probing_rejoins:,}", "-"),
        )
    out.write(
        f"\nstreamtasks drill {spec.name} (simulated: {result.members} members, {result.partitions} "
        f"partitions, seed {result.seed}): {'PASS' if result.ok else 'FAIL'}\n"
        f"coordinator: {result.coordinator}\n\n"
    )
    w0 = max(len(a) for a, _, _ in rows)
    w1 = max(len(b) for _, b, _ in rows)
    for a, b, c in rows:
        out.write(f"{a:<{w0}}  {b:>{w1}}  {c}\n")
    for v in result.violations:
        out.write(f"violation: {v}\n")
    for problem in result.problems:
        out.write(f"problem: {problem}\n")
    return 0 if result.ok else 1


def _counts(counts: dict[str, int], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{k}: {n:,}" for k, n in counts.items()) or "-"


def run_drill_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    if args.drill_command == "list":
        return _list(args, stream)
    return _run(args, stream)
