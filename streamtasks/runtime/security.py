"""How a client reaches a secured cluster: TLS and SASL settings, with aiokafka's names and
Kafka's / librdkafka's dotted names accepted as aliases::

    SecuritySettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                     sasl_plain_username="app", sasl_plain_password="...", ssl_cafile="ca.pem")
    ClientSettings.model_validate({"bootstrap.servers": "broker:9093",
                                   "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                   "sasl.username": "app", "sasl.password": "..."})

:class:`ClientSettings` (bootstrap servers + security) is the one object that travels wherever a
bootstrap string used to. ``ConsumerConfig`` and ``AppConfig`` inherit :class:`SecuritySettings`
and give it with ``client_settings()``. :meth:`SecuritySettings.ssl_context` builds the standard
library's TLS context, :meth:`SecuritySettings.aiokafka_kwargs` the keyword arguments of aiokafka's
clients, :func:`load_client_config` reads a ``.properties`` or YAML file of these settings (Kafka
tools' ``--command-config``; ``STREAMTASKS_CLIENT_CONFIG``).

Passwords and tokens are :class:`pydantic.SecretStr`: no repr, str, dump, JSON dump or error
message shows them (``hide_input_in_errors``), and
:func:`streamtasks.runtime.aiokafka_redaction.install_log_redaction` keeps them out of aiokafka's
DEBUG log.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from streamtasks.errors import ConfigError
from streamtasks.protocol.sasl import MECHANISMS, OAUTHBEARER

__all__ = [
    "CLIENT_CONFIG_ENV",
    "ClientSettings",
    "SecuritySettings",
    "TokenProvider",
    "client_config_path",
    "describe_errors",
    "load_cert_chain",
    "load_client_config",
    "make_client_settings",
    "security_fields",
]

#: The environment variable naming a client config file (``--client-config`` wins over it).
CLIENT_CONFIG_ENV = "STREAMTASKS_CLIENT_CONFIG"

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


@runtime_checkable
class TokenProvider(Protocol):
    """What OAUTHBEARER asks for a token (aiokafka's ``AbstractTokenProvider`` shape); an
    optional ``extensions() -> dict[str, str]`` adds SASL extensions."""

    async def token(self) -> str: ...


def _aliases(*names: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(*names))


_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
_JAAS = re.compile(r'\s*(?P<module>[\w.$]+)\s+required\s*(?P<opts>(?:[\w.]+\s*=\s*"[^"]*"\s*)*);?\s*')


def _parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """Kafka Java's ``sasl.jaas.config``: the login module and its options (values quoted)."""
    match = _JAAS.fullmatch(text)
    if match is None or match["module"] not in _JAAS_MODULES:
        raise ValueError(
            "sasl.jaas.config: expected '<PlainLoginModule|ScramLoginModule> required "
            'username="..." password="...";\''
        )
    return match["module"], dict(re.findall(r'([\w.]+)\s*=\s*"([^"]*)"', match["opts"]))


class SecuritySettings(BaseModel):
    """TLS and SASL settings of a Kafka client (see the module docstring)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        arbitrary_types_allowed=True,
        hide_input_in_errors=True,
    )

    security_protocol: SecurityProtocol = Field(
        default="PLAINTEXT", validation_alias=AliasChoices("security_protocol", "security.protocol")
    )
    #: PEM file of the CAs that sign the brokers' certificates (None: the system's CAs).
    ssl_cafile: Path | None = _aliases("ssl_cafile", "ssl.ca.location", "ssl.truststore.location")
    #: PEM client certificate (mutual TLS) and its key.
    ssl_certfile: Path | None = _aliases("ssl_certfile", "ssl.certificate.location")
    ssl_keyfile: Path | None = _aliases("ssl_keyfile", "ssl.key.location")
    ssl_password: SecretStr | None = _aliases("ssl_password", "ssl.key.password")
    #: ``ssl.endpoint.identification.algorithm``: ``https`` (true) or empty (false).
    ssl_check_hostname: bool = Field(
        default=True,
        validation_alias=AliasChoices("ssl_check_hostname"),
    )
    #: A ready context (instead of the file settings above); passed as ``ssl_context``.
    custom_ssl_context: InstanceOf[ssl.SSLContext] | None = Field(default=None, alias="ssl_context")
    sasl_mechanism: str | None = _aliases("sasl_mechanism", "sasl.mechanism", "sasl.mechanisms")
    sasl_plain_username: str | None = _aliases("sasl_plain_username", "sasl.username")
    sasl_plain_password: SecretStr | None = _aliases("sasl_plain_password", "sasl.password")
    sasl_oauth_token_provider: InstanceOf[TokenProvider] | None = Field(default=None, repr=False)
    _built_context: ssl.SSLContext | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _security_kafka_names(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "ssl.endpoint.identification.algorithm" in data:
            algorithm = str(data.pop("ssl.endpoint.identification.algorithm") or "").strip().lower()
            if algorithm not in ("https", ""):
                raise ValueError("ssl.endpoint.identification.algorithm must be 'https' or empty")
            data["ssl_check_hostname"] = algorithm == "https"
        truststore_type = data.pop("ssl.truststore.type", None)
        if truststore_type is not None and str(truststore_type).upper() != "PEM":
            raise ValueError("ssl.truststore.type: only PEM trust stores are read (convert JKS/PKCS12)")
        if "sasl.jaas.config" in data:
            module, options = _parse_jaas(str(data.pop("sasl.jaas.config")))
            if set(options) - {"username", "password"}:
                raise ValueError("sasl.jaas.config: only username and password options are read")
            allowed = _JAAS_MODULES[module]
            given = [data[k] for k in ("sasl_mechanism", "sasl.mechanism", "sasl.mechanisms") if k in data]
            if given and str(given[0]).strip().upper() not in allowed:
                raise ValueError(f"sasl.jaas.config: its login module is for {'/'.join(allowed)}")
            data.setdefault("sasl_plain_username", options.get("username"))
            data.setdefault("sasl_plain_password", options.get("password"))
        return data

    @field_validator("security_protocol", "sasl_mechanism", mode="before")
    @classmethod
    def _security_upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("sasl_mechanism")
    @classmethod
    def _security_known_mechanism(cls, value: str | None) -> str | None:
        if value is not None and value not in MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {value!r} (known: {', '.join(MECHANISMS)})")
        return value

    @field_serializer("custom_ssl_context", "sasl_oauth_token_provider", when_used="json")
    def _security_object_name(self, value: Any) -> str | None:
        return None if value is None else type(value).__name__

    @model_validator(mode="after")
    def _security_check(self) -> SecuritySettings:
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # -- what the settings mean -----------------------------------------------------------

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context (the standard library's), or None for a plaintext protocol. A CA, key
        or certificate that cannot be loaded is a :class:`ConfigError` naming the setting. Built
        once per settings object (the files are read once; every connection shares it)."""
        if not self.uses_ssl:
            return None
        if self.custom_ssl_context is not None:
            return self.custom_ssl_context
        if self._built_context is None:
            self._built_context = self._build_ssl_context()
        return self._built_context

    def _build_ssl_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl_cafile: cannot load the CA file {self.ssl_cafile}: {_reason(exc)}"
            ) from None
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile is not None:
            load_cert_chain(
                context,
                self.ssl_certfile,
                self.ssl_keyfile,
                self.ssl_password,
                what=(
                    f"ssl_certfile/ssl_keyfile: cannot load the client certificate {self.ssl_certfile}"
                    f" (key {self.ssl_keyfile or 'in the same file'})"
                ),
            )
        return context

    def secrets(self) -> tuple[str, ...]:
        """The secret values (for log redaction; never print them)."""
        return tuple(
            s.get_secret_value()
            for s in (self.sasl_plain_password, self.ssl_password)
            if s is not None and s.get_secret_value()
        )

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for AIOKafkaConsumer / AIOKafkaProducer / AIOKafkaAdminClient.

        Also installs the redaction of the SASL exchange and these secrets in aiokafka's logs."""
        from streamtasks.runtime import aiokafka_redaction  # imports aiokafka: only when needed

        aiokafka_redaction.install_log_redaction(self.secrets())
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.uses_ssl:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == OAUTHBEARER:
                kwargs["sasl_oauth_token_provider"] = aiokafka_redaction.aiokafka_token_provider(
                    self.sasl_oauth_token_provider
                )
            else:
                kwargs["sasl_plain_username"] = self.sasl_plain_username
                kwargs["sasl_plain_password"] = (
                    self.sasl_plain_password.get_secret_value() if self.sasl_plain_password else None
                )
        return kwargs

    def security(self) -> SecuritySettings:
        """Just the security part (a :class:`SecuritySettings`, whatever subclass this is)."""
        return SecuritySettings.model_construct(**security_fields(self))

    def client_settings_for(self, bootstrap_servers: str) -> ClientSettings:
        """These settings with ``bootstrap_servers``."""
        return ClientSettings.model_construct(bootstrap_servers=bootstrap_servers, **security_fields(self))


