"""``streamtasks groups list | describe GROUP | reset-offsets GROUP``: the command's flags and
its run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from streamtasks.errors import StreamTasksError
from streamtasks.groups.offsets import (
    ResetPlan,
    ResetSpec,
    offset_rows,
    owners_of,
    parse_datetime_ms,
    plan_reset,
    render_offsets,
    render_reset,
    task_lags,
)
from streamtasks.groups.streams_view import render_streams, streams_group_view, streams_owners
from streamtasks.groups.tasks_view import Holder, classic_tasks, render_tasks, task_rows
from streamtasks.groups.view import (
    classic_group_view,
    consumer_group_view,
    render_classic,
    render_consumer,
    render_listing,
)
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol import consumer_group as kip848
from streamtasks.runtime.client_file import add_client_config_argument, settings_from_args
from streamtasks.runtime.group_admin import describe_group, list_groups
from streamtasks.runtime.group_offsets import (
    EARLIEST,
    LATEST,
    commit_group_offsets,
    fetch_committed,
    list_offsets,
    topic_partitions,
)
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition

__all__ = ["GroupNotEmpty", "add_groups_arguments", "run_groups_command"]

#: Where ``--bootstrap-servers`` comes from when not given (as the embedded broker exports it).
BOOTSTRAP_ENV = "STREAMTASKS_BOOTSTRAP"
#: Group states in which reset-offsets may commit (no member to overwrite the offsets).
_INACTIVE = frozenset({"Empty", "Dead"})


class GroupNotEmpty(StreamTasksError):
    """reset-offsets on a group that has members."""


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-servers",
        help=f"the Kafka cluster, host:port[,host:port] (default: ${BOOTSTRAP_ENV}, else the client config's "
        "bootstrap.servers)",
    )
    add_client_config_argument(parser)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each broker answer")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _add_reset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", help="the group id (it must have no member)")
    parser.add_argument("--topic", action="append", required=True, help="a topic to reset (repeatable)")
    to = parser.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument(
        "--to-offset",
        type=int,
        metavar="N",
        help="offset N (clamped to the log; no default: one target is required)",
    )
    to.add_argument(
        "--to-datetime", metavar="ISO", help="the first offset at or after the time (UTC by default)"
    )
    to.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="the committed offset plus N, N may be negative (no default: one target is required)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    _add_cluster_arguments(parser)


def add_groups_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="groups_command", required=True)
    listing = sub.add_parser("list", help="every group of the cluster: type, protocol type, state")
    _add_cluster_arguments(listing)
    describe = sub.add_parser(
        "describe",
        help="one group: state, protocol, members with their partitions (classic: the tasks streamtasks' "
        "assignor gave each; KIP-848: current against target assignment; streams: topology and tasks)",
    )
    describe.add_argument("group", help="the group id")
    describe.add_argument(
        "--members", action="store_true", help="show the members (default: the summary line)"
    )
    describe.add_argument(
        "--tasks",
        action="store_true",
        help="one row per task of an App or streams group: the members running it active, as a "
        "standby and warming it up (with --offsets: its lag)",
    )
    describe.add_argument(
        "--offsets",
        action="store_true",
        help="committed offset, log end offset and lag per partition (and per task for an App group)",
    )
    _add_cluster_arguments(describe)
    reset = sub.add_parser(
        "reset-offsets",
        help="set an empty group's committed offsets (like kafka-consumer-groups --reset-offsets)",
    )
    _add_reset_arguments(reset)


def _describe(settings: ClientSettings, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    described = asyncio.run(describe_group(settings, args.group, timeout_s=args.timeout))
    owners: dict[TopicPartition, str] = {}
    tasks: dict[TopicPartition, str] = {}
    holders: list[Holder] = []
    if isinstance(described, cg.DescribeGroupResponse):
        classic = classic_group_view(args.group, described)
        text, document = render_classic(classic, members=args.members), classic.to_json()
        owners, tasks = owners_of(classic)
        holders = classic_tasks(classic)
    elif isinstance(described, kip848.DescribedGroup):
        consumer = consumer_group_view(described)
        text, document = render_consumer(consumer, members=args.members), consumer.to_json()
        owners = {tp: m.client_id for m in consumer.members for tp in m.current}
    else:
        streams = streams_group_view(described)
        text, document = render_streams(streams, members=args.members), streams.to_json()
        owners, tasks = streams_owners(streams)
        holders = [(m.client_id, *m.current.roles()) for m in streams.members]
    lags: dict[str, int] | None = None
    if args.offsets:
        rows = asyncio.run(_offset_rows(settings, args.group, owners, tasks, args.timeout))
        text += "\n" + render_offsets(rows)
        document["offsets"] = [r.to_json() for r in rows]
        if tasks:
            lags = task_lags(rows)
            document["task_lags"] = lags
            text += "\nTASK-LAGS " + (",".join(f"{t}={lag}" for t, lag in lags.items()) or "-")
    if args.tasks:
        by_task = task_rows(holders, lags)
        text += "\n" + render_tasks(by_task)
        document["tasks"] = [r.to_json() for r in by_task]
    return text, document


async def _offset_rows(
    settings: ClientSettings,
    group: str,
    owners: dict[TopicPartition, str],
    tasks: dict[TopicPartition, str],
    timeout_s: float,
) -> Any:
    committed = await fetch_committed(settings, group, timeout_s=timeout_s)
    ends = await list_offsets(settings, set(committed) | set(owners), LATEST, timeout_s=timeout_s)
    return offset_rows(committed, ends, owners, tasks)


def _spec(args: argparse.Namespace) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec(to="earliest")
    if args.to_latest:
        return ResetSpec(to="latest")
    if args.to_offset is not None:
        return ResetSpec(to="offset", value=args.to_offset)
    if args.to_datetime is not None:
        return ResetSpec(to="datetime", value=parse_datetime_ms(args.to_datetime))
    return ResetSpec(to="shift", value=args.shift_by)


async def _reset(settings: ClientSettings, args: argparse.Namespace) -> ResetPlan:
    spec = _spec(args)
    listed = {g.group_id: g for g in await list_groups(settings, timeout_s=args.timeout)}
    state = listed[args.group].state if args.group in listed else "Dead"
    if state not in _INACTIVE:
        raise GroupNotEmpty(
            f"reset-offsets: group {args.group!r} on the cluster at {settings.bootstrap_servers} is {state}: "
            "offsets can only be reset while it has no member (stop its consumers first)"
        )
    partitions = await topic_partitions(settings, args.topic, timeout_s=args.timeout)
    committed = await fetch_committed(settings, args.group, timeout_s=args.timeout)
    earliest = await list_offsets(settings, partitions, EARLIEST, timeout_s=args.timeout)
    latest = await list_offsets(settings, partitions, LATEST, timeout_s=args.timeout)
    at_time = None
    if spec.to == "datetime":
        at_time = await list_offsets(settings, partitions, spec.value, timeout_s=args.timeout)
    plan = plan_reset(
        args.group, spec, partitions=partitions, committed=committed, earliest=earliest, latest=latest,
        at_time=at_time,
    )  # fmt: skip
    if args.execute:
        await commit_group_offsets(settings, args.group, plan.offsets(), timeout_s=args.timeout)
    return plan


def run_groups_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV), args.client_config)
    if args.groups_command == "list":
        groups = asyncio.run(list_groups(settings, timeout_s=args.timeout))
        if args.json:
            print(json.dumps([g.to_json() for g in groups], indent=2))
        else:
            print(render_listing(groups))
        return 0
    if args.groups_command == "reset-offsets":
        plan = asyncio.run(_reset(settings, args))
        if args.json:
            print(json.dumps(plan.to_json(executed=args.execute), indent=2))
        else:
            print(render_reset(plan, executed=args.execute))
        return 0
    text, document = _describe(settings, args)
    print(json.dumps(document, indent=2) if args.json else text)
    return 0
