"""Which broker to start: Apache Kafka where Java 17+ and Maven are on PATH, Tansu otherwise.

``STREAMTASKS_BROKER=auto|kafka|tansu`` picks one for a test session (read by
:func:`cluster_from_env`), ``--broker`` does the same for ``streamtasks demo``, and
``STREAMTASKS_BOOTSTRAP=host:port`` still wins over both by naming an existing cluster.
The choice is printed in one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from streamtasks.embedded.cluster import BOOTSTRAP_ENV, ExternalCluster
from streamtasks.embedded.kafka_broker import (
    INSTALL_HINT,
    KafkaBroker,
    java_version,
    kafka_requirements_missing,
    kafka_version,
)
from streamtasks.embedded.tansu import EmbeddedBroker
from streamtasks.errors import BrokerError

__all__ = [
    "BROKER_ENV",
    "BROKER_KINDS",
    "DEFAULT_BROKER",
    "BrokerChoice",
    "add_broker_arguments",
    "choose_broker",
    "client_settings",
    "cluster_from_env",
    "run_on_broker",
    "start_broker",
]

#: Environment variable choosing the embedded broker: ``auto``, ``kafka`` or ``tansu``.
BROKER_ENV = "STREAMTASKS_BROKER"
BROKER_KINDS = ("auto", "kafka", "tansu")
#: The choice when neither ``--broker`` nor ``$STREAMTASKS_BROKER`` says.
DEFAULT_BROKER = "auto"
#: Consumer and App settings members need on the embedded Tansu broker only: it skips
#: generation numbers for members that took part in every generation, so the missed-generation
#: rule would drop their partitions for nothing (docs/testing.md, "generation gaps").
TANSU_CLIENT_SETTINGS: dict[str, Any] = {"lose_on_missed_generation": False}


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChoice:
    """The broker :func:`choose_broker` picked (``kafka`` or ``tansu``) and why."""

    kind: str
    reason: str
    version: str = ""

    def describe(self) -> str:
        name = f"Apache Kafka {self.version}".rstrip() if self.kind == "kafka" else "Tansu"
        return f"{name} ({self.reason})"


def _kafka_reason() -> str:
    java = shutil.which("java")
    major = java_version(java) if java else None
    return f"java {major}, mvn found"


def choose_broker(kind: str | None = None) -> BrokerChoice:
    """Resolve ``kind`` (default: ``$STREAMTASKS_BROKER``, else :data:`DEFAULT_BROKER`).

    ``auto`` is Apache Kafka when ``java`` 17+ and ``mvn`` are on PATH and the repository's
    Maven project is there, else Tansu; ``kafka`` raises :class:`BrokerError` saying what to
    install when Java or Maven is missing."""
    requested = (kind or os.environ.get(BROKER_ENV, "").strip() or DEFAULT_BROKER).lower()
    if requested not in BROKER_KINDS:
        raise BrokerError(f"unknown broker {requested!r}: choose one of {', '.join(BROKER_KINDS)}")
    if requested == "tansu":
        if kind:
            reason = "requested"
        elif os.environ.get(BROKER_ENV):
            reason = f"{BROKER_ENV}=tansu"
        else:
            reason = "the default"
        return BrokerChoice(kind="tansu", reason=reason)
    missing = kafka_requirements_missing()
    version = ""
    if missing is None:
        try:
            version = kafka_version()
        except BrokerError as exc:
            missing = str(exc)
    if missing is None:
        return BrokerChoice(kind="kafka", reason=_kafka_reason(), version=version)
    if requested == "kafka":
        hint = f"{INSTALL_HINT}, or use --broker tansu / {BROKER_ENV}=tansu"
        raise BrokerError(f"Apache Kafka broker requested but {missing}: {hint}")
    return BrokerChoice(kind="tansu", reason=f"{missing}: install Java 17+ and Maven for Apache Kafka")


def start_broker(
    kind: str | None = None,
    *,
    log_path: str | os.PathLike[str] | None = None,
    announce: TextIO | None = None,
) -> EmbeddedBroker | KafkaBroker:
    """Choose a broker (:func:`choose_broker`), say which in one line on ``announce`` (default:
    stderr), and start it."""
    choice = choose_broker(kind)
    print(f"streamtasks: broker = {choice.describe()}", file=announce or sys.stderr, flush=True)
    path = Path(log_path) if log_path else None
    if choice.kind == "kafka":
        return KafkaBroker(log_path=path).start()
    return EmbeddedBroker(log_path=path).start()


def cluster_from_env() -> EmbeddedBroker | KafkaBroker | ExternalCluster:
    """``$STREAMTASKS_BOOTSTRAP``'s cluster if set, else the broker ``$STREAMTASKS_BROKER`` names,
    started (:func:`start_broker`)."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if bootstrap:
        return ExternalCluster(bootstrap)
    return start_broker()


def client_settings(cluster: object) -> dict[str, Any]:
    """Settings (``streamtasks.Consumer`` / ``App`` keywords) that members of ``cluster`` need:
    :data:`TANSU_CLIENT_SETTINGS` on the embedded Tansu broker, nothing on Apache Kafka or an
    existing cluster (Apache Kafka's defaults are the library's)."""
    return dict(TANSU_CLIENT_SETTINGS) if isinstance(cluster, EmbeddedBroker) else {}


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """A script's broker options (the examples'): ``--bootstrap-servers`` names an existing
    cluster, else ``--broker`` picks the embedded broker (:func:`run_on_broker`)."""
    parser.add_argument("--bootstrap-servers", help="an existing cluster (default: embedded broker)")
    parser.add_argument(
        "--broker",
        choices=BROKER_KINDS,
        default=None,
        help=f"embedded broker: Apache Kafka, Tansu, or auto (default: ${BROKER_ENV}, else auto)",
    )


def run_on_broker(args: argparse.Namespace, main: Callable[[str], Coroutine[Any, Any, int]]) -> int:
    """``main(bootstrap_servers)`` on ``args.bootstrap_servers``, else on an embedded broker of
    ``args.broker`` started for the run (:func:`add_broker_arguments`); its exit status."""
    if args.bootstrap_servers:
        return asyncio.run(main(args.bootstrap_servers))
    with start_broker(args.broker) as broker:
        return asyncio.run(main(broker.bootstrap_servers))
