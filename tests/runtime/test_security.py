"""Client security settings: aliases, validation, secrets kept out of every rendering."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.errors import ConfigError
from streamtasks.runtime.config import ConsumerConfig, make_config
from streamtasks.runtime.security import (
    ClientSettings,
    SecuritySettings,
    client_config_path,
    load_cert_chain,
    load_client_config,
    make_client_settings,
)

SECRET = "s3cret-Pa55word"


class Provider:
    def __init__(self) -> None:
        self.calls = 0

    async def token(self) -> str:
        self.calls += 1
        return "header.payload."


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("certs"))


def _renderings(model: SecuritySettings) -> str:
    return "\n".join(
        [repr(model), str(model), repr(model.model_dump()), str(model.model_dump()), model.model_dump_json()]
    )


@pytest.mark.parametrize(
    "values",
    [
        # aiokafka's names
        {
            "security_protocol": "sasl_ssl",
            "sasl_mechanism": "scram-sha-512",
            "sasl_plain_username": "app",
            "sasl_plain_password": SECRET,
        },
        # Kafka Java's names (the JAAS line of a --command-config file)
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="app" password="{SECRET}";',
        },
        # librdkafka's names
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "app",
            "sasl.password": SECRET,
        },
    ],
    ids=["aiokafka", "java", "librdkafka"],
)
def test_sasl_aliases_give_the_same_settings(values: dict[str, str], kit: CertKit) -> None:
    cafile_key = "ssl_cafile" if "security_protocol" in values else "ssl.ca.location"
    settings = make_client_settings(values, bootstrap_servers="broker:9093", **{cafile_key: str(kit.ca_cert)})
    assert settings.security_protocol == "SASL_SSL"
    assert settings.sasl_mechanism == "SCRAM-SHA-512"
    assert settings.sasl_plain_username == "app"
    assert settings.sasl_plain_password is not None
    assert settings.sasl_plain_password.get_secret_value() == SECRET
    assert settings.ssl_cafile == kit.ca_cert
    assert SECRET not in _renderings(settings)


def test_ssl_aliases_and_hostname_check(kit: CertKit) -> None:
    settings = make_client_settings(
        {
            "bootstrap.servers": "broker:9093",
            "security.protocol": "SSL",
            "ssl.truststore.location": str(kit.ca_cert),
            "ssl.truststore.type": "PEM",
            "ssl.certificate.location": str(kit.client_cert),
            "ssl.key.location": str(kit.encrypted_key),
            "ssl.key.password": kit.key_password.get_secret_value(),
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (settings.ssl_cafile, settings.ssl_certfile, settings.ssl_keyfile) == (
        kit.ca_cert,
        kit.client_cert,
        kit.encrypted_key,
    )
    assert settings.ssl_check_hostname is False
    context = settings.ssl_context()
    assert context is not None
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert kit.key_password.get_secret_value() not in _renderings(settings)
    https = make_client_settings(
        bootstrap_servers="b:1", security_protocol="SSL", **{"ssl.endpoint.identification.algorithm": "HTTPS"}
    )
    assert https.ssl_check_hostname is True
    assert https.ssl_context() is not None
    assert https.ssl_context() is https.ssl_context()  # built once
    assert make_client_settings(bootstrap_servers="b:1").ssl_context() is None


def test_a_ready_ssl_context_and_a_token_provider_pass_through() -> None:
    context = ssl.create_default_context()
    provider = Provider()
    settings = ClientSettings(
        bootstrap_servers="b:1",
        security_protocol="SASL_SSL",
        ssl_context=context,
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    assert settings.ssl_context() is context
    kwargs = settings.aiokafka_kwargs()
    assert kwargs["ssl_context"] is context
    assert kwargs["sasl_mechanism"] == "OAUTHBEARER"
    assert json.loads(settings.model_dump_json())["custom_ssl_context"] == "SSLContext"
    # a python dump keeps the objects, so a config rebuilt from it keeps them
    again = ClientSettings.model_validate(settings.model_dump())
    assert again.custom_ssl_context is context
    assert again.sasl_oauth_token_provider is provider


def test_aiokafka_kwargs_for_sasl_plain() -> None:
    settings = ClientSettings(
        bootstrap_servers="b:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="app",
        sasl_plain_password=SecretStr(SECRET),
    )
    assert settings.aiokafka_kwargs() == {
        "bootstrap_servers": "b:1",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "app",
        "sasl_plain_password": SECRET,
    }
    assert settings.security().aiokafka_kwargs()["sasl_plain_username"] == "app"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"security_protocol": "SASL_SSL"}, "security_protocol SASL_SSL needs sasl_mechanism"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username": "app"},
            "sasl_mechanism PLAIN needs sasl_plain_password",
        ),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_password": SECRET,
            },
            "sasl_mechanism SCRAM-SHA-256 needs sasl_plain_username",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"},
            "OAUTHBEARER needs sasl_oauth_token_provider",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"},
            "sasl_mechanism: Value error, unknown SASL mechanism 'GSSAPI'",
        ),
        ({"sasl_plain_password": SECRET}, "sasl_plain_password set but security_protocol is PLAINTEXT"),
        ({"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"}, "ssl_cafile: no such file"),
        ({"security_protocol": "SSL", "ssl.key.location": "/nonexistent/k.pem"}, "ssl_keyfile: no such file"),
        (
            {"security_protocol": "SSL", "ssl_password": SECRET},
            "ssl_password (the client key's password) needs",
        ),
        ({"security_protocol": "TLS"}, "security_protocol: Input should be"),
        ({"sasl.pasword": SECRET}, "sasl.pasword: Extra inputs are not permitted"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "must be 'https' or empty"),
        ({"ssl.truststore.type": "JKS"}, "only PEM trust stores"),
        ({"sasl.jaas.config": f'Foo required password="{SECRET}";'}, "sasl.jaas.config: expected"),
        (
            {
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="a" password="{SECRET}";',
            },
            "login module is for SCRAM-SHA-256/SCRAM-SHA-512",
        ),
    ],
)
def test_bad_settings_name_the_field_and_never_the_secret(values: dict[str, str], expected: str) -> None:
    for build in (
        lambda: make_client_settings(values, bootstrap_servers="b:1"),
        lambda: make_config(values, bootstrap_servers="b:1", group_id="g"),
    ):
        with pytest.raises(ConfigError) as caught:
            build()
        assert expected in str(caught.value)
        assert SECRET not in str(caught.value)


def test_direct_construction_errors_hide_the_input() -> None:
    with pytest.raises(ValueError, match="needs sasl_mechanism") as caught:
        ClientSettings(
            bootstrap_servers="b:1", security_protocol="SASL_SSL", sasl_plain_password=SecretStr(SECRET)
        )
    assert SECRET not in str(caught.value)


def test_ssl_context_errors_name_the_setting(kit: CertKit, tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.jks"
    not_pem.write_bytes(b"\xfe\xed\xfe\xed binary keystore")
    with pytest.raises(ConfigError, match="ssl_cafile: cannot load the CA file"):
        ClientSettings(bootstrap_servers="b:1", security_protocol="SSL", ssl_cafile=not_pem).ssl_context()
    wrong = "not-the-password"
    settings = ClientSettings(
        bootstrap_servers="b:1",
        security_protocol="SSL",
        ssl_certfile=kit.client_cert,
        ssl_keyfile=kit.encrypted_key,
        ssl_password=SecretStr(wrong),
    )
    with pytest.raises(
        ConfigError, match="ssl_certfile/ssl_keyfile: cannot load the client certificate"
    ) as e:
        settings.ssl_context()
    assert wrong not in str(e.value)


def test_load_cert_chain_serves_client_and_server_contexts(kit: CertKit, tmp_path: Path) -> None:
    for purpose in (ssl.PROTOCOL_TLS_CLIENT, ssl.PROTOCOL_TLS_SERVER):
        context = ssl.SSLContext(purpose)
        load_cert_chain(context, kit.client_cert, kit.encrypted_key, kit.key_password, what="x")
        with pytest.raises(ConfigError) as wrong:
            load_cert_chain(
                context,
                kit.client_cert,
                kit.encrypted_key,
                SecretStr("not-the-password"),
                what="cert c / key k",
            )
        assert str(wrong.value).startswith("cert c / key k: ")
        assert str(wrong.value).endswith(" (wrong key password?)")
        assert "not-the-password" not in str(wrong.value)
        with pytest.raises(ConfigError) as missing:
            load_cert_chain(context, tmp_path / "nope.pem", None, None, what="missing")
        assert str(missing.value).startswith("missing: ")
        assert "wrong key password" not in str(missing.value)


def test_consumer_config_carries_security_and_gives_client_settings(kit: CertKit) -> None:
    config = make_config(
        {
            "bootstrap.servers": "broker:9093",
            "group.id": "g",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "app",
            "sasl.password": SECRET,
            "ssl.ca.location": str(kit.ca_cert),
        }
    )
    client = config.client_settings()
    assert isinstance(client, ClientSettings)
    assert (client.bootstrap_servers, client.security_protocol, client.ssl_cafile) == (
        "broker:9093",
        "SASL_SSL",
        kit.ca_cert,
    )
    assert SECRET not in _renderings(config) + _renderings(client)
    assert isinstance(config, ConsumerConfig)
    with pytest.raises(ConfigError, match="no_such_setting: Extra inputs are not permitted"):
        make_config(bootstrap_servers="b:1", group_id="g", no_such_setting=1)


def test_app_config_hands_security_to_its_consumer(kit: CertKit) -> None:
    from streamtasks.app.config import make_app_config

    app = make_app_config(
        application_id="a",
        bootstrap_servers="broker:9093",
        security_protocol="SSL",
        ssl_cafile=str(kit.ca_cert),
    )
    assert app.client_settings().ssl_cafile == kit.ca_cert
    consumer = make_config(app.consumer_settings())
    assert (consumer.security_protocol, consumer.ssl_cafile) == ("SSL", kit.ca_cert)
    plain = make_app_config(application_id="a", bootstrap_servers="broker:9093")
    assert "security_protocol" not in plain.consumer_settings()


def test_load_client_config_properties_and_yaml(tmp_path: Path, kit: CertKit) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        "# a Kafka tool's --command-config\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="app" password="{SECRET}";\n'
        f"ssl.truststore.location: {kit.ca_cert}\n"
        "ssl.endpoint.identification.algorithm=https\n"
    )
    values = load_client_config(props)
    assert "bootstrap_servers" not in values
    settings = ClientSettings(bootstrap_servers="b:1", **values)
    assert (settings.sasl_mechanism, settings.sasl_plain_username, settings.ssl_check_hostname) == (
        "PLAIN",
        "app",
        True,
    )
    assert isinstance(values["sasl_plain_password"], SecretStr)
    yml = tmp_path / "client.yaml"
    yml.write_text(
        "bootstrap_servers: broker:9093\nsecurity_protocol: SASL_SSL\nsasl_mechanism: SCRAM-SHA-256\n"
        f"sasl_plain_username: app\nsasl_plain_password: {SECRET}\nssl_cafile: {kit.ca_cert}\n"
    )
    values = load_client_config(yml)
    assert values["bootstrap_servers"] == "broker:9093"
    assert make_config(values, group_id="g").sasl_mechanism == "SCRAM-SHA-256"


def test_load_client_config_errors_name_the_file_and_setting(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text(f"security.protocol=SASL_SSL\nsasl.password={SECRET}\nsasl.mechanism=PLAIN\n")
    with pytest.raises(ConfigError, match=r"bad\.properties.*needs sasl_plain_username") as e:
        load_client_config(bad)
    assert SECRET not in str(e.value)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(f"security_protocol: SSL\nssl_keystore_password: {SECRET}\n")
    with pytest.raises(ConfigError, match="ssl_keystore_password: Extra inputs") as e:
        load_client_config(unknown)
    assert SECRET not in str(e.value)
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_client_config(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match=r"missing\.properties"):
        load_client_config(tmp_path / "missing.properties")


def test_client_config_path_prefers_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTASKS_CLIENT_CONFIG", "/from/env.properties")
    assert client_config_path("/from/flag.yaml") == Path("/from/flag.yaml")
    assert client_config_path(None) == Path("/from/env.properties")
    monkeypatch.delenv("STREAMTASKS_CLIENT_CONFIG")
    assert client_config_path(None) is None


def test_the_package_root_offers_the_settings_and_the_errors() -> None:
    import streamtasks
    from streamtasks.errors import AuthenticationError, AuthorizationError, TlsError

    assert streamtasks.ClientSettings is ClientSettings
    assert streamtasks.load_client_config is load_client_config
    assert (streamtasks.AuthenticationError, streamtasks.AuthorizationError, streamtasks.TlsError) == (
        AuthenticationError,
        AuthorizationError,
        TlsError,
    )
    assert issubclass(streamtasks.TlsError, streamtasks.ConnectionSecurityError)
    assert not issubclass(streamtasks.ConnectionSecurityError, streamtasks.BrokerError)  # never retried
