"""What the App hands the group for interactive queries and rack awareness: its
``application_server`` endpoint, rack, client tags in the subscription, and the
``rack_aware_assignment_tags`` its assignor places standbys by."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from streamtasks.app import App, make_app_config
from streamtasks.errors import ConfigError
from streamtasks.protocol.userdata import decode_subscription_info
from tests.app.test_app import joining, make


def test_the_subscription_carries_endpoint_rack_and_client_tags(tmp_path: Path) -> None:
    app = make(
        tmp_path,
        application_server="10.0.0.7:8080",
        rack="rack-1",
        client_tags={"zone": "eu-1a", "cluster": "k1"},
        rack_aware_assignment_tags=["zone"],
    )
    app.process_id = uuid.uuid4()
    info = decode_subscription_info(joining(app))
    assert info.endpoint == "10.0.0.7:8080"
    assert info.rack == "rack-1"
    assert dict(info.client_tags) == {"zone": "eu-1a", "cluster": "k1"}
    assert app.assignor._configs.rack_aware_assignment_tags == ("zone",)
    assert ("GET", "/stores/{store}/{key}") in app.http.routes("10.0.0.7", 8080)


def test_without_application_server_there_is_no_endpoint_and_no_server(tmp_path: Path) -> None:
    app: App = make(tmp_path)
    app.process_id = uuid.uuid4()
    assert decode_subscription_info(joining(app)).endpoint is None
    assert app.http.addresses == ()


def test_kafka_property_names_are_accepted() -> None:
    cfg = make_app_config(
        {
            "application.id": "a",
            "bootstrap.servers": "h:9092",
            "application.server": "[::1]:9000",
            "rack.aware.assignment.tags": ["zone", "cluster"],
        }
    )
    assert cfg.application_server == "[::1]:9000"
    assert cfg.rack_aware_assignment_tags == ("zone", "cluster")


@pytest.mark.parametrize("bad", ["nohost", "h:0", "h:99999", ":80", "h:x"])
def test_a_malformed_application_server_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="application_server"):
        make_app_config(application_id="a", bootstrap_servers="h:9092", application_server=bad)


def test_under_kip848_the_client_side_metadata_carries_the_same_endpoint_and_tags(tmp_path: Path) -> None:
    """KIP-848 on ``streamtasks coordinator``: the app's assignor writes the same
    SubscriptionInfo as its assignor metadata, so its endpoint, rack and tags reach the
    client-side assignment (and the AssignmentInfo's tasks by host) as on the classic protocol."""
    from streamtasks.membership.consumer import metadata_from_hook

    app = make(
        tmp_path,
        group_protocol="consumer",
        application_server="h:1",
        rack="r1",
        client_tags={"zone": "z1"},
    )
    app.process_id = uuid.uuid4()
    meta = metadata_from_hook(app.assignor, topics=("lines",))
    info = decode_subscription_info(meta.metadata_bytes)
    assert (info.endpoint, info.rack, dict(info.client_tags)) == ("h:1", "r1", {"zone": "z1"})