def security_fields(settings: SecuritySettings) -> dict[str, Any]:
    """The :class:`SecuritySettings` fields of ``settings`` (a subclass too), by field name."""
    return {name: getattr(settings, name) for name in SecuritySettings.model_fields}


def load_cert_chain(
    context: ssl.SSLContext,
    certfile: str | Path,
    keyfile: str | Path | None,
    password: SecretStr | None,
    *,
    what: str,
) -> None:
    """Load a certificate chain and its key into ``context`` (a client's or a server's). One
    that cannot be loaded is a :class:`ConfigError` ``"{what}: {reason}"``, with a hint when a
    password was given and the key did not load; ``what`` names the setting and the files, the
    message never the password."""
    secret = password.get_secret_value() if password is not None else None
    try:
        context.load_cert_chain(certfile, keyfile, password=secret)
    except (OSError, ssl.SSLError) as exc:
        hint = " (wrong key password?)" if password is not None and isinstance(exc, ssl.SSLError) else ""
        raise ConfigError(f"{what}: {_reason(exc)}{hint}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def _problems(s: SecuritySettings) -> list[str]:
    """What is wrong with ``s``: each problem names the setting and never its value."""
    out: list[str] = []
    p = s.security_protocol
    sasl_given = [
        n
        for n in ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_oauth_token_provider")
        if getattr(s, n) is not None
    ]
    if not s.uses_sasl and sasl_given:
        out.append(f"{', '.join(sasl_given)} set but security_protocol is {p} (SASL_SSL or SASL_PLAINTEXT?)")
    ssl_given = [
        n
        for n in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "custom_ssl_context")
        if getattr(s, n) is not None
    ]
    if not s.uses_ssl and ssl_given:
        out.append(f"{', '.join(ssl_given)} set but security_protocol is {p} (SSL or SASL_SSL?)")
    if s.custom_ssl_context is not None and len(ssl_given) > 1:
        out.append("ssl_context is given: leave ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password unset")
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = getattr(s, name)
        if path is not None and not Path(path).is_file():
            out.append(f"{name}: no such file {path}")
    if s.ssl_keyfile is not None and s.ssl_certfile is None:
        out.append("ssl_keyfile needs ssl_certfile (the client certificate)")
    if s.ssl_password is not None and s.ssl_certfile is None:
        out.append("ssl_password (the client key's password) needs ssl_certfile")
    if s.uses_sasl:
        mechanism = s.sasl_mechanism
        if mechanism is None:
            out.append(f"security_protocol {p} needs sasl_mechanism ({', '.join(MECHANISMS)})")
        elif mechanism == OAUTHBEARER:
            if s.sasl_oauth_token_provider is None:
                out.append("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider")
            if s.sasl_plain_username is not None or s.sasl_plain_password is not None:
                out.append("sasl_mechanism OAUTHBEARER takes no sasl_plain_username/sasl_plain_password")
        else:
            if not s.sasl_plain_username:
                out.append(f"sasl_mechanism {mechanism} needs sasl_plain_username")
            if s.sasl_plain_password is None or not s.sasl_plain_password.get_secret_value():
                out.append(f"sasl_mechanism {mechanism} needs sasl_plain_password")
            if s.sasl_oauth_token_provider is not None:
                out.append(f"sasl_oauth_token_provider is for OAUTHBEARER, not {mechanism}")
    return out


