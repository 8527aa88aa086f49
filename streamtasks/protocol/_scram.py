"""SCRAM (RFC 5802 / RFC 7677) for :mod:`streamtasks.protocol.sasl`: the mechanisms, the key
arithmetic, the message syntax, stored credentials and the server half of the exchange. Import
the public names from :mod:`streamtasks.protocol.sasl`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from streamtasks.errors import SaslError

__all__ = [
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ScramClient",
    "ScramClientFirst",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "scram_credential",
    "scram_mechanism",
]

_EXT_KEY = re.compile(r"[A-Za-z]+")
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # RFC 5802 "printable": no comma, no space
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramMechanism:
    """A SCRAM family member: its SASL name and its hash (a :mod:`hashlib` name)."""

    name: str
    hash_name: str
    min_iterations: int = 4096
    #: A client refuses more than this (a hostile server could ask for a day of hashing).
    max_iterations: int = 1 << 20


SCRAM_SHA_256: Final = ScramMechanism(name="SCRAM-SHA-256", hash_name="sha256")
SCRAM_SHA_512: Final = ScramMechanism(name="SCRAM-SHA-512", hash_name="sha512")
_SCRAM = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def scram_mechanism(mechanism: str | ScramMechanism) -> ScramMechanism:
    """The :class:`ScramMechanism` called ``mechanism`` (one given as an object is returned)."""
    if isinstance(mechanism, ScramMechanism):
        return mechanism
    found = _SCRAM.get(mechanism.upper())
    if found is None:
        raise SaslError(f"unknown SCRAM mechanism {mechanism!r} (known: {', '.join(sorted(_SCRAM))})")
    return found


# -- the SCRAM arithmetic (RFC 5802 section 3) ------------------------------------------------


def _hmac(m: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, m.hash_name).digest()


def _h(m: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(m.hash_name, data).digest()


def _salted_password(m: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(m.hash_name, password.encode("utf-8"), salt, iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    if not _BASE64.fullmatch(text):
        raise SaslError(f"SCRAM {what} is not base64")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise SaslError(f"SCRAM {what} is not base64") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What a server stores for a SCRAM user (never the password): RFC 5802's StoredKey/ServerKey."""

    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def scram_credential(
    mechanism: str | ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential of ``password`` under ``salt`` and ``iterations``."""
    m = scram_mechanism(mechanism)
    if iterations < 1 or not salt:
        raise SaslError("a SCRAM credential needs a salt and at least one iteration")
    salted = _salted_password(m, password, salt, iterations)
    stored_key = _h(m, _hmac(m, salted, b"Client Key"))
    server_key = _hmac(m, salted, b"Server Key")
    return ScramCredential(salt=salt, iterations=iterations, stored_key=stored_key, server_key=server_key)


# -- SCRAM message syntax -----------------------------------------------------------------------


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_name(text: str) -> str:
    if re.search(r"=(?!2C|3D)", text):
        raise SaslError("SCRAM user name has a bad '=' escape")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attrs(text: str, what: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not _EXT_KEY.fullmatch(key):
            raise SaslError(f"malformed SCRAM {what}: an attribute is not of the form a=value")
        out.append((key, value))
    return out


def _expect(attrs: list[tuple[str, str]], names: str, what: str) -> list[str]:
    """The values of ``attrs``, which must carry exactly the attribute names ``names`` in order."""
    got = [a for a, _ in attrs]
    if got != list(names):
        if "m" in got:
            raise SaslError(f"SCRAM {what} carries a mandatory extension (m=) this client does not know")
        raise SaslError(f"malformed SCRAM {what}: attributes {','.join(got)}, expected {','.join(names)}")
    return [v for _, v in attrs]


def _decode(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"SCRAM {what} is not UTF-8") from None


def _check_nonce(nonce: str, what: str) -> None:
    if not _PRINTABLE.fullmatch(nonce):
        raise SaslError(f"SCRAM {what} must be printable ASCII without ','")


# -- client side -------------------------------------------------------------------------------


class _ScramParty:
    """What both halves share: the mechanism and a state name ("complete" once verified)."""

    __slots__ = ("_m", "_state")

    def __init__(self, mechanism: str | ScramMechanism) -> None:
        self._m = scram_mechanism(mechanism)
        self._state = "initial"

    @property
    def mechanism(self) -> str:
        return self._m.name

    @property
    def complete(self) -> bool:
        return self._state == "complete"


class ScramClient(_ScramParty):
    """The client half of a SCRAM exchange: client-first, client-final, verify server-final."""

    __slots__ = ("_bare", "_nonce", "_password", "_server_signature", "_username")

    def __init__(
        self,
        mechanism: str | ScramMechanism,
        username: str,
        password: str,
        *,
        nonce: str,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(mechanism)
        if not username:
            raise SaslError(f"{self._m.name} needs a user name")
        _check_nonce(nonce, "client nonce")
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        if any(
            not _EXT_KEY.fullmatch(k) or (len(k) == 1 and k in "mnr") or "," in v
            for k, v in (extensions or {}).items()
        ):
            raise SaslError("SCRAM extensions need alphabetic keys (not m, n, r) and values without ','")
        self._username, self._password, self._nonce = username, password, nonce
        self._bare = f"n={_escape_name(username)},r={nonce}{ext}"
        self._server_signature = b""

    def initial_response(self) -> bytes:
        if self._state != "initial":
            raise SaslError("SCRAM client-first was already sent")
        self._state = "first"
        return f"n,,{self._bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._state == "first":
            self._state = "failed"
            final = self._client_final(challenge)
            self._state = "final"
            return final
        if self._state == "final":
            self._state = "failed"
            self._verify_server_final(challenge)
            self._state = "complete"
            return None
        raise SaslError(f"{self._m.name}: unexpected server message in state {self._state}")

    def _client_final(self, server_first: bytes) -> bytes:
        m = self._m
        text = _decode(server_first, "server-first message")
        nonce, salt_b64, iterations_text = _expect(
            _attrs(text, "server-first message"), "rsi", "server-first message"
        )
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslError(f"{m.name}: the server nonce does not extend the client nonce")
        _check_nonce(nonce, "server nonce")
        salt = _unb64(salt_b64, "salt")
        if not iterations_text.isdigit() or not salt:
            raise SaslError(f"malformed {m.name} server-first message: bad salt or iteration count")
        iterations = int(iterations_text)
        if not m.min_iterations <= iterations <= m.max_iterations:
            raise SaslError(
                f"{m.name}: the server asks for {iterations} iterations,"
                f" outside {m.min_iterations}..{m.max_iterations}"
            )
        salted = _salted_password(m, self._password, salt, iterations)
        client_key = _hmac(m, salted, b"Client Key")
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_signature = _hmac(m, _h(m, client_key), auth_message)
        self._server_signature = _hmac(m, _hmac(m, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(_xor(client_key, client_signature))}".encode()

    def _verify_server_final(self, server_final: bytes) -> None:
        text = _decode(server_final, "server-final message")
        attrs = _attrs(text, "server-final message")
        if attrs and attrs[0][0] == "e":
            raise SaslError(f"{self._m.name}: the server refused the proof ({attrs[0][1][:100]})")
        (verifier,) = _expect(attrs, "v", "server-final message")
        if not hmac.compare_digest(_unb64(verifier, "server signature"), self._server_signature):
            raise SaslError(
                f"{self._m.name}: the server signature does not match (the server does not know the password)"
            )

    def __repr__(self) -> str:
        return f"ScramClient(mechanism={self._m.name!r}, username={self._username!r}, state={self._state!r})"


# -- server side -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramClientFirst:
    """What a server learns from a client-first message."""

    username: str
    nonce: str
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


class ScramServer(_ScramParty):
    """The server half of a SCRAM exchange.

    :meth:`receive_client_first` gives the user name (look its credential up), then
    :meth:`server_first` with that credential, then :meth:`receive_client_final` checks the proof
    and returns the server-final message. For an unknown user pass a made-up credential to
    :meth:`server_first` (a fixed salt per name) so that the failure shows only at the proof.
    """

    __slots__ = ("_bare", "_credential", "_first", "_nonce", "_server_first")

    def __init__(self, mechanism: str | ScramMechanism, *, nonce: str) -> None:
        super().__init__(mechanism)
        _check_nonce(nonce, "server nonce")
        self._nonce = nonce
        self._first: ScramClientFirst | None = None
        self._credential: ScramCredential | None = None
        self._bare = self._server_first = ""

    def receive_client_first(self, message: bytes) -> ScramClientFirst:
        if self._state != "initial":
            raise SaslError(f"{self._m.name}: client-first received twice")
        self._state = "failed"
        text = _decode(message, "client-first message")
        if not text.startswith("n,"):
            raise SaslError(f"{self._m.name}: only the 'n' channel-binding flag is supported")
        authz, sep, bare = text[2:].partition(",")
        if not sep or (authz and not authz.startswith("a=")):
            raise SaslError(f"malformed {self._m.name} client-first message: bad GS2 header")
        attrs = _attrs(bare, "client-first message")
        name, nonce = _expect(attrs[:2], "nr", "client-first message")
        extensions = dict(attrs[2:])
        if "m" in extensions or len(extensions) != len(attrs) - 2:
            raise SaslError(f"malformed {self._m.name} client-first message: bad or repeated extensions")
        username = _unescape_name(name)
        authzid = _unescape_name(authz[2:]) if authz else ""
        _check_nonce(nonce, "client nonce")
        if not username or (authzid and authzid != username):
            raise SaslError(f"{self._m.name}: empty user name, or an authorization id that differs from it")
        self._bare = bare
        self._first = ScramClientFirst(username=username, nonce=nonce, authzid=authzid, extensions=extensions)
        self._state = "first"
        return self._first

    def server_first(self, credential: ScramCredential) -> bytes:
        if self._state != "first" or self._first is None:
            raise SaslError(f"{self._m.name}: server-first before client-first")
        self._credential = credential
        self._server_first = (
            f"r={self._first.nonce}{self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        )
        self._state = "server-first"
        return self._server_first.encode()

    def receive_client_final(self, message: bytes) -> bytes:
        if self._state != "server-first" or self._first is None or self._credential is None:
            raise SaslError(f"{self._m.name}: client-final out of order")
        self._state = "failed"
        m, cred = self._m, self._credential
        text = _decode(message, "client-final message")
        without_proof, _, proof_attr = text.rpartition(",")
        binding, nonce = _expect(_attrs(without_proof, "client-final message"), "cr", "client-final message")
        (proof_b64,) = _expect(_attrs(proof_attr, "client-final message"), "p", "client-final message")
        gs2 = f"n,a={_escape_name(self._first.authzid)}," if self._first.authzid else "n,,"
        if binding != _b64(gs2.encode()):
            raise SaslError(f"{m.name}: the channel binding does not match the client-first GS2 header")
        if nonce != self._first.nonce + self._nonce:
            raise SaslError(f"{m.name}: the client-final nonce is not the one agreed")
        proof = _unb64(proof_b64, "proof")
        auth_message = f"{self._bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(m, cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslError(f"{m.name}: authentication failed (invalid proof)")
        client_key = _xor(proof, client_signature)
        if not hmac.compare_digest(_h(m, client_key), cred.stored_key):
            raise SaslError(f"{m.name}: authentication failed (invalid proof)")
        self._state = "complete"
        return f"v={_b64(_hmac(m, cred.server_key, auth_message))}".encode()

    def __repr__(self) -> str:
        return f"ScramServer(mechanism={self._m.name!r}, state={self._state!r})"
