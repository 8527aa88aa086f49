"""Client settings across a process boundary, and in the names of other Kafka clients.

A command or drill that starts child processes (workers, peers, a coordinator) hands them its
:class:`~streamtasks.runtime.security.ClientSettings` as a ``--client-config FILE`` argument:
:func:`child_client_config` writes the security settings once into a ``0600`` YAML file in a
private ``0700`` directory (removed when the process exits), so a password never appears in a child's
argv, environment or log. The child reads it back with :func:`settings_from_args`, which also
serves the command line's ``--client-config FILE`` / ``$STREAMTASKS_CLIENT_CONFIG``
(:func:`add_client_config_argument`).

:func:`librdkafka_config`, :func:`kafka_python_config` and :func:`java_properties` translate the
settings for confluent-kafka, kafka-python and the Java client (plain-text secrets, as those
clients take them: hand them over, never log them).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr

from streamtasks.errors import ConfigError
from streamtasks.runtime.security import (
    CLIENT_CONFIG_ENV,
    ClientSettings,
    SecuritySettings,
    client_config_path,
    load_client_config,
    make_client_settings,
    security_fields,
)

__all__ = [
    "add_client_config_argument",
    "child_client_config",
    "java_properties",
    "kafka_python_config",
    "librdkafka_config",
    "security_kwargs",
    "settings_from_args",
    "write_client_config",
    "write_properties",
]

#: Settings that are objects of this process and cannot be written to a file.
_LIVE_OBJECTS = ("custom_ssl_context", "sasl_oauth_token_provider")


def add_client_config_argument(parser: argparse.ArgumentParser) -> None:
    """``--client-config FILE``: the cluster's TLS/SASL settings (``$STREAMTASKS_CLIENT_CONFIG``)."""
    parser.add_argument(
        "--client-config",
        metavar="FILE",
        default=None,
        help="a .properties or YAML file of the cluster's TLS/SASL client settings (security.protocol, "
        f"sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...); default: ${CLIENT_CONFIG_ENV}",
    )


def settings_from_args(bootstrap: str | None, client_config: str | os.PathLike[str] | None) -> ClientSettings:
    """The client settings of a command: ``bootstrap`` (wins over a ``bootstrap.servers`` in the
    file) and the file ``client_config`` (else ``$STREAMTASKS_CLIENT_CONFIG``; neither: PLAINTEXT).
    :class:`ConfigError` naming the file and the setting, never a secret."""
    path = client_config_path(client_config)
    values: dict[str, Any] = load_client_config(path) if path is not None else {}
    if bootstrap:
        values["bootstrap_servers"] = bootstrap
    if "bootstrap_servers" not in values:
        where = f" (nor does {path})" if path is not None else ""
        raise ConfigError(f"no bootstrap servers: --bootstrap-servers is not given{where}")
    return make_client_settings(values)


def security_kwargs(settings: SecuritySettings) -> dict[str, Any]:
    """The security settings of ``settings`` that are set, by field name: keyword arguments for
    a :class:`~streamtasks.Consumer`, an :class:`~streamtasks.App` config or ``ClientSettings``."""
    return {k: v for k, v in security_fields(settings).items() if v is not None}


def _file_values(settings: SecuritySettings) -> dict[str, Any]:
    fields = security_fields(settings)
    live = [name for name in _LIVE_OBJECTS if fields[name] is not None]
    if live:
        raise ConfigError(
            f"{', '.join(live)} cannot be handed to a child process (give files: ssl_cafile, ...;"
            " OAUTHBEARER token providers stay in-process)"
        )
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if value is None or (name == "security_protocol" and value == "PLAINTEXT"):
            continue
        if name == "ssl_check_hostname" and value:
            continue
        if isinstance(value, SecretStr):
            out[name] = value.get_secret_value()
        else:
            out[name] = str(value) if isinstance(value, Path) else value
    return out


