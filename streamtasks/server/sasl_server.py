"""The SASL state of one connection to the coordinator's listener, as a Kafka broker keeps it
(``SaslServerAuthenticator``). Pure: the session feeds it requests and the clock, and does what
the returned :class:`Step` says.

States: ``START`` (ApiVersions and SaslHandshake only) → SaslHandshake v1 naming an enabled
mechanism → ``HANDSHAKEN`` (SaslAuthenticate only; after a v0 handshake the tokens come as raw
length-prefixed frames instead) → the mechanism's exchange → ``AUTHENTICATED`` (every API). A
live authenticated connection may re-authenticate (KIP-368: SaslHandshake v1 again, same
mechanism, same principal); with a session lifetime the connection is closed at the first
request after its session ran out, unless that request re-authenticates.

Kafka's answers: UNSUPPORTED_SASL_MECHANISM (with the enabled mechanisms) for a mechanism not
enabled, ILLEGAL_SASL_STATE for SaslAuthenticate before a handshake or a handshake in the middle
of an exchange, SASL_AUTHENTICATION_FAILED for bad credentials; each closes the connection
after its answer. Any other API before authentication closes it without an answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from streamtasks.errors import SaslError

__all__ = [
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SUPPORTED_MECHANISMS",
    "SaslServer",
    "SaslState",
    "ServerExchange",
    "Step",
]

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Kafka's error codes (org.apache.kafka.common.protocol.Errors).
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class ServerExchange(Protocol):
    """One mechanism's server side over one authentication: ``step`` takes the client's bytes
    and returns the server's (raising :class:`SaslError` on bad credentials); ``complete`` once
    the client is authenticated, then ``username`` is who it is."""

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    def step(self, client_bytes: bytes) -> bytes: ...


class SaslState(enum.Enum):
    START = "start"
    HANDSHAKEN = "handshaken"
    AUTHENTICATING = "authenticating"
    AUTHENTICATED = "authenticated"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What to answer and whether to close after the answer."""

    error: int = NONE
    message: str | None = None
    auth_bytes: bytes = b""
    mechanisms: tuple[str, ...] = ()
    session_lifetime_ms: int = 0
    close: bool = False


class SaslServer:
    def __init__(
        self,
        *,
        mechanisms: tuple[str, ...],
        exchange_for: Callable[[str], ServerExchange],
        session_lifetime_ms: int | None = None,
    ) -> None:
        self.mechanisms = mechanisms
        self._exchange_for = exchange_for
        self._lifetime_ms = session_lifetime_ms
        self.state = SaslState.START
        #: ``User:<name>`` once authenticated (kept while re-authenticating).
        self.principal: str | None = None
        self.mechanism: str | None = None
        #: After a SaslHandshake v0 the tokens are raw frames, not SaslAuthenticate requests.
        self.raw_tokens = False
        self.session_deadline_ms: int | None = None
        self._exchange: ServerExchange | None = None
        self._reauthenticating = False

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self.state is not SaslState.CLOSED

    def admits(self, api_key: int, now_ms: int) -> str | None:
        """None when a request of ``api_key`` may be served now; otherwise why the connection
        must be closed without an answer."""
        if self.state is SaslState.CLOSED:
            return "the connection is closing"
        if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None  # answered by handshake() / authenticate(), which judge the state
        if self.state is SaslState.START and self.principal is None:
            return None if api_key == API_VERSIONS else f"api {api_key} before SASL authentication"
        if self.principal is None:
            return f"api {api_key} in the middle of SASL authentication"
        if self.expired(now_ms) and not self._reauthenticating:
            self.state = SaslState.CLOSED
            return "the SASL session expired without re-authentication"
        return None

    def expired(self, now_ms: int) -> bool:
        return self.session_deadline_ms is not None and now_ms >= self.session_deadline_ms

    def handshake(self, version: int, mechanism: str) -> Step:
        enabled = self.mechanisms
        if self.state in (SaslState.HANDSHAKEN, SaslState.AUTHENTICATING, SaslState.CLOSED):
            return self._fail(ILLEGAL_SASL_STATE, "SaslHandshake in the middle of an authentication", enabled)
        if self.principal is not None:  # re-authentication (KIP-368): v1, same mechanism
            if version < 1:
                return self._fail(ILLEGAL_SASL_STATE, "re-authentication needs SaslHandshake v1", enabled)
            if mechanism != self.mechanism:
                return self._fail(ILLEGAL_SASL_STATE, "re-authentication must keep the mechanism", enabled)
            self._reauthenticating = True
        elif mechanism not in enabled:
            self.state = SaslState.CLOSED
            return Step(
                error=UNSUPPORTED_SASL_MECHANISM,
                message=f"unsupported SASL mechanism {mechanism[:64]!r}",
                mechanisms=enabled,
                close=True,
            )
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._exchange = self._exchange_for(mechanism)
        self.state = SaslState.HANDSHAKEN
        return Step(mechanisms=enabled)

    def authenticate(self, auth_bytes: bytes, now_ms: int) -> Step:
        """A SaslAuthenticate request (or, after a v0 handshake, a raw token)."""
        if self.state not in (SaslState.HANDSHAKEN, SaslState.AUTHENTICATING) or self._exchange is None:
            return self._fail(ILLEGAL_SASL_STATE, "SaslAuthenticate without a SaslHandshake", ())
        exchange = self._exchange
        try:
            reply = exchange.step(auth_bytes)
        except SaslError:
            return self._fail(
                SASL_AUTHENTICATION_FAILED,
                "Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}",
                (),
            )
        if not exchange.complete:
            self.state = SaslState.AUTHENTICATING
            return Step(auth_bytes=reply)
        principal = f"User:{exchange.username}"
        if self.principal is not None and principal != self.principal:
            return self._fail(SASL_AUTHENTICATION_FAILED, "re-authentication must keep the principal", ())
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        self._exchange = None
        self._reauthenticating = False
        self.raw_tokens = False
        lifetime = self._lifetime_ms or 0
        self.session_deadline_ms = now_ms + lifetime if lifetime > 0 else None
        return Step(auth_bytes=reply, session_lifetime_ms=lifetime)

    def _fail(self, error: int, message: str, mechanisms: tuple[str, ...]) -> Step:
        self.state = SaslState.CLOSED
        self._exchange = None
        return Step(error=error, message=message, mechanisms=mechanisms, close=True)
