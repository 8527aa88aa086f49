"""The listener's SASL state machine, pure: handshake -> authenticate -> authenticated, with
the real mechanisms (``streamtasks.protocol.sasl``) over credentials made here, every illegal
order, the errors Kafka answers with, and KIP-368's session lifetime and re-authentication."""

from __future__ import annotations

import itertools

import pytest

from streamtasks.protocol.sasl import PlainClient, SaslClient, ScramClient
from streamtasks.protocol.sasl import scram_credential as make_credential
from streamtasks.server.credentials import Credentials
from streamtasks.server.sasl_server import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATE,
    SASL_AUTHENTICATION_FAILED,
    SASL_HANDSHAKE,
    UNSUPPORTED_SASL_MECHANISM,
    SaslServer,
    SaslState,
)

HEARTBEAT = 68
API_VERSIONS = 18
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def credentials() -> Credentials:
    return Credentials(
        {
            "alice": {
                m: make_credential(m, "alice-secret", f"salt-{m}".encode(), 4096)
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            },
            "bob": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "bob-secret", b"bob-salt", 4096)},
        }
    )


def server(*, lifetime_ms: int | None = None, mechanisms: tuple[str, ...] = MECHANISMS) -> SaslServer:
    nonces = (f"servernonce{i}" for i in itertools.count())
    return SaslServer(
        mechanisms=mechanisms,
        exchange_for=credentials().exchange_factory(lambda: next(nonces)),
        session_lifetime_ms=lifetime_ms,
    )


def client(mechanism: str, user: str, password: str) -> SaslClient:
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    return ScramClient(mechanism, user, password, nonce="clientnonce")


def login(s: SaslServer, mechanism: str, user: str, password: str, now_ms: int = 0) -> int:
    """Run one whole exchange; the error of the last step (0: authenticated)."""
    step = s.handshake(1, mechanism)
    assert step.error == 0
    assert step.mechanisms == s.mechanisms
    c = client(mechanism, user, password)
    payload: bytes | None = c.initial_response()
    while payload is not None:
        step = s.authenticate(payload, now_ms)
        if step.error:
            return step.error
        if s.state is SaslState.AUTHENTICATED:
            c.evaluate(step.auth_bytes)  # verifies the server's signature (SCRAM)
            return 0
        payload = c.evaluate(step.auth_bytes)
    raise AssertionError("the client finished before the server")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_each_mechanism_authenticates_and_admits_every_api(mechanism: str) -> None:
    s = server()
    assert s.admits(API_VERSIONS, 0) is None
    assert s.admits(HEARTBEAT, 0) is not None
    assert login(s, mechanism, "alice", "alice-secret") == 0
    assert s.state is SaslState.AUTHENTICATED
    assert s.principal == "User:alice"
    assert s.admits(HEARTBEAT, 0) is None


def test_plain_uses_the_sha256_credential_when_only_that_is_stored() -> None:
    s = server()
    assert login(s, "PLAIN", "bob", "bob-secret") == 0
    assert s.principal == "User:bob"


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret")])
def test_bad_credentials_fail_and_close(mechanism: str, user: str, password: str) -> None:
    s = server()
    assert login(s, mechanism, user, password) == SASL_AUTHENTICATION_FAILED
    assert s.state is SaslState.CLOSED
    assert s.principal is None
    assert s.admits(HEARTBEAT, 0) is not None


def test_the_failure_message_names_the_mechanism_never_the_password() -> None:
    s = server()
    s.handshake(1, "PLAIN")
    step = s.authenticate(b"\0alice\0hunter2-not-it", 0)
    assert step.error == SASL_AUTHENTICATION_FAILED
    assert step.close
    assert step.message is not None
    assert "PLAIN" in step.message
    assert "hunter2" not in step.message


def test_scram_for_a_user_without_that_mechanism_fails_at_the_proof() -> None:
    s = server()
    s.handshake(1, "SCRAM-SHA-512")
    c = ScramClient("SCRAM-SHA-512", "bob", "bob-secret", nonce="clientnonce")
    first = s.authenticate(c.initial_response(), 0)
    assert first.error == 0
    assert first.auth_bytes.startswith(b"r=clientnonce")
    final = s.authenticate(c.evaluate(first.auth_bytes) or b"", 0)
    assert final.error == SASL_AUTHENTICATION_FAILED


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones() -> None:
    s = server(mechanisms=("SCRAM-SHA-512",))
    step = s.handshake(1, "PLAIN")
    assert step.error == UNSUPPORTED_SASL_MECHANISM
    assert step.mechanisms == ("SCRAM-SHA-512",)
    assert step.close
    assert s.handshake(1, "GSSAPI").error == ILLEGAL_SASL_STATE  # the connection is done


