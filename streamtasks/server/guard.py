"""The coordinator listener's security, per listener and per connection: who a client is (its
TLS certificate, its SASL exchange), what it may do (the ACL file), and the SaslHandshake /
SaslAuthenticate requests on the wire (``docs/security.md``)."""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.errors import DecodeError
from streamtasks.server.acl import Acls, load_acl_file
from streamtasks.server.config import ListenerSettings
from streamtasks.server.credentials import load_credentials
from streamtasks.server.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslServer, Step
from streamtasks.server.wire import RequestHeader, decode_kio_request, encode_kio_response, kio_response_class

__all__ = ["ANONYMOUS", "Access", "ListenerGuard", "principal_from_certificate", "sasl_response"]

ANONYMOUS = "User:ANONYMOUS"
_log = logging.getLogger("streamtasks.server")
#: RFC 4514 short names of the attributes Java's X500Principal prints by name.
_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def principal_from_certificate(peercert: dict[str, Any] | None) -> str | None:
    """``User:`` + the subject's distinguished name in RFC 2253 order (most specific first,
    ``CN=client,OU=...,O=...``), as Kafka's default principal builder names a TLS client."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(str(v))}" for k, v in rdn))
    return "User:" + ",".join(rdns)


@dataclass(frozen=True, slots=True)
class Access:
    """One connection's principal against the listener's ACLs (None: no ACL file, all allowed).
    Every denial is logged once: principal, operation, resource; never a secret."""

    principal: str
    acls: Acls | None
    client_host: str = ""
    on_deny: Callable[[], None] | None = None

    def permits(self, resource: str, name: str, operation: str) -> bool:
        """Whether the ACLs allow it (no log line: for what is left out of a listing)."""
        return self.acls is None or self.acls.allows(self.principal, resource, name, operation)

    def allows(self, resource: str, name: str, operation: str) -> bool:
        """Whether the ACLs allow it; a denial is counted and logged."""
        if self.permits(resource, name, operation):
            return True
        if self.on_deny is not None:
            self.on_deny()
        _log.warning(
            "authorization denied: principal=%s operation=%s %s=%s client=%s",
            self.principal,
            operation,
            resource,
            name,
            self.client_host or "?",
        )
        return False


class ListenerGuard:
    """What one secured listener knows: its settings, ACLs and credentials (read at start: a
    bad file stops the server with a ConfigError naming it)."""

    def __init__(
        self,
        settings: ListenerSettings,
        *,
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.settings = settings
        self.acls = load_acl_file(settings.acl_file) if settings.acl_file is not None else None
        self.credentials = (
            load_credentials(settings.credentials_file) if settings.credentials_file is not None else None
        )
        self._nonce = nonce
        self.ssl_context = settings.ssl_context()
        #: What ApiVersions answers on this listener (set at start from the backing cluster's).
        self.apis: dict[int, tuple[int, int]] = {}

    @property
    def sasl(self) -> bool:
        return self.credentials is not None

    def new_sasl(self) -> SaslServer | None:
        if self.credentials is None:
            return None
        return SaslServer(
            mechanisms=self.settings.sasl_mechanisms,
            exchange_for=self.credentials.exchange_factory(self._nonce),
            session_lifetime_ms=self.settings.session_lifetime_ms,
        )

    def access(self, principal: str, client_host: str, on_deny: Callable[[], None] | None = None) -> Access:
        return Access(principal, self.acls, client_host, on_deny)


def _handshake_response(step: Step, version: int, correlation_id: int) -> bytes:
    cls = kio_response_class(SASL_HANDSHAKE, version)
    return encode_kio_response(
        cls(error_code=ErrorCode(step.error), mechanisms=step.mechanisms), correlation_id
    )


def _authenticate_response(step: Step, version: int, correlation_id: int) -> bytes:
    cls = kio_response_class(SASL_AUTHENTICATE, version)
    values: dict[str, Any] = {
        "error_code": ErrorCode(step.error),
        "error_message": step.message,
        "auth_bytes": step.auth_bytes,
    }
    if version >= 1:
        values["session_lifetime"] = datetime.timedelta(milliseconds=step.session_lifetime_ms)
    return encode_kio_response(cls(**values), correlation_id)


def sasl_response(sasl: SaslServer, header: RequestHeader, body: bytes, now_ms: int) -> tuple[bytes, Step]:
    """Serve one SaslHandshake or SaslAuthenticate request: the response frame and the step
    (whose ``close`` says to close the connection after it)."""
    version = header.api_version
    if header.api_key == SASL_HANDSHAKE:
        if version > 1:
            raise DecodeError(f"SaslHandshake v{version} is not served (only v0-v1)")
        request = decode_kio_request(SASL_HANDSHAKE, version, body)
        step = sasl.handshake(version, str(request.mechanism))
        return _handshake_response(step, version, header.correlation_id), step
    if version > 2:
        raise DecodeError(f"SaslAuthenticate v{version} is not served (only v0-v2)")
    request = decode_kio_request(SASL_AUTHENTICATE, version, body)
    step = sasl.authenticate(bytes(request.auth_bytes), now_ms)
    return _authenticate_response(step, version, header.correlation_id), step
