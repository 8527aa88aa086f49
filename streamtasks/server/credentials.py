"""The coordinator listener's users: a JSON file of salted SCRAM credentials, never a password.

::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-512": {"salt": "<base64>", "iterations": 8192,
                                           "stored_key": "<base64>", "server_key": "<base64>"}}}}

``streamtasks coordinator add-user`` writes it (:func:`add_user`, mode 0600, replaced
atomically). SCRAM-SHA-256/512 log in against the credential of their mechanism; PLAIN derives
the SCRAM-SHA-512 (else -256) credential from the password it is given and compares the stored
key. The mechanisms' arithmetic is :mod:`streamtasks.protocol.sasl`'s; this module looks users
up and binds it to :class:`~streamtasks.server.sasl_server.ServerExchange`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from streamtasks.errors import ConfigError, SaslError
from streamtasks.protocol.sasl import PLAIN, ScramCredential, ScramServer, parse_plain, scram_credential
from streamtasks.server.sasl_server import ServerExchange

__all__ = [
    "SCRAM_MECHANISMS",
    "Credentials",
    "add_user",
    "dump_credentials",
    "load_credentials",
    "parse_credentials",
]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_VERSION = 1
_UNKNOWN_ITERATIONS = 4096


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Credentials:
    """user -> mechanism -> stored credential."""

    users: Mapping[str, Mapping[str, ScramCredential]]

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def exchange_factory(self, nonce: Callable[[], str]) -> Callable[[str], ServerExchange]:
        """The mechanism -> exchange factory a :class:`~.sasl_server.SaslServer` takes;
        ``nonce`` draws a server nonce (the caller's randomness)."""

        def exchange_for(mechanism: str) -> ServerExchange:
            if mechanism == PLAIN:
                return _PlainExchange(self)
            return _ScramExchange(self, mechanism, nonce())

        return exchange_for


class _PlainExchange:
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self._username = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def username(self) -> str:
        return self._username

    def step(self, client_bytes: bytes) -> bytes:
        if self._complete:
            raise SaslError("PLAIN: a second message")
        given = parse_plain(client_bytes)
        for mechanism in reversed(SCRAM_MECHANISMS):  # the strongest stored one
            stored = self._credentials.lookup(given.username, mechanism)
            if stored is None:
                continue
            derived = scram_credential(mechanism, given.password, stored.salt, stored.iterations)
            if not hmac.compare_digest(derived.stored_key, stored.stored_key):
                raise SaslError("PLAIN: authentication failed")
            self._username, self._complete = given.username, True
            return b""
        raise SaslError("PLAIN: authentication failed")


class _ScramExchange:
    def __init__(self, credentials: Credentials, mechanism: str, nonce: str) -> None:
        self._credentials = credentials
        self._mechanism = mechanism
        self._server = ScramServer(mechanism, nonce=nonce)
        self._username = ""
        self._known = False

    @property
    def complete(self) -> bool:
        return self._known and self._server.complete

    @property
    def username(self) -> str:
        return self._username

    def step(self, client_bytes: bytes) -> bytes:
        if self._username:
            final = self._server.receive_client_final(client_bytes)
            if not self._known:  # a made-up credential cannot be proven; fail at the proof
                raise SaslError(f"{self._mechanism}: authentication failed")
            return final
        first = self._server.receive_client_first(client_bytes)
        if first.extensions.get("tokenauth") == "true":
            raise SaslError(f"{self._mechanism}: delegation tokens are not served here")
        stored = self._credentials.lookup(first.username, self._mechanism)
        self._username, self._known = first.username, stored is not None
        return self._server.server_first(stored or _made_up(self._mechanism, first.username))


def _made_up(mechanism: str, username: str) -> ScramCredential:
    """An unknown user gets a fixed made-up credential (the same salt every time), so the
    exchange looks the same as for a known user until the proof fails."""
    seed = hashlib.sha256(f"streamtasks unknown user {mechanism} {username}".encode()).digest()
    return ScramCredential(
        salt=seed[:16], iterations=_UNKNOWN_ITERATIONS, stored_key=seed, server_key=seed[::-1]
    )


def parse_credentials(text: str, *, source: str = "credentials file") -> Credentials:
    try:
        doc: Any = json.loads(text)
    except ValueError:
        raise ConfigError(f"{source}: not JSON") from None
    if not isinstance(doc, dict) or doc.get("version") != _VERSION or not isinstance(doc.get("users"), dict):
        raise ConfigError(f'{source}: expected {{"version": {_VERSION}, "users": {{...}}}}')
    users: dict[str, dict[str, ScramCredential]] = {}
    for user, mechanisms in doc["users"].items():
        if not isinstance(mechanisms, dict):
            raise ConfigError(f"{source}: user {user!r}: expected a mapping of mechanisms")
        users[user] = {}
        for mechanism, entry in mechanisms.items():
            where = f"{source}: user {user!r} {mechanism}"
            if mechanism not in SCRAM_MECHANISMS:
                raise ConfigError(f"{where}: mechanism must be one of {', '.join(SCRAM_MECHANISMS)}")
            try:
                credential = ScramCredential(
                    salt=base64.b64decode(entry["salt"], validate=True),
                    iterations=int(entry["iterations"]),
                    stored_key=base64.b64decode(entry["stored_key"], validate=True),
                    server_key=base64.b64decode(entry["server_key"], validate=True),
                )
            except (KeyError, TypeError, ValueError, binascii.Error):
                raise ConfigError(
                    f"{where}: needs base64 salt, stored_key, server_key and integer iterations"
                ) from None
            if credential.iterations < 4096 or not credential.salt:
                raise ConfigError(f"{where}: needs a salt and at least 4096 iterations")
            users[user][mechanism] = credential
    return Credentials(users)


def dump_credentials(credentials: Credentials) -> str:
    users = {
        user: {
            mechanism: {
                "salt": _b64(c.salt),
                "iterations": c.iterations,
                "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key),
            }
            for mechanism, c in sorted(mechanisms.items())
        }
        for user, mechanisms in sorted(credentials.users.items())
    }
    return json.dumps({"version": _VERSION, "users": users}, indent=2) + "\n"


def load_credentials(path: Path) -> Credentials:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"credentials file {path}: {exc.strerror or exc}") from None
    return parse_credentials(text, source=f"credentials file {path}")


def add_user(
    path: Path,
    user: str,
    password: SecretStr,
    *,
    mechanisms: tuple[str, ...] = SCRAM_MECHANISMS,
    iterations: int = 8192,
    salt: Callable[[], bytes] = lambda: secrets.token_bytes(32),
) -> None:
    """Add or replace ``user``'s credentials (one per mechanism, each with its own salt) in the
    file at ``path`` (created if missing), written with mode 0600 and renamed into place."""
    if not user or any(c in user for c in ",=\0") or user != user.strip():
        raise ConfigError("the user name must be non-empty, without ',', '=', NUL or edge spaces")
    if not password.get_secret_value():
        raise ConfigError("the password is empty")
    if iterations < 4096:
        raise ConfigError("--iterations must be at least 4096 (Kafka's SCRAM minimum)")
    unknown = [m for m in mechanisms if m not in SCRAM_MECHANISMS]
    if unknown or not mechanisms:
        raise ConfigError(f"mechanisms must be among {', '.join(SCRAM_MECHANISMS)}")
    current = load_credentials(path) if path.exists() else Credentials({})
    users = {u: dict(m) for u, m in current.users.items()}
    users[user] = {
        m: scram_credential(m, password.get_secret_value(), salt(), iterations) for m in mechanisms
    }
    text = dump_credentials(Credentials(users))
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
