"""TLS and authentication of a process's HTTP servers (``/metrics``, ``/stores/{store}/{key}``)
and of the client that reaches a peer's (``app.query`` across processes)::

    HttpSecurity(certfile="server.pem", keyfile="server.key", cafile="ca.pem",
                 require_client_cert=True, token="...")
    HttpSecurity.model_validate({"ssl.certificate.location": "server.pem", ...,
                                 "basic.username": "ops", "basic.password": "..."})

* TLS: with ``certfile``/``keyfile`` the servers speak HTTPS. ``cafile`` is the CAs that sign
  the clients' certificates (the server asks for one; with ``require_client_cert`` a client
  without a certificate that verifies is refused in the handshake) and the peers' server
  certificates (the query client verifies them, and the host name with ``check_hostname``). A
  client presents ``certfile``/``keyfile`` when ``require_client_cert`` is set: the processes of
  one App share these settings, so each certificate must be valid for server and client auth.
* Authentication: a bearer ``token`` or HTTP basic ``username``/``password`` (one scheme). A
  request without the right ``Authorization`` header gets ``401`` with a ``WWW-Authenticate``
  challenge; the comparison is constant-time (:func:`hmac.compare_digest`). The query client
  sends the same credentials to its peers.

The token, the password and the key's password are :class:`pydantic.SecretStr`: no repr, dump,
error message or log line shows them (nothing here logs the ``Authorization`` header).
"""

from __future__ import annotations

import base64
import hmac
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, model_validator

from streamtasks.errors import ConfigError

if TYPE_CHECKING:  # aiohttp is imported when a server or a client is set up
    from aiohttp import web

__all__ = ["REALM", "HttpSecurity"]

#: The realm of the ``WWW-Authenticate`` challenge.
REALM = "streamtasks"


def _alias(*names: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(*names))


def _cert_chain(context: ssl.SSLContext, certfile: Path, keyfile: Path, password: SecretStr | None) -> None:
    try:
        context.load_cert_chain(
            certfile, keyfile, password=None if password is None else password.get_secret_value()
        )
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            f"cannot load the HTTP certificate {certfile} with key {keyfile}: {reason}"
        ) from None


def _verify_locations(context: ssl.SSLContext, cafile: Path) -> None:
    try:
        context.load_verify_locations(cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the HTTP CA file {cafile}: {exc}") from None


class HttpSecurity(BaseModel):
    """TLS and authentication of the HTTP servers and of the query client (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, hide_input_in_errors=True)

    #: PEM certificate (chain) of this process's HTTPS servers; with ``keyfile``: TLS on.
    certfile: Path | None = _alias("certfile", "ssl_certfile", "ssl.certificate.location")
    keyfile: Path | None = _alias("keyfile", "ssl_keyfile", "ssl.key.location")
    key_password: SecretStr | None = _alias("key_password", "ssl_password", "ssl.key.password")
    #: PEM file of the CAs that sign clients' and peers' certificates (None: the system's, for peers).
    cafile: Path | None = _alias("cafile", "ssl_cafile", "ssl.ca.location")
    #: Refuse clients without a certificate signed by ``cafile`` (mutual TLS).
    require_client_cert: bool = Field(
        default=False, validation_alias=AliasChoices("require_client_cert", "ssl.client.auth")
    )
    #: The query client checks that a peer's certificate names the host it dialled.
    check_hostname: bool = Field(
        default=True, validation_alias=AliasChoices("check_hostname", "ssl_check_hostname")
    )
    #: ``Authorization: Bearer <token>``.
    token: SecretStr | None = _alias("token", "bearer.token")
    #: ``Authorization: Basic ...`` with these.
    username: str | None = _alias("username", "basic.username")
    password: SecretStr | None = _alias("password", "basic.password")

    @model_validator(mode="after")
    def _consistent(self) -> HttpSecurity:
        if (self.certfile is None) != (self.keyfile is None):
            raise ValueError("HTTP TLS needs both certfile and keyfile")
        if self.require_client_cert and (self.certfile is None or self.cafile is None):
            raise ValueError("require_client_cert needs TLS (certfile, keyfile) and the clients' cafile")
        if (self.username is None) != (self.password is None):
            raise ValueError("HTTP basic auth needs both username and password")
        if self.token is not None and self.username is not None:
            raise ValueError("HTTP auth is a bearer token or basic auth, not both")
        if self.token is not None and not self.token.get_secret_value():
            raise ValueError("the HTTP bearer token is empty")
        return self

    @property
    def tls(self) -> bool:
        return self.certfile is not None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.tls else "http"

    @property
    def auth_scheme(self) -> str | None:
        """``Bearer``, ``Basic`` or None (no authentication)."""
        if self.token is not None:
            return "Bearer"
        return "Basic" if self.username is not None else None

    # -- TLS -------------------------------------------------------------------------------------

    def server_ssl_context(self) -> ssl.SSLContext | None:
        """The servers' TLS context (None without TLS); a :class:`ConfigError` naming the file
        that cannot be read."""
        if self.certfile is None or self.keyfile is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        _cert_chain(context, self.certfile, self.keyfile, self.key_password)
        if self.cafile is not None:
            _verify_locations(context, self.cafile)
            context.verify_mode = ssl.CERT_REQUIRED if self.require_client_cert else ssl.CERT_OPTIONAL
        return context

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """The query client's TLS context (None without TLS): verifies peers with ``cafile``,
        presents this process's certificate when the peers require one."""
        if not self.tls:
            return None
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.cafile is not None:
            _verify_locations(context, self.cafile)
        context.check_hostname = self.check_hostname
        if self.require_client_cert and self.certfile is not None and self.keyfile is not None:
            _cert_chain(context, self.certfile, self.keyfile, self.key_password)
        return context

    # -- authentication --------------------------------------------------------------------------

    def _credentials(self) -> bytes | None:
        if self.token is not None:
            return self.token.get_secret_value().encode()
        if self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password.get_secret_value()}".encode()
            return base64.b64encode(pair)
        return None

    def authorization(self) -> str | None:
        """The ``Authorization`` header value the query client sends (None: no auth). A secret:
        never log it."""
        credentials = self._credentials()
        if credentials is None:
            return None
        return f"{self.auth_scheme} {credentials.decode()}"

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the configured credentials
        (constant-time in the credentials; always true without auth)."""
        expected = self._credentials()
        if expected is None:
            return True
        scheme, _, given = (header or "").strip().partition(" ")
        ok_scheme = scheme.lower() == (self.auth_scheme or "").lower()
        same = hmac.compare_digest(given.strip().encode(), expected)
        return ok_scheme and same

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of a 401."""
        return f'{self.auth_scheme} realm="{REALM}"'

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        """An aiohttp middleware answering ``401`` to a request without the credentials."""
        from aiohttp import web

        @web.middleware
        async def authenticate(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            if not self.authorized(request.headers.get("Authorization")):
                return web.json_response(
                    {"error": "unauthorized", "detail": f"{self.auth_scheme} credentials required"},
                    status=401,
                    headers={"WWW-Authenticate": self.challenge()},
                )
            return await handler(request)

        return authenticate
