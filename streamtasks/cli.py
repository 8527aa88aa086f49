"""The ``streamtasks`` command."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import assignors
from streamtasks._version import __version__
from streamtasks.assign_report import build_report, render_text
from streamtasks.errors import ConfigError, StreamTasksError
from streamtasks.scenario import load_scenario

if TYPE_CHECKING:
    from streamtasks.drills.demo import DemoOptions

__all__ = ["main"]

DEFAULT_TASK_ASSIGNOR = "high_availability"


def _cmd_assign(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    name = args.assignor or scenario.assignor or DEFAULT_TASK_ASSIGNOR
    assignor = assignors.get(name)
    assignment = assignor.assign(scenario.state)
    report = build_report(scenario.state, assignment, scenario.names, name)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render_text(report))
    return 0 if report.to_json()["valid"] else 3


def _cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from streamtasks.drills._proc import clients_debug
    from streamtasks.drills.demo import DemoOptions, run_demo

    if clients_debug():  # $STREAMTASKS_DEMO_DEBUG: everything on stderr, aiokafka at DEBUG
        logging.getLogger().setLevel(logging.DEBUG)  # main() has set up the handler
        logging.getLogger("streamtasks").setLevel(logging.DEBUG)
    else:
        # aiokafka logs retriable errors it handles itself (NOT_LEADER_OR_FOLLOWER right after
        # a topic is created on Apache Kafka) as warnings; they are not the demo's to report.
        logging.getLogger("aiokafka").setLevel(logging.ERROR)
    phases = ("bounce", "stateful") if args.phase == "all" else (args.phase,)
    options = DemoOptions(
        bootstrap_servers=args.bootstrap_servers, broker=args.broker, protocol=args.protocol, phases=phases,
        secure=args.secure,
    )  # fmt: skip
    return asyncio.run(run_demo(_demo_client(options, args.client_config)))


def _demo_client(options: DemoOptions, client_config: str | None) -> DemoOptions:
    """``--client-config`` (or ``$STREAMTASKS_CLIENT_CONFIG``): the cluster's security in
    ``options`` (``--secure`` takes none: it makes its own users and certificates)."""
    import dataclasses
    import os

    from streamtasks.embedded import BOOTSTRAP_ENV
    from streamtasks.runtime.client_file import settings_from_args
    from streamtasks.runtime.security import client_config_path

    if options.secure:
        if client_config:
            raise ConfigError("--secure makes its own users and certificates: give no --client-config")
        return options
    if client_config_path(client_config) is None:
        return options
    bootstrap = options.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV)
    settings = settings_from_args(bootstrap, client_config)
    return dataclasses.replace(options, bootstrap_servers=settings.bootstrap_servers, client=settings)


def _cmd_assignors(args: argparse.Namespace) -> int:
    listing = {"task": assignors.available(), "partition": assignors.available_partition_assignors()}
    if args.json:
        print(json.dumps(listing, indent=2))
    else:
        for kind, names in listing.items():
            print(f"{kind} assignors: {', '.join(names)}")
    return 0


def _cmd_drill(args: argparse.Namespace) -> int:
    from streamtasks.drills.command import run_drill_command

    return run_drill_command(args)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from streamtasks.sweeps.command import run_sweep_command

    return run_sweep_command(args)


def _cmd_coordinator(args: argparse.Namespace) -> int:
    if getattr(args, "coordinator_command", None) == "add-user":
        from streamtasks.server import run_add_user

        return run_add_user(args)

    from streamtasks.embedded import start_broker
    from streamtasks.server import backing_values, config_from_args, listener_from_args, run_server

    listener_from_args(args)  # a bad security setting fails before an embedded broker starts
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap_servers or backing_values(args).get("bootstrap_servers")
        if not bootstrap:
            bootstrap = stack.enter_context(start_broker(args.broker)).bootstrap_servers
        return run_server(config_from_args(args, bootstrap), log_level=args.log_level)


def _cmd_groups(args: argparse.Namespace) -> int:
    from streamtasks.groups.command import run_groups_command

    return run_groups_command(args)


def _cmd_sim(args: argparse.Namespace) -> int:
    from streamtasks.sim.__main__ import run_sim

    return run_sim(args)


#: The levels ``--log-level`` takes (any case), and its default: Python's own, warnings and errors.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "WARNING"
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LOG_LEVEL_HELP = f"the level of streamtasks' log lines on stderr: {', '.join(LOG_LEVELS)}"


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (argparse's ArgumentDefaultsHelpFormatter,
    except that a help which already says its default, a flag and an unset value add nothing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        unset = any(action.default is quiet for quiet in (None, False, argparse.SUPPRESS))
        if action.option_strings and action.nargs != 0 and not unset and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _sub_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser``'s commands, and theirs, depth first; each described by its line in the list."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                child.description = child.description or lines.get(name)
                found += [child, *_sub_parsers(child)]
    return found


def _finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """One help format for every command, and ``--log-level`` on each: the top-level parser
    holds its default; a command's copy only sets it when given (``streamtasks assign --log-level
    DEBUG`` and ``streamtasks --log-level DEBUG assign`` mean the same)."""
    _add_log_level(parser, DEFAULT_LOG_LEVEL, _LOG_LEVEL_HELP)
    for command in [parser, *_sub_parsers(parser)]:
        command.formatter_class = _HelpFormatter
        if command is not parser:
            _add_log_level(command, argparse.SUPPRESS, f"{_LOG_LEVEL_HELP} (default: {DEFAULT_LOG_LEVEL})")
    return parser


def _add_log_level(parser: argparse.ArgumentParser, default: str, text: str) -> None:
    parser.add_argument(
        "--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL", default=default, help=text
    )


@contextlib.contextmanager
def _logging(level: str) -> Iterator[None]:
    """streamtasks' loggers at ``level`` while a command runs, on stderr (a handler is set up
    unless one is already: an application's, pytest's)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(format=_LOG_FORMAT)
    logger = logging.getLogger("streamtasks")
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def build_parser() -> argparse.ArgumentParser:

    parser = argparse.ArgumentParser(
        prog="streamtasks", description="Kafka Streams-style task assignment for Python stream apps."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    assign = sub.add_parser("assign", help="run a task assignor on a scenario file and show the result")
    assign.add_argument(
        "scenario", help="scenario file (.yaml, .yml or .json), or a packaged example by name (sample)"
    )
    assign.add_argument(
        "--assignor", help=f"task assignor name (default: the scenario's, else {DEFAULT_TASK_ASSIGNOR})"
    )
    assign.add_argument("--json", action="store_true", help="print JSON instead of tables")
    assign.set_defaults(func=_cmd_assign)

    _add_demo_command(sub)

    listing = sub.add_parser("assignors", help="list the task and partition assignors available")
    listing.add_argument("--json", action="store_true", help="print JSON instead of lines")
    listing.set_defaults(func=_cmd_assignors)

    from streamtasks.drills.command import add_drill_arguments

    drill = sub.add_parser(
        "drill", help="rolling-upgrade drills: `drill list`, `drill run NAME` (live, with a verdict)"
    )
    add_drill_arguments(drill)
    drill.set_defaults(func=_cmd_drill)

    from streamtasks.sweeps.command import add_sweep_arguments

    sweep = sub.add_parser(
        "sweep",
        help="run a scenario grid through the simulator on Spark (local or any master): Parquet rows, "
        "report.html, summary.json",
    )
    add_sweep_arguments(sweep)
    sweep.set_defaults(func=_cmd_sweep)

    from streamtasks.server import add_coordinator_arguments, add_user_arguments

    coordinator = sub.add_parser(
        "coordinator",
        help="serve streamtasks' KIP-848 group coordinator (client-side assignment) before a Kafka cluster",
    )
    add_coordinator_arguments(coordinator)
    coordinator.set_defaults(func=_cmd_coordinator)
    coordinator_sub = coordinator.add_subparsers(dest="coordinator_command")
    add_user = coordinator_sub.add_parser(
        "add-user", help="store a user's salted SCRAM credentials for the coordinator's SASL listener"
    )
    add_user_arguments(add_user)

    from streamtasks.groups.command import add_groups_arguments

    groups = sub.add_parser(
        "groups",
        help="a live cluster's groups: `groups list`, `groups describe GROUP` (members, partitions, tasks)",
    )
    add_groups_arguments(groups)
    groups.set_defaults(func=_cmd_groups)

    from streamtasks.sim.__main__ import add_sim_arguments

    sim = sub.add_parser(
        "sim",
        help="run seeded scenarios of the protocols in the simulator, with faults, and check the "
        "invariants after every event (docs/simulation.md)",
    )
    add_sim_arguments(sim)
    sim.set_defaults(func=_cmd_sim)
    return _finish(parser)


def _add_demo_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``streamtasks demo``: the live drill's command and flags."""
    from streamtasks.runtime.client_file import add_client_config_argument

    demo = sub.add_parser(
        "demo",
        help="live drill: rolling bounces (dynamic, static), then stateful tasks (crash, standbys, warm-ups)",
    )
    demo.add_argument(
        "--bootstrap-servers", help="use this Kafka cluster (default: an embedded broker, see --broker)"
    )
    demo.add_argument(
        "--broker",
        choices=("auto", "kafka", "tansu"),
        help="embedded broker: Apache Kafka (needs Java 17+ and Maven), Tansu, or auto (Kafka where "
        "java and mvn are on PATH); default: $STREAMTASKS_BROKER, else auto",
    )
    demo.add_argument(
        "--protocol",
        choices=("cooperative", "eager", "consumer", "consumer-client", "streams"),
        default="cooperative",
        help="classic cooperative or eager; consumer: KIP-848 on the cluster's coordinator (Apache "
        "Kafka 4.x, server-side uniform); consumer-client: KIP-848 on a streamtasks coordinator "
        "started in front of the cluster, assignment client-side; streams: the App workers in a "
        "KIP-1071 streams group (Apache Kafka 4.2+; the stateful phase only)",
    )
    demo.add_argument(
        "--phase",
        choices=("all", "bounce", "dynamic", "stateful"),
        default="all",
        help="bounce: rolling bounces of consumer workers; stateful: App workers with standbys; "
        "dynamic: the bounce phase without its static members (the shortest run with rebalances)",
    )
    add_client_config_argument(demo)
    demo.add_argument(
        "--secure",
        action="store_true",
        help="run on the secured embedded Apache Kafka: every client over SASL_SSL with SCRAM-SHA-512",
    )
    demo.set_defaults(func=_cmd_demo)


#: The exit status of a command whose reader went away (``| head``): 128 + SIGPIPE, as a shell
#: reports a command that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit finds no broken pipe
    to complain about (the recipe of Python's signal module documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout has no file descriptor (captured, replaced)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _logging(args.log_level):
            code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader of stdout went away (``| head -1``): stop, quietly
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except StreamTasksError as exc:
        message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"streamtasks: error: {message}", file=sys.stderr)  # one line, whatever the error
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
