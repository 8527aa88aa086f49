"""How a client reaches the secured embedded broker: :class:`SecuredCluster`.

:meth:`SecureKafkaBroker.secured() <streamtasks.embedded.secure_broker.SecureKafkaBroker.secured>`
and the ``secure_kafka`` test fixture hand one out. It holds the three addresses, the
:class:`~streamtasks.embedded.certs.CertKit` and the users' passwords (:class:`~pydantic.SecretStr`),
and gives client settings per user and mechanism:

- :meth:`SecuredCluster.settings`: the contract's names (``bootstrap_servers``,
  ``security_protocol``, ``ssl_cafile``, ``sasl_mechanism``, ``sasl_plain_username``,
  ``sasl_plain_password`` as a SecretStr, ``sasl_oauth_token_provider``), ready for
  ``ClientSettings(**...)``;
- :meth:`~SecuredCluster.aiokafka_kwargs`, :meth:`~SecuredCluster.kafka_python_config` and
  :meth:`~SecuredCluster.librdkafka_config`: what those three clients take (plain-text
  passwords, as they need them: never log these dicts);
- :meth:`~SecuredCluster.oauth_token` / :func:`unsecured_jwt`: an unsecured JWT (``alg: none``,
  empty signature) that Kafka's built-in OAUTHBEARER validator accepts for a user.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka.abc import AbstractTokenProvider
from pydantic import SecretStr

from streamtasks.errors import BrokerError

if TYPE_CHECKING:  # the kit needs the cryptography package only where it is made
    from streamtasks.embedded.certs import CertKit

__all__ = ["MECHANISMS", "SecuredCluster", "UnsecuredTokenProvider", "unsecured_jwt"]

#: The SASL mechanisms the SASL_SSL listener enables.
MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Lifetime of the tokens :func:`unsecured_jwt` makes unless told otherwise.
TOKEN_LIFETIME_S = 3600


def unsecured_jwt(subject: str, *, now: float, lifetime_s: float = TOKEN_LIFETIME_S) -> str:
    """``header.payload.``: an unsigned JWT (RFC 7519 §6) for ``subject``, issued at ``now``
    (seconds since the epoch) and expiring ``lifetime_s`` later, with an empty scope."""

    def part(value: Mapping[str, object]) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    issued = int(now)
    claims = {"sub": subject, "iat": issued, "exp": issued + int(lifetime_s), "scope": ""}
    return f"{part({'alg': 'none'})}.{part(claims)}."


class UnsecuredTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """aiokafka's token provider shape (``async token() -> str``) handing out a fresh
    :func:`unsecured_jwt` for one user on every call."""

    def __init__(self, subject: str, *, lifetime_s: float = TOKEN_LIFETIME_S) -> None:
        self.subject = subject
        self.lifetime_s = lifetime_s

    async def token(self) -> str:
        return unsecured_jwt(self.subject, now=time.time(), lifetime_s=self.lifetime_s)

    def __repr__(self) -> str:
        return f"UnsecuredTokenProvider(subject={self.subject!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class SecuredCluster:
    """The secured embedded broker as its clients see it (see the module docstring)."""

    plaintext_bootstrap: str
    sasl_ssl_bootstrap: str
    ssl_bootstrap: str
    certs: CertKit
    users: Mapping[str, SecretStr]
    #: The broker's log: failed authentications and denied requests at INFO, the rest at WARN.
    log_path: Path | None = None

    def password(self, user: str) -> SecretStr:
        if user not in self.users:
            raise BrokerError(f"the secured broker has no user {user!r} (it has {sorted(self.users)})")
        return self.users[user]

    def oauth_token(
        self, user: str, *, now: float | None = None, lifetime_s: float = TOKEN_LIFETIME_S
    ) -> str:
        """An unsecured JWT for ``user`` (any name: the validator checks no password)."""
        return unsecured_jwt(user, now=time.time() if now is None else now, lifetime_s=lifetime_s)

    def settings(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        """SASL_SSL settings for ``user`` with ``mechanism``, in the contract's (aiokafka's) names;
        the password stays a SecretStr. OAUTHBEARER gets an :class:`UnsecuredTokenProvider`."""
        _check_mechanism(mechanism)
        settings: dict[str, Any] = {
            "bootstrap_servers": self.sasl_ssl_bootstrap,
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(self.certs.ca_cert),
            "sasl_mechanism": mechanism,
        }
        if mechanism == "OAUTHBEARER":
            settings["sasl_oauth_token_provider"] = UnsecuredTokenProvider(user)
        else:
            settings["sasl_plain_username"] = user
            settings["sasl_plain_password"] = self.password(user)
        return settings

    def ssl_settings(self, *, certfile: Path | None = None, keyfile: Path | None = None) -> dict[str, Any]:
        """Mutual-TLS settings for the SSL listener: the kit's client certificate unless told."""
        return {
            "bootstrap_servers": self.ssl_bootstrap,
            "security_protocol": "SSL",
            "ssl_cafile": str(self.certs.ca_cert),
            "ssl_certfile": str(certfile or self.certs.client_cert),
            "ssl_keyfile": str(keyfile or self.certs.client_key),
        }

    def ssl_context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """A stdlib context trusting the kit's CA (and presenting the client certificate)."""
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        if client_cert:
            context.load_cert_chain(self.certs.client_cert, self.certs.client_key)
        return context

    def aiokafka_kwargs(self, user: str | None, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        """Keyword arguments for aiokafka's clients; ``user=None`` means mutual TLS on the SSL
        listener with the client certificate."""
        if user is None:
            return {
                "bootstrap_servers": self.ssl_bootstrap,
                "security_protocol": "SSL",
                "ssl_context": self.ssl_context(client_cert=True),
            }
        settings = self.settings(user, mechanism)
        kwargs = {k: v for k, v in settings.items() if k != "ssl_cafile"}
        kwargs["ssl_context"] = self.ssl_context()
        if "sasl_plain_password" in kwargs:
            kwargs["sasl_plain_password"] = self.password(user).get_secret_value()
        return kwargs

    def kafka_python_config(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        """Configuration for kafka-python's clients (PLAIN and SCRAM)."""
        if mechanism == "OAUTHBEARER":
            raise BrokerError("kafka_python_config: OAUTHBEARER needs a kafka-python token provider object")
        settings = self.settings(user, mechanism)
        settings["sasl_plain_password"] = self.password(user).get_secret_value()
        return settings

    def librdkafka_config(self, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """Configuration for confluent-kafka (librdkafka's names). OAUTHBEARER uses librdkafka's
        own unsecured JWT (``enable.sasl.oauthbearer.unsecure.jwt``) with ``sub`` = ``user``."""
        _check_mechanism(mechanism)
        config = {
            "bootstrap.servers": self.sasl_ssl_bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.certs.ca_cert),
            "sasl.mechanism": mechanism,
        }
        if mechanism == "OAUTHBEARER":
            config["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
            config["sasl.oauthbearer.config"] = f"principal={user}"
        else:
            config["sasl.username"] = user
            config["sasl.password"] = self.password(user).get_secret_value()
        return config


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise BrokerError(f"the secured broker offers {', '.join(MECHANISMS)}, not {mechanism!r}")