def write_client_config(settings: SecuritySettings, path: Path) -> Path:
    """Write the security settings of ``settings`` (not its bootstrap servers) to ``path``, a new
    file readable by this user only (``0600``); :func:`load_client_config` reads it back."""
    text = yaml.safe_dump(_file_values(settings), sort_keys=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def child_client_config(settings: SecuritySettings | None) -> list[str]:
    """The arguments that give a child process ``settings``' security: ``["--client-config",
    FILE]``, or ``[]`` for PLAINTEXT. The file (0600, in a private 0700 directory) is written
    once per distinct settings and removed when this process exits."""
    if settings is None:
        return []
    values = _file_values(settings)
    if not values:
        return []
    key = tuple(sorted((k, repr(v) if not isinstance(v, str) else v) for k, v in values.items()))
    with _lock:
        path = _written.get(key)
        if path is None or not path.exists():
            directory = Path(tempfile.mkdtemp(prefix="streamtasks-client-"))  # 0700
            atexit.register(shutil.rmtree, directory, True)
            path = write_client_config(settings, directory / "client.yaml")
            _written[key] = path
    return ["--client-config", str(path)]


_lock = threading.Lock()
_written: dict[tuple[tuple[str, Any], ...], Path] = {}


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def librdkafka_config(settings: ClientSettings) -> dict[str, str]:
    """confluent-kafka's (librdkafka's) names for ``settings`` (bootstrap servers included)."""
    config = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.security_protocol,
    }
    _refuse_live(settings, "confluent-kafka")
    if settings.uses_ssl:
        if settings.ssl_cafile is not None:
            config["ssl.ca.location"] = str(settings.ssl_cafile)
        if settings.ssl_certfile is not None:
            config["ssl.certificate.location"] = str(settings.ssl_certfile)
            config["ssl.key.location"] = str(settings.ssl_keyfile or settings.ssl_certfile)
        if settings.ssl_password is not None:
            config["ssl.key.password"] = _secret(settings.ssl_password)
        config["ssl.endpoint.identification.algorithm"] = "https" if settings.ssl_check_hostname else "none"
    if settings.uses_sasl:
        config["sasl.mechanisms"] = str(settings.sasl_mechanism)
        config["sasl.username"] = str(settings.sasl_plain_username)
        config["sasl.password"] = _secret(settings.sasl_plain_password)
    return config


def kafka_python_config(settings: ClientSettings) -> dict[str, Any]:
    """kafka-python's keyword arguments for ``settings`` (bootstrap servers included)."""
    _refuse_live(settings, "kafka-python")
    config: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": settings.security_protocol,
    }
    if settings.uses_ssl:
        config["ssl_cafile"] = str(settings.ssl_cafile) if settings.ssl_cafile else None
        config["ssl_certfile"] = str(settings.ssl_certfile) if settings.ssl_certfile else None
        config["ssl_keyfile"] = str(settings.ssl_keyfile) if settings.ssl_keyfile else None
        config["ssl_check_hostname"] = settings.ssl_check_hostname
        if settings.ssl_password is not None:
            config["ssl_password"] = _secret(settings.ssl_password)
    if settings.uses_sasl:
        config["sasl_mechanism"] = settings.sasl_mechanism
        config["sasl_plain_username"] = settings.sasl_plain_username
        config["sasl_plain_password"] = _secret(settings.sasl_plain_password)
    return config


def _jaas_quote(value: str) -> str:
    if '"' in value or "\\" in value:
        raise ConfigError(
            "sasl_plain_username/sasl_plain_password: the Java client's JAAS line takes no '\"'"
        )
    return value


def java_properties(settings: ClientSettings) -> dict[str, str]:
    """The Java client's properties for ``settings`` (PEM trust store; bootstrap servers included)."""
    _refuse_live(settings, "the Java client")
    props = {"bootstrap.servers": settings.bootstrap_servers, "security.protocol": settings.security_protocol}
    if settings.uses_ssl:
        if settings.ssl_cafile is not None:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(settings.ssl_cafile)
        if settings.ssl_certfile is not None:
            raise ConfigError("ssl_certfile: mutual TLS for the Java peer needs a PEM key store (not wired)")
        props["ssl.endpoint.identification.algorithm"] = "https" if settings.ssl_check_hostname else ""
    if settings.uses_sasl:
        mechanism = str(settings.sasl_mechanism)
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.{module} required "
            f'username="{_jaas_quote(str(settings.sasl_plain_username))}" '
            f'password="{_jaas_quote(_secret(settings.sasl_plain_password))}";'
        )
    return props


def _refuse_live(settings: SecuritySettings, client: str) -> None:
    if settings.sasl_mechanism == "OAUTHBEARER" or settings.custom_ssl_context is not None:
        raise ConfigError(
            f"{client} cannot take sasl_oauth_token_provider or ssl_context objects: give it files "
            "(ssl_cafile, ...) and PLAIN or SCRAM"
        )


def write_properties(values: dict[str, str], path: Path) -> Path:
    """``values`` as a Java ``.properties`` file readable by this user only (``0600``)."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(f"{escape(k)}={escape(v)}\n" for k, v in values.items())
    return path
