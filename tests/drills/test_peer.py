"""A peer library's consumer in a drill (streamtasks.drills.peer_worker): what the catalog and
the drill accept. The live runs are in tests/integration/test_drills.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamtasks.drills.catalog import DRILLS, get_drill
from streamtasks.drills.peer_worker import CLIENTS, parse_args
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
    assert CLIENTS == ("kafka-python", "confluent")
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
