"""SecuredCluster without a broker: the unsecured JWT, the settings per user and mechanism, and
what the broker's configuration cannot hold."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.embedded.kafka_broker import server_properties
from streamtasks.embedded.secure_broker import APP_PREFIXES, SecureKafkaBroker, acl_bindings
from streamtasks.embedded.secure_cluster import SecuredCluster, UnsecuredTokenProvider, unsecured_jwt
from streamtasks.errors import BrokerError


def _decode(part: str) -> dict[str, object]:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def cluster(kit: CertKit) -> SecuredCluster:
    return SecuredCluster(
        plaintext_bootstrap="127.0.0.1:1",
        sasl_ssl_bootstrap="127.0.0.1:2",
        ssl_bootstrap="127.0.0.1:3",
        certs=kit,
        users={"app": SecretStr("app-secret"), "norights": SecretStr("nr-secret")},
    )


def test_the_unsecured_jwt_is_header_payload_and_an_empty_signature() -> None:
    token = unsecured_jwt("app", now=1_700_000_000.7, lifetime_s=60)
    header, payload, signature = token.split(".")
    assert signature == ""
    assert "=" not in token
    assert _decode(header) == {"alg": "none"}
    assert _decode(payload) == {"sub": "app", "iat": 1_700_000_000, "exp": 1_700_000_060, "scope": ""}


def test_the_token_provider_gives_aiokafka_a_fresh_token_for_its_user() -> None:
    provider = UnsecuredTokenProvider("norights")
    claims = _decode(asyncio.run(provider.token()).split(".")[1])
    assert claims["sub"] == "norights"
    assert repr(provider) == "UnsecuredTokenProvider(subject='norights')"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_settings_keep_the_password_secret(cluster: SecuredCluster, mechanism: str) -> None:
    settings = cluster.settings("app", mechanism)
    assert settings == {
        "bootstrap_servers": "127.0.0.1:2",
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(cluster.certs.ca_cert),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "app",
        "sasl_plain_password": SecretStr("app-secret"),
    }
    assert "app-secret" not in repr(settings) + repr(cluster)
    assert cluster.kafka_python_config("app", mechanism)["sasl_plain_password"] == "app-secret"
    assert cluster.aiokafka_kwargs("app", mechanism)["sasl_plain_password"] == "app-secret"
    assert cluster.librdkafka_config("app", mechanism)["sasl.password"] == "app-secret"


def test_oauthbearer_settings_carry_a_token_provider(cluster: SecuredCluster) -> None:
    settings = cluster.settings("norights", "OAUTHBEARER")
    assert isinstance(settings["sasl_oauth_token_provider"], UnsecuredTokenProvider)
    assert "sasl_plain_password" not in settings
    config = cluster.librdkafka_config("norights", "OAUTHBEARER")
    assert config["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert config["sasl.oauthbearer.config"] == "principal=norights"


def test_mutual_tls_settings_name_the_client_certificate(cluster: SecuredCluster) -> None:
    assert cluster.ssl_settings() == {
        "bootstrap_servers": "127.0.0.1:3",
        "security_protocol": "SSL",
        "ssl_cafile": str(cluster.certs.ca_cert),
        "ssl_certfile": str(cluster.certs.client_cert),
        "ssl_keyfile": str(cluster.certs.client_key),
    }
    assert cluster.aiokafka_kwargs(None)["security_protocol"] == "SSL"


def test_unknown_users_and_mechanisms_are_named(cluster: SecuredCluster) -> None:
    with pytest.raises(BrokerError, match="no user 'nobody'"):
        cluster.settings("nobody", "PLAIN")
    with pytest.raises(BrokerError, match="not 'GSSAPI'"):
        cluster.settings("app", "GSSAPI")


@pytest.mark.parametrize("bad", ["with space", 'qu"ote', "com,ma", "br]acket", ""])
def test_a_password_the_config_cannot_hold_is_refused_without_showing_it(bad: str) -> None:
    with pytest.raises(BrokerError, match="the password of 'app'") as caught:
        SecureKafkaBroker(passwords={"app": SecretStr(bad)})
    assert not bad or bad not in str(caught.value)


def test_the_acl_convention_grants_prefixes_and_the_cluster_only() -> None:
    bindings = acl_bindings(("User:app",))
    prefixed = {(resource, name) for resource, name, pattern, _, _ in bindings if pattern == 4}
    assert prefixed == {(r, p) for r in (2, 3, 5) for p in APP_PREFIXES}  # topic, group, txn id
    assert {op for resource, _, _, _, op in bindings if resource == 4} == {8, 12}  # Describe, IdempotentWrite


def test_more_listeners_are_named_after_their_protocol(tmp_path: Path) -> None:
    props = server_properties(
        host="127.0.0.1",
        port=1,
        controller_port=4,
        data_dir=tmp_path,
        configs={},
        more_listeners={"SASL_SSL": 2, "SSL": 3},
    )
    lines = dict(line.split("=", 1) for line in props.splitlines())
    assert lines["listeners"] == (
        "PLAINTEXT://127.0.0.1:1,SASL_SSL://127.0.0.1:2,SSL://127.0.0.1:3,CONTROLLER://127.0.0.1:4"
    )
    assert lines["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT"
    )