class ClientSettings(SecuritySettings):
    """Bootstrap servers and how to reach them securely: what every connection is opened from."""

    bootstrap_servers: str = Field(
        validation_alias=AliasChoices("bootstrap_servers", "bootstrap.servers"), min_length=3
    )

    def aiokafka_kwargs(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, **super().aiokafka_kwargs()}

    def client_settings(self) -> ClientSettings:
        return self

    @classmethod
    def of(cls, bootstrap: str | ClientSettings) -> ClientSettings:
        """``bootstrap`` as client settings (a plain ``host:port[,...]`` string is PLAINTEXT)."""
        if isinstance(bootstrap, ClientSettings):
            return bootstrap
        return cls.model_construct(bootstrap_servers=bootstrap)


def client_config_path(given: str | os.PathLike[str] | None) -> Path | None:
    """The client config file: ``given`` (``--client-config``), else ``$STREAMTASKS_CLIENT_CONFIG``."""
    if given:
        return Path(given)
    from_env = os.environ.get(CLIENT_CONFIG_ENV, "").strip()
    return Path(from_env) if from_env else None


def _read_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    backslash line continuations."""
    out: dict[str, str] = {}
    logical = re.sub(r"\\\r?\n[ \t]*", "", text)
    for line in logical.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", stripped)
        if match is None:
            raise ConfigError(f"not a key=value line (line starting {stripped[:20]!r})")
        out[match[1]] = match[2]
    return out


def load_client_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings of a ``.properties`` or YAML client config file, validated (every key known,
    the rules of :class:`SecuritySettings`), by field name: pass them on as ``ClientSettings(
    bootstrap_servers=..., **settings)`` or into a Consumer/App config. ``bootstrap.servers`` may
    be in the file. :class:`ConfigError` names the file and the setting, never a secret."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"client config {file}: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in (".yaml", ".yml", ".json"):
            loaded = yaml.safe_load(text) or {}
            if not isinstance(loaded, dict):
                raise ConfigError("the file must hold a mapping of settings")
            raw: dict[str, Any] = {str(k): v for k, v in loaded.items()}
        else:
            raw = dict(_read_properties(text))
    except yaml.YAMLError:
        raise ConfigError(f"client config {file}: not valid YAML") from None
    except ConfigError as exc:
        raise ConfigError(f"client config {file}: {exc}") from None
    model: type[SecuritySettings] = ClientSettings
    bootstrap_given = any(k in raw for k in ("bootstrap_servers", "bootstrap.servers"))
    if not bootstrap_given:
        model = SecuritySettings
    try:
        settings = model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid client config {file}: {describe_errors(exc)}") from None
    return {name: getattr(settings, name) for name in settings.model_fields_set}


def make_client_settings(values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> ClientSettings:
    """:class:`ClientSettings` from Python or Kafka-style names; every problem in one ConfigError."""
    try:
        return ClientSettings.model_validate({**(values or {}), **kwargs})
    except ValidationError as exc:
        raise ConfigError(f"invalid client settings: {describe_errors(exc)}") from None


def describe_errors(exc: ValidationError) -> str:
    """Every problem of ``exc`` as ``field: message`` (inputs are never shown)."""
    return "; ".join(
        f"{'.'.join(str(x) for x in err['loc']) or 'config'}: {err['msg']}" for err in exc.errors()
    )