def test_authenticate_before_handshake_is_an_illegal_state() -> None:
    s = server()
    step = s.authenticate(b"\0alice\0alice-secret", 0)
    assert step.error == ILLEGAL_SASL_STATE
    assert step.close
    assert s.state is SaslState.CLOSED


def test_a_second_handshake_mid_exchange_is_an_illegal_state() -> None:
    s = server()
    s.handshake(1, "SCRAM-SHA-256")
    c = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", nonce="clientnonce")
    s.authenticate(c.initial_response(), 0)
    assert s.handshake(1, "SCRAM-SHA-256").error == ILLEGAL_SASL_STATE
    assert s.state is SaslState.CLOSED


@pytest.mark.parametrize("api", [HEARTBEAT, 0, 1, 3, 8, 9, 10, 11])
def test_other_apis_before_authentication_close_without_an_answer(api: int) -> None:
    for prepare in (lambda s: None, lambda s: s.handshake(1, "PLAIN")):
        s = server()
        prepare(s)
        assert s.admits(api, 0) is not None
    s = server()
    assert s.admits(SASL_HANDSHAKE, 0) is None
    assert s.admits(SASL_AUTHENTICATE, 0) is None


def test_handshake_v0_switches_to_raw_tokens() -> None:
    s = server()
    assert s.handshake(0, "PLAIN").error == 0
    assert s.raw_tokens
    assert s.authenticate(b"\0alice\0alice-secret", 0).error == 0
    assert not s.raw_tokens
    assert s.principal == "User:alice"


def test_session_lifetime_is_returned_and_expiry_closes() -> None:
    s = server(lifetime_ms=1_000)
    s.handshake(1, "PLAIN")
    step = s.authenticate(b"\0alice\0alice-secret", 10_000)
    assert step.session_lifetime_ms == 1_000
    assert s.session_deadline_ms == 11_000
    assert s.admits(HEARTBEAT, 10_999) is None
    assert s.admits(HEARTBEAT, 11_000) is not None
    assert s.state is SaslState.CLOSED


def test_without_a_lifetime_sessions_never_expire() -> None:
    s = server()
    assert login(s, "PLAIN", "alice", "alice-secret") == 0
    assert s.session_deadline_ms is None
    assert s.admits(HEARTBEAT, 10**12) is None


def test_reauthentication_extends_the_session_and_keeps_serving_meanwhile() -> None:
    s = server(lifetime_ms=1_000)
    assert login(s, "SCRAM-SHA-512", "alice", "alice-secret", now_ms=0) == 0
    assert s.handshake(1, "SCRAM-SHA-512").error == 0
    assert s.principal == "User:alice"
    assert s.admits(HEARTBEAT, 1_500) is None  # re-authenticating: not closed at expiry
    c = ScramClient("SCRAM-SHA-512", "alice", "alice-secret", nonce="clientnonce2")
    first = s.authenticate(c.initial_response(), 1_500)
    final = s.authenticate(c.evaluate(first.auth_bytes) or b"", 1_500)
    assert final.error == 0
    assert final.session_lifetime_ms == 1_000
    assert s.session_deadline_ms == 2_500
    assert s.admits(HEARTBEAT, 2_000) is None


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    s = server()
    assert login(s, "PLAIN", "alice", "alice-secret") == 0
    s.handshake(1, "PLAIN")
    assert s.authenticate(b"\0bob\0bob-secret", 0).error == SASL_AUTHENTICATION_FAILED
    s = server()
    assert login(s, "PLAIN", "alice", "alice-secret") == 0
    assert s.handshake(1, "SCRAM-SHA-256").error == ILLEGAL_SASL_STATE
    s = server()
    assert login(s, "PLAIN", "alice", "alice-secret") == 0
    assert s.handshake(0, "PLAIN").error == ILLEGAL_SASL_STATE  # KIP-368 needs v1
