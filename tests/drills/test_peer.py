"""A peer library's consumer in a drill (streamtasks.drills.peer_worker): what the catalog and
the drill accept. The live runs are in tests/integration/test_drills.py."""

from __future__ import annotations

import asyncio
import json
import queue
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamtasks.drills.catalog import DRILLS, get_drill
from streamtasks.drills.peer_worker import CLIENTS, _Java, parse_args
from streamtasks.drills.rolling import DrillOptions, run_live_drill
from streamtasks.errors import ConfigError


def test_peer_stages_offer_one_assignor_each() -> None:
    # Neither kafka-python nor librdkafka lets one consumer offer an eager and a cooperative
    # assignor together: a peer stage names one.
    with_peers = [d for d in DRILLS if d.stages and all(s.peer_args for s in d.stages)]
    assert [d.name for d in with_peers] == ["eager-to-cooperative"]
    assignors = [s.peer_args[s.peer_args.index("--assignor") + 1] for s in with_peers[0].stages]
    assert assignors == ["range", "cooperative-sticky", "cooperative-sticky"]


@pytest.mark.parametrize(
    ("drill", "peer", "message"),
    [
        ("userdata-upgrade", "confluent", "takes no peer"),
        ("eager-to-cooperative", "sarama", "--peer must be one of"),
    ],
)
def test_a_peer_the_drill_cannot_take_is_refused_before_anything_starts(
    drill: str, peer: str, message: str
) -> None:
    options = DrillOptions(workers=2, partitions=4, peer=peer)
    # An unroutable address: the refusal must come before any connection is tried.
    with pytest.raises(ConfigError, match=message):
        asyncio.run(run_live_drill(get_drill(drill), options, "127.0.0.1:1", print))


def _peer_args(client: str, *more: str) -> list[str]:
    where = ["--bootstrap-servers", "h:1", "--group", "g", "--topic", "t", "--name", "p1"]
    return ["--client", client, *where, *more]


def test_peer_worker_arguments() -> None:
    args = parse_args(_peer_args("confluent"))
    assert (args.client, args.assignor) == ("confluent", "range")
    assert CLIENTS == ("kafka-python", "confluent", "java")
    assert parse_args(_peer_args("java", "--group-protocol", "consumer")).group_protocol == "consumer"
    assert parse_args(_peer_args("java")).group_protocol == "classic"
    with pytest.raises(SystemExit):
        parse_args(_peer_args("sarama"))
    with pytest.raises(SystemExit):  # one assignor: the libraries refuse "range,cooperative-sticky"
        parse_args(_peer_args("confluent", "--assignor", "range,cooperative-sticky"))


def test_every_worker_reads_the_client_config_and_the_drill_refuses_a_coordinator_before_a_secured_cluster(
    tmp_path: Path,
) -> None:
    from streamtasks.drills.coordinator_proc import SECURED_COORDINATOR_REFUSED
    from streamtasks.drills.faust_worker import faust_security
    from streamtasks.runtime.client_file import settings_from_args
    from streamtasks.runtime.security import ClientSettings

    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=u\nsasl.password=pw\n"
    )
    args = parse_args(["--client", "confluent", "--bootstrap-servers", "b:1", "--group", "g", "--topic", "t",
                       "--name", "p1", "--client-config", str(config)])  # fmt: skip
    settings = settings_from_args(args.bootstrap_servers, args.client_config)
    assert settings.sasl_mechanism == "SCRAM-SHA-256"
    credentials = faust_security(settings)["broker_credentials"]
    assert (credentials.username, credentials.password) == ("u", "pw")
    assert credentials.mechanism.value == "SCRAM-SHA-256"
    assert faust_security(ClientSettings.of("b:1")) == {}
    options = DrillOptions(workers=2, partitions=4, coordinator=True)
    with pytest.raises(ConfigError) as refused:
        asyncio.run(run_live_drill(get_drill("eager-to-cooperative"), options, settings, print))
    assert str(refused.value) == SECURED_COORDINATOR_REFUSED


def test_the_java_peers_lines_become_the_drill_workers_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """PeerConsumer's events (java/peer): rebalance callbacks re-emitted as the drill's lines,
    records handed out as <partition>:<offset> ids, its exit noticed."""
    java = object.__new__(_Java)
    java._name, java._closed, java._lines = "p1", False, queue.Queue()
    for event in (
        {"event": "assigned", "partitions": [["t", 2], ["t", 0]]},
        {"event": "records", "ids": ["a", "b"], "offsets": [[0, 7], [2, 3]]},
        {"event": "revoked", "partitions": [["t", 2]]},
        {"event": "closed"},
    ):
        java._lines.put(json.dumps(event).encode() + b"\n")
    assert java._take(0.1) == ["0:7", "2:3"]
    assert java._closed
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["kind"], line["partitions"]) for line in lines] == [
        ("assigned", [["t", 0], ["t", 2]]),
        ("revoked", [["t", 2]]),
    ]
    assert java._take(0.01) == []  # nothing more yet
    java._lines.put(None)  # the JVM exited
    assert java._take(0.01) is None


def test_a_fault_drills_reference_group_must_speak_the_protocol() -> None:
    from streamtasks.drills.faults import FaultOptions, fault_spec, run_fault_drill

    cluster = SimpleNamespace(bootstrap_servers="127.0.0.1:1")  # refused before any connection
    options = DrillOptions(workers=2, partitions=4)
    for members, protocol, message in (
        ("kafka-python", "consumer", "kafka-python has no group.protocol=consumer"),
        ("java", "app", "consumer protocols only"),
        ("sarama", "classic", "--library must be"),
    ):
        fault = FaultOptions(protocol=protocol, members=members)
        with pytest.raises(ConfigError, match=message):
            asyncio.run(run_fault_drill(fault_spec("broker-crash", protocol), options, fault, cluster, print))
