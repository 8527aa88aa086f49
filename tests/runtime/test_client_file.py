"""Client settings across a process boundary (a 0600 file) and in other clients' names."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.errors import ConfigError
from streamtasks.runtime.client_file import (
    child_client_config,
    java_properties,
    kafka_python_config,
    librdkafka_config,
    security_kwargs,
    settings_from_args,
    write_client_config,
    write_properties,
)
from streamtasks.runtime.security import CLIENT_CONFIG_ENV, ClientSettings, load_client_config

SECRET = "s3cret-Pa55word"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def scram(kit: CertKit) -> ClientSettings:
    return ClientSettings(
        bootstrap_servers="broker:9093",
        security_protocol="SASL_SSL",
        ssl_cafile=kit.ca_cert,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="app",
        sasl_plain_password=SecretStr(SECRET),
    )


def test_the_file_is_private_and_reads_back_the_same_settings(scram: ClientSettings, tmp_path: Path) -> None:
    path = write_client_config(scram, tmp_path / "client.yaml")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "broker:9093" not in path.read_text()  # the bootstrap servers travel in argv
    back = ClientSettings(bootstrap_servers="other:1", **load_client_config(path))
    assert back.security() == scram.security()
    assert back.sasl_plain_password is not None
    assert back.sasl_plain_password.get_secret_value() == SECRET
    with pytest.raises(FileExistsError):  # never overwritten (O_EXCL)
        write_client_config(scram, path)


def test_child_arguments_name_one_file_per_settings_and_none_for_plaintext(scram: ClientSettings) -> None:
    assert child_client_config(None) == []
    assert child_client_config(ClientSettings.of("h:1")) == []
    first = child_client_config(scram)
    assert first[0] == "--client-config"
    assert SECRET not in " ".join(first)
    assert child_client_config(scram) == first
    assert stat.S_IMODE(Path(first[1]).parent.stat().st_mode) == 0o700


def test_objects_cannot_cross_to_a_child(kit: CertKit) -> None:
    class Provider:
        async def token(self) -> str:
            return "t"

    oauth = ClientSettings(
        bootstrap_servers="h:1",
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
    )
    with pytest.raises(ConfigError, match="sasl_oauth_token_provider"):
        child_client_config(oauth)
    with pytest.raises(ConfigError, match="confluent-kafka cannot take sasl_oauth_token_provider"):
        librdkafka_config(oauth)


def test_settings_from_args_bootstrap_wins_env_is_read(
    scram: ClientSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_client_config(scram, tmp_path / "c.yaml")
    assert settings_from_args("coordinator:9092", path).bootstrap_servers == "coordinator:9092"
    monkeypatch.setenv(CLIENT_CONFIG_ENV, str(path))
    from_env = settings_from_args("b:1", None)
    assert from_env.security_protocol == "SASL_SSL"
    with pytest.raises(ConfigError, match="no bootstrap servers"):
        settings_from_args(None, None)
    monkeypatch.delenv(CLIENT_CONFIG_ENV)
    assert settings_from_args("b:1", None) == ClientSettings(bootstrap_servers="b:1")
    props = tmp_path / "with-bootstrap.properties"
    props.write_text("bootstrap.servers=from-file:9093\nsecurity.protocol=PLAINTEXT\n")
    assert settings_from_args(None, props).bootstrap_servers == "from-file:9093"


def test_other_clients_names(scram: ClientSettings, kit: CertKit) -> None:
    assert librdkafka_config(scram) == {
        "bootstrap.servers": "broker:9093",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(kit.ca_cert),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "app",
        "sasl.password": SECRET,
    }
    kp = kafka_python_config(scram)
    assert kp["sasl_plain_password"] == SECRET
    assert kp["ssl_cafile"] == str(kit.ca_cert)
    assert kp["sasl_mechanism"] == "SCRAM-SHA-512"
    java = java_properties(scram)
    assert java["ssl.truststore.type"] == "PEM"
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="app" password="{SECRET}";'
    )
    # the JAAS line reads back as the same settings
    again = ClientSettings.model_validate(java)
    assert again.security() == scram.security()
    assert security_kwargs(scram)["sasl_plain_username"] == "app"


def test_properties_file_is_private(tmp_path: Path) -> None:
    path = write_properties({"a": "b=c", "d": "e\\f"}, tmp_path / "p.properties")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "a=b=c\nd=e\\\\f\n"
