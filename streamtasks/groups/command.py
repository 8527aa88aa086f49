"""``streamtasks groups list | describe GROUP``: the command's flags and its run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from streamtasks.groups.view import (
    classic_group_view,
    consumer_group_view,
    render_classic,
    render_consumer,
    render_listing,
)
from streamtasks.protocol import classic_group as cg
from streamtasks.runtime.client_file import add_client_config_argument, settings_from_args
from streamtasks.runtime.group_admin import describe_group, list_groups

__all__ = ["add_groups_arguments", "run_groups_command"]

#: Where ``--bootstrap-servers`` comes from when not given (as the embedded broker exports it).
BOOTSTRAP_ENV = "STREAMTASKS_BOOTSTRAP"


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-servers",
        help=f"the Kafka cluster, host:port[,host:port] (default: ${BOOTSTRAP_ENV}, else the client config's "
        "bootstrap.servers)",
    )
    add_client_config_argument(parser)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each broker answer")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def add_groups_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="groups_command", required=True)
    listing = sub.add_parser("list", help="every group of the cluster: type, protocol type, state")
    _add_cluster_arguments(listing)
    describe = sub.add_parser(
        "describe",
        help="one group: state, protocol, members with their partitions (classic: the tasks streamtasks' "
        "assignor gave each; KIP-848: current against target assignment)",
    )
    describe.add_argument("group", help="the group id")
    describe.add_argument(
        "--members", action="store_true", help="show the members (default: the summary line)"
    )
    _add_cluster_arguments(describe)


def run_groups_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV), args.client_config)
    if args.groups_command == "list":
        groups = asyncio.run(list_groups(settings, timeout_s=args.timeout))
        if args.json:
            print(json.dumps([g.to_json() for g in groups], indent=2))
        else:
            print(render_listing(groups))
        return 0
    described = asyncio.run(describe_group(settings, args.group, timeout_s=args.timeout))
    if isinstance(described, cg.DescribeGroupResponse):
        classic = classic_group_view(args.group, described)
        text = render_classic(classic, members=args.members)
        document = classic.to_json()
    else:
        consumer = consumer_group_view(described)
        text = render_consumer(consumer, members=args.members)
        document = consumer.to_json()
    print(json.dumps(document, indent=2) if args.json else text)
    return 0
