"""SASL mechanisms as Kafka speaks them, both sides, without IO.

Client side: :class:`PlainClient` (RFC 4616), :class:`ScramClient` (RFC 5802 / RFC 7677:
SCRAM-SHA-256 and SCRAM-SHA-512) and :class:`OAuthBearerClient` (RFC 7628). Each is a small
state machine: :meth:`~SaslClient.initial_response` is the first SaslAuthenticate payload, and
:meth:`~SaslClient.evaluate` takes the broker's ``auth_bytes`` and returns the next payload, or
``None`` once the exchange is complete on this side. A transport drives it::

    payload = client.initial_response()
    while payload is not None:
        payload = client.evaluate(send_sasl_authenticate(payload))

Server side: :func:`parse_plain`, :class:`ScramServer` over a stored :class:`ScramCredential`
(made by :func:`scram_credential`) and :func:`parse_oauthbearer`.

As Kafka does, passwords are not SASLprep-normalised (UTF-8 as given), only ``n`` (no channel
binding) is spoken, and a SCRAM client refuses fewer than 4096 iterations. Attributes this module
does not know (including RFC 5802's mandatory-extension ``m``) are refused where Kafka never sends
any; the server side accepts client-first extensions (Kafka's ``tokenauth=true``) and hands them
on. Nonces and salts come from the caller (the runtime draws them from :mod:`secrets`).

Every failure raises :class:`~streamtasks.errors.SaslError`; no message carries a password, a
token, a proof or a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from streamtasks.errors import SaslError
from streamtasks.protocol._scram import (
    _SCRAM,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramClientFirst,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    _escape_name,
    _unescape_name,
    scram_credential,
    scram_mechanism,
)

__all__ = [
    "MECHANISMS",
    "OAUTHBEARER",
    "OAUTHBEARER_ERROR_ACK",
    "PLAIN",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "OAuthBearerClient",
    "OAuthBearerResponse",
    "PlainClient",
    "PlainCredentials",
    "SaslClient",
    "ScramClient",
    "ScramClientFirst",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "parse_oauthbearer",
    "parse_plain",
    "sasl_client",
    "scram_credential",
    "scram_mechanism",
]

PLAIN: Final = "PLAIN"
OAUTHBEARER: Final = "OAUTHBEARER"
#: The client's reply to an OAUTHBEARER error challenge (RFC 7628 section 3.2.3): a lone kvsep.
OAUTHBEARER_ERROR_ACK: Final = b"\x01"
MECHANISMS: Final = (PLAIN, SCRAM_SHA_256.name, SCRAM_SHA_512.name, OAUTHBEARER)
_EXT_KEY = re.compile(r"[A-Za-z]+")
_EXT_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")


# -- client side ----------------------------------------------------------------------------------


class SaslClient(Protocol):
    """One side of one SASL exchange; see the module docstring for how a transport drives it."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


class PlainClient:
    """SASL PLAIN (RFC 4616): one message ``authzid NUL username NUL password``."""

    __slots__ = ("_authzid", "_complete", "_password", "_username")

    def __init__(self, username: str, password: str, *, authzid: str = "") -> None:
        if not username or not password:
            raise SaslError("SASL PLAIN needs a user name and a password")
        if "\0" in username or "\0" in password or "\0" in authzid:
            raise SaslError("SASL PLAIN user names and passwords cannot contain NUL")
        self._username, self._password, self._authzid = username, password, authzid
        self._complete = False

    mechanism = PLAIN

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._complete = True
        return f"{self._authzid}\0{self._username}\0{self._password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._complete or challenge:
            raise SaslError("SASL PLAIN: the server sent a challenge; PLAIN has none")
        return None

    def __repr__(self) -> str:
        return f"PlainClient(username={self._username!r})"


