"""Apache Kafka with its security on: TLS, SASL (PLAIN, SCRAM, OAUTHBEARER), mutual TLS and ACLs.

:class:`SecureKafkaBroker` is the embedded :class:`~streamtasks.embedded.KafkaBroker` with two
more listeners beside its PLAINTEXT one, all on free loopback ports::

    with SecureKafkaBroker() as broker:
        cluster = broker.secured()                 # a frozen SecuredCluster
        broker.create_topics({"app-orders": 3})    # through PLAINTEXT, a super user
        Consumer(**cluster.settings("app", "SCRAM-SHA-512"), ...)

- ``PLAINTEXT`` (``plaintext_bootstrap``): setup and admin chores. Its principal
  ``User:ANONYMOUS`` is a super user (so is the KRaft controller's listener), so every existing
  helper (``create_topics``, ...) keeps working; it is not for the code under test.
- ``SASL_SSL`` (``sasl_ssl_bootstrap``): TLS with the broker certificate of a
  :class:`~streamtasks.embedded.certs.CertKit`, then SASL with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
  or OAUTHBEARER. PLAIN users live in the listener's JAAS config, SCRAM users are written into
  the storage at format time (``StorageTool format --add-scram``, the arguments in a ``0600``
  argument file, never on a command line), OAUTHBEARER takes Kafka's built-in *unsecured* JWT
  validator (``alg: none`` tokens, no signature; :meth:`SecuredCluster.oauth_token` makes one).
  The principal is ``User:<name>`` for every mechanism (the token's ``sub`` for OAUTHBEARER).
- ``SSL`` (``ssl_bootstrap``): mutual TLS (``ssl.client.auth=required``); the principal is the
  client certificate's subject, ``User:CN=client`` for the kit's ``client_cert``.

Authorization is KRaft's ``StandardAuthorizer`` with no ACL meaning no access. The users (random
passwords per start, :class:`~pydantic.SecretStr`, never printed) and the ACL convention:

- ``admin``: a super user;
- ``app`` and ``User:CN=client``: ``All`` on topics, groups and transactional ids whose names
  start with ``app-`` or ``secure-`` (:data:`APP_PREFIXES`), and ``Describe`` and
  ``IdempotentWrite`` on the cluster; nothing else;
- ``norights``: authenticates on every mechanism, and has no ACL at all.

The ACLs are created through the PLAINTEXT listener (CreateAcls) once the broker answers, and
:meth:`SecureKafkaBroker.start` returns when DescribeAcls shows all of them. ``configs`` still
overrides any broker setting, e.g. ``{"connections.max.reauth.ms": "5000"}`` for KIP-368.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Self

from kio.schema.create_acls.v3 import request as create_acls
from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import DescribeAclsResponse
from kio.static.primitive import i8
from pydantic import SecretStr

from streamtasks.embedded._process import unused_port
from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.embedded.kafka_broker import KafkaBroker
from streamtasks.embedded.secure_cluster import MECHANISMS, SecuredCluster
from streamtasks.errors import BrokerError
from streamtasks.runtime.blocking import BlockingConnection

__all__ = [
    "ADMIN_USER",
    "APP_PREFIXES",
    "APP_USER",
    "NO_RIGHTS_USER",
    "SecureKafkaBroker",
    "acl_bindings",
]

ADMIN_USER, APP_USER, NO_RIGHTS_USER = "admin", "app", "norights"
#: Name prefixes of the topics, groups and transactional ids ``app`` (and the client certificate's
#: principal) may use; anything else is denied to them.
APP_PREFIXES: tuple[str, ...] = ("app-", "secure-")
#: How long :meth:`SecureKafkaBroker.start` waits for the broker to show the ACLs it created.
ACL_TIMEOUT_S = 15.0

_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's AclOperation, ResourceType, PatternType and AclPermissionType codes.
_ALL, _DESCRIBE, _IDEMPOTENT_WRITE = 2, 8, 12
_TOPIC, _GROUP, _CLUSTER, _TRANSACTIONAL_ID = 2, 3, 4, 5
_ANY, _LITERAL, _PREFIXED = 1, 3, 4
_ALLOW = 3
#: A binding: (resource type, resource name, pattern type, principal, operation).
Binding = tuple[int, str, int, str, int]


def acl_bindings(principals: tuple[str, ...], prefixes: tuple[str, ...] = APP_PREFIXES) -> list[Binding]:
    """The ALLOW bindings of the convention above (host ``*``) for each principal."""
    bindings: list[Binding] = []
    for principal in principals:
        for prefix in prefixes:
            for resource in (_TOPIC, _GROUP, _TRANSACTIONAL_ID):
                bindings.append((resource, prefix, _PREFIXED, principal, _ALL))
        for operation in (_DESCRIBE, _IDEMPOTENT_WRITE):
            bindings.append((_CLUSTER, "kafka-cluster", _LITERAL, principal, operation))
    return bindings


class SecureKafkaBroker(KafkaBroker):
    """The embedded Apache Kafka with PLAINTEXT, SASL_SSL and SSL listeners (module docstring).

    ``certs`` is a kit made elsewhere (the broker writes its PEM keystore,
    ``broker-keystore.pem``, beside the kit's files), else one is made for each start;
    ``passwords`` fixes some users' passwords (``admin``, ``app``, ``norights``; random
    otherwise). Other keyword arguments are :class:`KafkaBroker`'s."""

    kind = "Apache Kafka broker (secured)"
    #: Failed authentications (the network Selector) and denied requests (the authorizer's
    #: logger) go into the broker's log too.
    log_levels: Mapping[str, str] = {
        **KafkaBroker.log_levels,
        "org.apache.kafka.common.network.Selector": "INFO",
        "kafka.authorizer.logger": "INFO",
    }

    def __init__(
        self,
        *,
        certs: CertKit | None = None,
        passwords: Mapping[str, SecretStr] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._user_configs = dict(self.configs)
        self._given_certs = certs
        self.certs: CertKit | None = certs
        chosen = dict(passwords or {})
        self.users: Mapping[str, SecretStr] = MappingProxyType(
            {
                name: chosen[name] if name in chosen else SecretStr(secrets.token_urlsafe(18))
                for name in (ADMIN_USER, APP_USER, NO_RIGHTS_USER)
            }
        )
        for name, password in self.users.items():
            _check_password(name, password)
        self.sasl_ssl_port = 0
        self.ssl_port = 0
        self._certs_dir: Path | None = None

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_ssl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"{self.host}:{self.ssl_port}"

    def secured(self) -> SecuredCluster:
        """What a client needs to reach this (running) broker: addresses, the kit, the users."""
        if not self.running or self.certs is None:
            raise BrokerError(f"{self.kind} is not running: start() it first")
        return SecuredCluster(
            plaintext_bootstrap=self.bootstrap_servers,
            sasl_ssl_bootstrap=self.sasl_ssl_bootstrap,
            ssl_bootstrap=self.ssl_bootstrap,
            certs=self.certs,
            users=self.users,
            log_path=self.log_path,
        )

    def start(self) -> Self:
        if self.running:
            return self
        super().start()
        try:
            self._grant()
        except BaseException:
            self.stop()
            raise
        return self

    # -- the process -------------------------------------------------------------------

    def _spawn(self) -> Any:
        if self._given_certs is None:
            self._certs_dir = Path(tempfile.mkdtemp(prefix="streamtasks-certs-"))
            self.certs = make_cert_kit(self._certs_dir, hosts=_hosts(self.host))
        taken = {self.port}
        self.sasl_ssl_port = unused_port(self.host, taken)
        self.ssl_port = unused_port(self.host, taken)
        self._more_listeners = {"SASL_SSL": self.sasl_ssl_port, "SSL": self.ssl_port}
        self.configs = {**self._security_settings(), **self._user_configs}
        return super()._spawn()

    def _security_settings(self) -> dict[str, str]:
        assert self.certs is not None
        kit = self.certs
        keystore = kit.directory / "broker-keystore.pem"
        if not keystore.is_file():
            # The key, then the certificate (no root: a client must trust the kit's CA itself).
            _write_private(keystore, kit.broker_key.read_bytes() + kit.broker_cert.read_bytes())
        plain_users = " ".join(f'user_{n}="{p.get_secret_value()}"' for n, p in self.users.items())
        jaas = "org.apache.kafka.common.security"
        sasl = "listener.name.sasl_ssl"
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(kit.ca_cert),
            "listener.name.ssl.ssl.client.auth": "required",
            f"{sasl}.sasl.enabled.mechanisms": ",".join(MECHANISMS),
            f"{sasl}.plain.sasl.jaas.config": f"{jaas}.plain.PlainLoginModule required {plain_users};",
            **{
                f"{sasl}.{m.lower()}.sasl.jaas.config": f"{jaas}.scram.ScramLoginModule required;"
                for m in _SCRAM
            },
            # No server callback handler: Kafka validates OAUTHBEARER tokens with its unsecured
            # JWT validator; the login module's own (unused) token needs a subject.
            f"{sasl}.oauthbearer.sasl.jaas.config": (
                f"{jaas}.oauthbearer.OAuthBearerLoginModule required "
                f'unsecuredLoginStringClaim_sub="{ADMIN_USER}";'
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def _format_options(self) -> tuple[str, ...]:
        # The SCRAM users, in a java @argument file so that no password is on a command line.
        assert self._dir is not None
        lines = [
            f"--add-scram\n{m}=[name={n},password={p.get_secret_value()}]\n"
            for n, p in self.users.items()
            for m in _SCRAM
        ]
        argfile = self._dir / "scram-users.args"
        _write_private(argfile, "".join(lines).encode())
        return (f"@{argfile}",)

    def _format(self, props: Path, logging: str) -> None:
        try:
            super()._format(props, logging)
        except BrokerError as exc:
            raise BrokerError(self._redact(str(exc))) from None
        finally:
            if self._dir is not None:
                (self._dir / "scram-users.args").unlink(missing_ok=True)

    def _log_tail(self) -> str:
        return self._redact(super()._log_tail())

    def _redact(self, text: str) -> str:
        for password in self.users.values():
            text = text.replace(password.get_secret_value(), "**********")
        return text

    def _cleanup(self) -> None:
        super()._cleanup()
        if self._certs_dir is not None:
            shutil.rmtree(self._certs_dir, ignore_errors=True)
            self._certs_dir = None
            self.certs = None

    # -- the ACLs ----------------------------------------------------------------------

    def _grant(self) -> None:
        assert self.certs is not None
        bindings = acl_bindings((f"User:{APP_USER}", self.certs.client_principal))
        request = create_acls.CreateAclsRequest(
            creations=tuple(
                create_acls.AclCreation(
                    resource_type=i8(resource),
                    resource_name=name,
                    resource_pattern_type=i8(pattern),
                    principal=principal,
                    host="*",
                    operation=i8(operation),
                    permission_type=i8(_ALLOW),
                )
                for resource, name, pattern, principal, operation in bindings
            )
        )
        with BlockingConnection(self.host, self.port) as conn:
            response = conn.call(request, CreateAclsResponse)
            failed = [r for r in response.results if r.error_code.value != 0]
            if failed:
                why = "; ".join(f"{r.error_code.name}: {r.error_message}" for r in failed)
                raise BrokerError(f"{self.kind} at {self.bootstrap_servers} refused CreateAcls: {why}")
            deadline = time.monotonic() + ACL_TIMEOUT_S
            while len(self._described(conn)) < len(bindings):
                if time.monotonic() > deadline:
                    raise BrokerError(f"{self.kind} did not show its ACLs within {ACL_TIMEOUT_S:.0f}s")
                time.sleep(0.05)

    def _described(self, conn: BlockingConnection) -> list[Binding]:
        request = DescribeAclsRequest(
            resource_type_filter=i8(_ANY),
            resource_name_filter=None,
            pattern_type_filter=i8(_ANY),
            principal_filter=None,
            host_filter=None,
            operation=i8(_ANY),
            permission_type=i8(_ANY),
        )
        response = conn.call(request, DescribeAclsResponse)
        if response.error_code.value != 0:
            raise BrokerError(f"DescribeAcls failed on {self.bootstrap_servers}: {response.error_code.name}")
        return [
            (int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal, int(a.operation))
            for r in response.resources
            for a in r.acls
        ]


def _hosts(host: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(("localhost", "127.0.0.1", host)))


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _check_password(user: str, password: SecretStr) -> None:
    # The password goes into a JAAS string and a StorageTool argument: no quotes, commas,
    # brackets, '=' or whitespace (the random ones are URL-safe base64).
    text = password.get_secret_value()
    if not text or any(c in text for c in "\"',[]=\\ \t\r\n;"):
        raise BrokerError(f"the password of {user!r} has a character the broker's config cannot hold")
