"""SASL on the runtime's own connections: SaslHandshake v1 then SaslAuthenticate v2 round trips
driving the pure mechanisms of :mod:`streamtasks.protocol.sasl`, before any other request.

:func:`authenticate` runs one exchange and returns the session lifetime the broker gave
(KIP-368; 0: no expiry). The connection re-authenticates in-band before it runs out, at a random
point between 85 % and 95 % of it as Kafka's client does (:func:`reauthentication_delay_s`).

Failures are :class:`~streamtasks.errors.AuthenticationError` naming the broker, the mechanism,
the user and the broker's own words (SASL_AUTHENTICATION_FAILED's message, the mechanisms an
UNSUPPORTED_SASL_MECHANISM broker enables); never a password or token.
"""

from __future__ import annotations

import random
import secrets
from typing import Any, Protocol, TypeVar

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from streamtasks.errors import AuthenticationError, SaslError
from streamtasks.protocol.sasl import OAUTHBEARER, OAuthBearerClient, SaslClient, sasl_client
from streamtasks.runtime.security import SecuritySettings

__all__ = [
    "REAUTH_FRACTION",
    "authenticate",
    "reauthentication_delay_s",
    "sasl_client_for",
]

#: Kafka's client re-authenticates at a uniformly random point of this share of the lifetime.
REAUTH_FRACTION = (0.85, 0.95)

R = TypeVar("R")


class AuthChannel(Protocol):
    """What :func:`authenticate` needs of a connection: a request that is sent even while the
    connection holds other requests back for (re-)authentication."""

    async def call_during_auth(self, request: Any, response_cls: type[R], *, timeout_s: float) -> R: ...


def reauthentication_delay_s(lifetime_ms: int, rng: random.Random | None = None) -> float:
    """When to re-authenticate, in seconds after the exchange, for a ``lifetime_ms`` session."""
    low, high = REAUTH_FRACTION
    return lifetime_ms * (rng or random).uniform(low, high) / 1000


async def sasl_client_for(security: SecuritySettings) -> SaslClient:
    """A fresh client for one exchange (a new SCRAM nonce, a current OAUTHBEARER token)."""
    mechanism = security.sasl_mechanism or ""
    if mechanism == OAUTHBEARER:
        provider = security.sasl_oauth_token_provider
        if provider is None:
            raise SaslError("OAUTHBEARER needs sasl_oauth_token_provider")
        token = await provider.token()
        extensions = getattr(provider, "extensions", None)
        return OAuthBearerClient(str(token), extensions=dict(extensions()) if callable(extensions) else None)
    password = security.sasl_plain_password
    return sasl_client(
        mechanism,
        username=security.sasl_plain_username or "",
        password=password.get_secret_value() if password is not None else "",
        nonce=secrets.token_urlsafe(24),
    )


def _name(code: Any) -> str:
    """Kafka's name of an error code (kio spells them in lower case)."""
    return str(code.name).upper()


def _who(security: SecuritySettings) -> str:
    if security.sasl_mechanism == OAUTHBEARER:
        return "OAUTHBEARER"
    return f"{security.sasl_mechanism} as {security.sasl_plain_username!r}"


async def authenticate(conn: AuthChannel, security: SecuritySettings, peer: str, *, timeout_s: float) -> int:
    """One SASL exchange with the broker at ``peer`` over ``conn``; the session lifetime in ms."""
    mechanism = security.sasl_mechanism or ""
    handshake = await conn.call_during_auth(
        SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, timeout_s=timeout_s
    )
    code = handshake.error_code
    if code.value != 0:
        enabled = ", ".join(handshake.mechanisms) or "none"
        if _name(code) == "UNSUPPORTED_SASL_MECHANISM":
            raise AuthenticationError(
                f"the broker at {peer} does not enable SASL mechanism {mechanism}:"
                f" UNSUPPORTED_SASL_MECHANISM (enabled: {enabled})"
            )
        raise AuthenticationError(
            f"the broker at {peer} refused the SASL handshake for {mechanism}: {_name(code)}"
            f" (enabled mechanisms: {enabled}; is this listener SASL_PLAINTEXT or SASL_SSL?)"
        )
    try:
        client = await sasl_client_for(security)
        payload: bytes | None = client.initial_response()
    except SaslError as exc:
        raise AuthenticationError(
            f"SASL authentication at the broker at {peer} ({_who(security)}): {exc}"
        ) from None
    lifetime_ms = 0
    while payload is not None:
        response = await conn.call_during_auth(
            SaslAuthenticateRequest(auth_bytes=payload), SaslAuthenticateResponse, timeout_s=timeout_s
        )
        if response.error_code.value != 0:
            detail = (response.error_message or "").strip() or "no message"
            server_error = getattr(client, "server_error", None)
            if server_error:
                detail = f"{detail}; token rejected: {server_error}"
            raise AuthenticationError(
                f"authentication at the broker at {peer} failed ({_who(security)}):"
                f" {_name(response.error_code)}: {detail}"
            )
        lifetime_ms = int(response.session_lifetime.total_seconds() * 1000)
        try:
            payload = client.evaluate(bytes(response.auth_bytes))
        except SaslError as exc:
            raise AuthenticationError(
                f"authentication at the broker at {peer} failed ({_who(security)}): {exc}"
            ) from None
    return lifetime_ms