class OAuthBearerClient:
    """The OAUTHBEARER client (RFC 7628): ``n,[a=authzid],^Aauth=Bearer <token>[^Ak=v...]^A^A``.

    A non-empty challenge is the server's JSON error: :meth:`evaluate` answers it with the
    lone kvsep :data:`OAUTHBEARER_ERROR_ACK` and keeps its ``status`` in :attr:`server_error`;
    the server then fails the exchange.
    """

    __slots__ = ("_authzid", "_extensions", "_sent", "_token", "server_error")

    def __init__(self, token: str, *, extensions: Mapping[str, str] | None = None, authzid: str = "") -> None:
        if not token or not re.fullmatch(r"[A-Za-z0-9\-._~+/]+=*", token):
            raise SaslError("OAUTHBEARER needs a token of base64url/b64token characters")
        for key, value in (extensions or {}).items():
            if not _EXT_KEY.fullmatch(key) or key == "auth" or not _EXT_VALUE.fullmatch(value):
                raise SaslError(
                    f"OAUTHBEARER extension {key!r}: keys are letters (not 'auth'), values printable"
                )
        if "," in authzid:
            raise SaslError("OAUTHBEARER authorization id cannot contain ','")
        self._token, self._authzid, self._extensions = token, authzid, dict(extensions or {})
        self._sent = False
        self.server_error: str | None = None

    mechanism = OAUTHBEARER

    @property
    def complete(self) -> bool:
        return self._sent and self.server_error is None

    def initial_response(self) -> bytes:
        self._sent = True
        authz = f"a={_escape_name(self._authzid)}" if self._authzid else ""
        ext = "".join(f"\x01{k}={v}" for k, v in self._extensions.items())
        return f"n,{authz},\x01auth=Bearer {self._token}{ext}\x01\x01".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise SaslError("OAUTHBEARER: a challenge before the initial response")
        if self.server_error is not None:
            raise SaslError(f"OAUTHBEARER: the server rejected the token ({self.server_error})")
        if not challenge:
            return None
        self.server_error = _oauth_status(challenge)
        return OAUTHBEARER_ERROR_ACK

    def __repr__(self) -> str:
        return f"OAuthBearerClient(extensions={sorted(self._extensions)!r})"


def _oauth_status(challenge: bytes) -> str:
    try:
        body = json.loads(challenge.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "unreadable error challenge"
    if not isinstance(body, dict):
        return "unreadable error challenge"
    parts = [str(body.get("status", "no status"))[:100]]
    if "scope" in body:
        parts.append(f"scope {str(body['scope'])[:100]}")
    return ", ".join(parts)


def sasl_client(
    mechanism: str, *, username: str = "", password: str = "", token: str = "", nonce: str = ""
) -> SaslClient:
    """The client for ``mechanism`` (one of :data:`MECHANISMS`)."""
    name = mechanism.upper()
    if name == PLAIN:
        return PlainClient(username, password)
    if name == OAUTHBEARER:
        return OAuthBearerClient(token)
    if name in _SCRAM:
        return ScramClient(name, username, password, nonce=nonce)
    raise SaslError(f"unknown SASL mechanism {mechanism!r} (known: {', '.join(MECHANISMS)})")


# -- server side ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainCredentials:
    """A parsed SASL PLAIN message. Kafka allows an authzid only when it equals the user name."""

    username: str
    password: str = field(repr=False)
    authzid: str = ""


def parse_plain(message: bytes) -> PlainCredentials:
    """Parse a PLAIN initial response; :class:`SaslError` when it is malformed."""
    try:
        parts = message.decode("utf-8").split("\0")
    except UnicodeDecodeError:
        raise SaslError("SASL PLAIN message is not UTF-8") from None
    if len(parts) != 3:
        raise SaslError("SASL PLAIN message must be authzid NUL username NUL password")
    authzid, username, password = parts
    if not username or not password:
        raise SaslError("SASL PLAIN message has an empty user name or password")
    if authzid and authzid != username:
        raise SaslError("SASL PLAIN: the authorization id differs from the user name")
    return PlainCredentials(username=username, password=password, authzid=authzid)


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthBearerResponse:
    """A parsed OAUTHBEARER initial client response."""

    token: str = field(repr=False)
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_oauthbearer(message: bytes) -> OAuthBearerResponse:
    """Parse an OAUTHBEARER initial client response (RFC 7628 section 3.1)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("OAUTHBEARER message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not rest.endswith("\x01\x01") or not gs2.startswith("n,") or not gs2.endswith(","):
        raise SaslError("malformed OAUTHBEARER message: GS2 header or kvsep framing")
    authz = gs2[2:-1]
    if authz and not authz.startswith("a="):
        raise SaslError("malformed OAUTHBEARER message: bad authorization id")
    token = ""
    extensions: dict[str, str] = {}
    for pair in rest[:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if not eq or not _EXT_KEY.fullmatch(key) or key in extensions or not _EXT_VALUE.fullmatch(value):
            raise SaslError("malformed OAUTHBEARER message: bad key=value pair")
        if key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise SaslError("malformed OAUTHBEARER message: auth is not 'Bearer <token>'")
        extensions[key] = value
    if not token:
        raise SaslError("malformed OAUTHBEARER message: no auth=Bearer token")
    del extensions["auth"]
    return OAuthBearerResponse(
        token=token, authzid=_unescape_name(authz[2:]) if authz else "", extensions=extensions
    )
