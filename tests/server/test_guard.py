"""The listener's settings and principals: which combinations are refused (one ConfigError
each, before anything starts), the TLS context from the kit's files (an encrypted key with its
password; a wrong password named without the password), the CLI flags, and the principal Kafka's
default builder gives a client certificate."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamtasks.embedded.certs import make_cert_kit
from streamtasks.errors import ConfigError
from streamtasks.server import ListenerSettings, add_coordinator_arguments, config_from_args
from streamtasks.server.guard import principal_from_certificate

ROOT = Path(__file__).resolve().parents[2]


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_coordinator_arguments(parser)
    return parser.parse_args(list(argv))


def test_principal_is_the_subject_dn_most_specific_first() -> None:
    cert = {
        "subject": (
            (("countryName", "DE"),),
            (("organizationName", "Acme, Inc."),),
            (("organizationalUnitName", "streams"),),
            (("commonName", "app-1"),),
        )
    }
    assert principal_from_certificate(cert) == r"User:CN=app-1,OU=streams,O=Acme\, Inc.,C=DE"
    assert principal_from_certificate({"subject": ((("commonName", "client"),),)}) == "User:CN=client"
    assert principal_from_certificate(None) is None
    assert principal_from_certificate({}) is None


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--tls-cert", "c.pem"), "both a certificate and its key"),
        (("--tls-client-ca", "ca.pem"), "need TLS"),
        (("--sasl-mechanisms", "PLAIN"), "go together"),
        (("--credentials", "u.json"), "go together"),
        (("--sasl-mechanisms", "GSSAPI", "--credentials", "u.json"), "unknown SASL mechanism"),
        (("--sasl-mechanisms", "PLAIN", "--credentials", "u.json", "--session-lifetime-ms", "0"), "positive"),
        (("--acl-file", "a.txt", "--routing", "proxy"), "--routing direct"),
    ],
)
def test_bad_combinations_are_one_config_error(flags: tuple[str, ...], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        config_from_args(args(*flags), "localhost:9092")


def test_a_secured_listener_defaults_to_direct_routing_an_open_one_to_proxy() -> None:
    secured = config_from_args(
        args("--sasl-mechanisms", "scram-sha-512", "--credentials", "u.json"), "k:9092"
    )
    assert secured.routing == "direct"
    assert secured.listener.sasl_mechanisms == ("SCRAM-SHA-512",)
    assert secured.listener.guarded
    assert config_from_args(args(), "k:9092").routing == "proxy"
    assert not config_from_args(args(), "k:9092").listener.guarded


def test_tls_context_with_an_encrypted_key_and_its_password_file(tmp_path: Path) -> None:
    kit = make_cert_kit(tmp_path)
    password_file = tmp_path / "key-password"
    password_file.write_text(kit.key_password.get_secret_value() + "\n")
    config = config_from_args(
        args(
            "--tls-cert",
            str(kit.client_cert),
            "--tls-key",
            str(kit.encrypted_key),
            "--tls-key-password-file",
            str(password_file),
            "--tls-client-ca",
            str(kit.ca_cert),
        ),
        "k:9092",
    )
    assert kit.key_password.get_secret_value() not in repr(config)
    context = config.listener.ssl_context()
    assert context is not None
    assert context.verify_mode.name == "CERT_REQUIRED"


def test_a_wrong_key_password_names_the_files_never_the_password(tmp_path: Path) -> None:
    kit = make_cert_kit(tmp_path)
    listener = ListenerSettings(
        tls_certfile=kit.client_cert,
        tls_keyfile=kit.encrypted_key,
        tls_key_password=SecretStr("not-the-password-42"),
    )
    with pytest.raises(ConfigError) as caught:
        listener.ssl_context()
    assert str(kit.encrypted_key) in str(caught.value)
    assert "wrong key password?" in str(caught.value)
    assert "not-the-password-42" not in str(caught.value)
    with pytest.raises(ConfigError, match="cannot be used"):
        ListenerSettings(tls_certfile=tmp_path / "nope.pem", tls_keyfile=kit.client_key).ssl_context()


def test_the_cli_refuses_bad_security_in_one_line_before_starting_anything(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streamtasks", "coordinator", "--sasl-mechanisms", "PLAIN"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "streamtasks: error: the listener's security: SASL mechanisms and a credentials file go together"
    ]
