"""SASL mechanisms: RFC test vectors, client <-> server round trips, and every refusal."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pytest

from streamtasks.errors import SaslError
from streamtasks.protocol.sasl import (
    MECHANISMS,
    OAUTHBEARER_ERROR_ACK,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    OAuthBearerClient,
    PlainClient,
    ScramClient,
    ScramMechanism,
    ScramServer,
    parse_oauthbearer,
    parse_plain,
    sasl_client,
    scram_credential,
    scram_mechanism,
)


# RFC 7677 section 3 (SCRAM-SHA-256) and RFC 5802 section 5 (SCRAM-SHA-1), user "user", password "pencil".
@dataclass(frozen=True, slots=True, kw_only=True)
class Vector:
    client_nonce: str
    server_nonce: str
    salt: str
    client_first: bytes
    server_first: bytes
    client_final: bytes
    server_final: bytes


RFC7677 = Vector(
    client_nonce="rOprNGfwEbeRWgbNEkqO",
    server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    salt="W22ZaJ0SNY7soEsUEjb6gQ==",
    client_first=b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    server_first=b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    client_final=b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    server_final=b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)
RFC5802 = Vector(
    client_nonce="fyko+d2lbbFgONRv9qkxdawL",
    server_nonce="3rfcNHYJY1ZVvWVs7j",
    salt="QSXCR+Q6sek8bf92",
    client_first=b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
    server_first=b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    client_final=b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    server_final=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
)
# RFC 5802's vector is SCRAM-SHA-1, which Kafka does not speak: a mechanism object made for the test.
SCRAM_SHA_1 = ScramMechanism(name="SCRAM-SHA-1", hash_name="sha1")
VECTORS = [
    pytest.param(SCRAM_SHA_256, RFC7677, id="rfc7677"),
    pytest.param(SCRAM_SHA_1, RFC5802, id="rfc5802"),
]


@pytest.mark.parametrize(("mechanism", "v"), VECTORS)
def test_scram_client_matches_the_rfc_exchange(mechanism: ScramMechanism, v: Vector) -> None:
    client = ScramClient(mechanism, "user", "pencil", nonce=v.client_nonce)
    assert client.initial_response() == v.client_first
    assert client.evaluate(v.server_first) == v.client_final
    assert not client.complete
    assert client.evaluate(v.server_final) is None
    assert client.complete


@pytest.mark.parametrize(("mechanism", "v"), VECTORS)
def test_scram_server_matches_the_rfc_exchange(mechanism: ScramMechanism, v: Vector) -> None:
    credential = scram_credential(mechanism, "pencil", base64.b64decode(v.salt), 4096)
    server = ScramServer(mechanism, nonce=v.server_nonce)
    first = server.receive_client_first(v.client_first)
    assert (first.username, first.nonce, first.authzid, dict(first.extensions)) == (
        "user",
        v.client_nonce,
        "",
        {},
    )
    assert server.server_first(credential) == v.server_first
    assert server.receive_client_final(v.client_final) == v.server_final
    assert server.complete


def _round_trip(mechanism: str, username: str, password: str, stored_password: str) -> ScramClient:
    credential = scram_credential(mechanism, stored_password, b"salt-of-16-bytes", 4096)
    client = ScramClient(mechanism, username, password, nonce="clientnonce123")
    server = ScramServer(mechanism, nonce="servernonce456")
    assert server.receive_client_first(client.initial_response()).username == username
    client_final = client.evaluate(server.server_first(credential))
    assert client_final is not None
    assert client.evaluate(server.receive_client_final(client_final)) is None
    return client


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_scram_round_trip_with_names_that_need_escaping(mechanism: str) -> None:
    client = _round_trip(mechanism, "app,one=x", "pässwörd", "pässwörd")
    assert client.complete
    assert client.mechanism == mechanism.upper()


def test_scram_sha_512_keys_are_sha_512_sized() -> None:
    credential = scram_credential(SCRAM_SHA_512, "pencil", b"salt", 4096)
    assert len(credential.stored_key) == len(credential.server_key) == 64
    assert "stored_key" not in repr(credential)


def test_scram_server_refuses_a_wrong_password_without_naming_it() -> None:
    with pytest.raises(SaslError, match="invalid proof") as caught:
        _round_trip("SCRAM-SHA-512", "app", "wrong-secret", "right-secret")
    assert "secret" not in str(caught.value)


def _client_after_first(nonce: str = "abc") -> ScramClient:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=nonce)
    client.initial_response()
    return client


@pytest.mark.parametrize(
    ("server_first", "match"),
    [
        (b"r=xyzabc,s=QSXCR+Q6sek8bf92,i=4096", "does not extend the client nonce"),
        (b"r=abc,s=QSXCR+Q6sek8bf92,i=4096", "does not extend the client nonce"),
        (b"r=abc d,s=QSXCR+Q6sek8bf92,i=4096", "printable"),
        (b"r=abcdef,s=not base64!,i=4096", "not base64"),
        (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=many", "bad salt or iteration count"),
        (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4095", "outside 4096"),
        (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=999999999", "outside 4096"),
        (b"m=ext,r=abcdef,s=QSXCR+Q6sek8bf92,i=4096", "mandatory extension"),
        (b"r=abcdef,s=QSXCR+Q6sek8bf92,i=4096,x=unknown", "attributes r,s,i,x"),
        (b"r=abcdef,i=4096,s=QSXCR+Q6sek8bf92", "expected r,s,i"),
        (b"r=abcdef,s=QSXCR+Q6sek8bf92", "expected r,s,i"),
        (b"garbage", "not of the form a=value"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_scram_client_refuses_a_bad_server_first(server_first: bytes, match: str) -> None:
    client = _client_after_first()
    with pytest.raises(SaslError, match=match):
        client.evaluate(server_first)
    with pytest.raises(SaslError, match="state failed"):
        client.evaluate(b"v=AAAA")


@pytest.mark.parametrize(
    ("server_final", "match"),
    [
        (b"v=" + base64.b64encode(b"\0" * 32), "signature does not match"),
        (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4", "not base64"),
        (b"e=invalid-proof", r"refused the proof \(invalid-proof\)"),
        (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=,x=1", "attributes v,x"),
        (b"", "not of the form"),
    ],
)
def test_scram_client_refuses_a_bad_server_final(server_final: bytes, match: str) -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=RFC7677.client_nonce)
    client.initial_response()
    client.evaluate(RFC7677.server_first)
    with pytest.raises(SaslError, match=match) as caught:
        client.evaluate(server_final)
    assert "pencil" not in str(caught.value)
    assert not client.complete


def test_scram_client_state_machine_and_local_input() -> None:
    with pytest.raises(SaslError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        scram_mechanism("SCRAM-SHA-1")
    with pytest.raises(SaslError, match="printable"):
        ScramClient(SCRAM_SHA_256, "user", "pencil", nonce="a,b")
    with pytest.raises(SaslError, match="needs a user name"):
        ScramClient(SCRAM_SHA_256, "", "pencil", nonce="abc")
    with pytest.raises(SaslError, match="alphabetic keys"):
        ScramClient(SCRAM_SHA_256, "u", "pencil", nonce="abc", extensions={"m": "x"})
    client = ScramClient(SCRAM_SHA_256, "u", "pencil", nonce="abc", extensions={"tokenauth": "true"})
    with pytest.raises(SaslError, match="state initial"):
        client.evaluate(b"r=abcd,s=AAAA,i=4096")
    assert client.initial_response() == b"n,,n=u,r=abc,tokenauth=true"
    with pytest.raises(SaslError, match="already sent"):
        client.initial_response()
    assert "pencil" not in repr(client)


def test_scram_server_hands_on_kafka_token_extension() -> None:
    server = ScramServer(SCRAM_SHA_512, nonce="srv")
    first = server.receive_client_first(b"n,a=u,n=u,r=abc,tokenauth=true")
    assert (first.authzid, dict(first.extensions)) == ("u", {"tokenauth": "true"})


@pytest.mark.parametrize(
    ("client_first", "match"),
    [
        (b"y,,n=user,r=abc", "channel-binding"),
        (b"p=tls-unique,,n=user,r=abc", "channel-binding"),
        (b"n,x=y,n=user,r=abc", "GS2 header"),
        (b"n,,r=abc,n=user", "expected n,r"),
        (b"n,,m=1,n=user,r=abc", "mandatory extension"),
        (b"n,,n=user,r=abc,m=1", "bad or repeated extensions"),
        (b"n,,n=us=er,r=abc", "escape"),
        (b"n,,n=,r=abc", "empty user name"),
        (b"n,a=other,n=user,r=abc", "differs"),
        (b"n,,n=user,r=a b", "printable"),
        (b"n,,n=user", "expected n,r"),
    ],
)
def test_scram_server_refuses_a_bad_client_first(client_first: bytes, match: str) -> None:
    with pytest.raises(SaslError, match=match):
        ScramServer(SCRAM_SHA_256, nonce="srv").receive_client_first(client_first)


@pytest.mark.parametrize(
    ("client_final", "match"),
    [
        (b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", "channel binding"),
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=AAAA", "nonce is not the one agreed"),
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA", "invalid proof"),
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "expected c,r"),
        (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,x=1", "expected p"),
    ],
)
def test_scram_server_refuses_a_bad_client_final(client_final: bytes, match: str) -> None:
    server = ScramServer(SCRAM_SHA_256, nonce=RFC7677.server_nonce)
    server.receive_client_first(RFC7677.client_first)
    server.server_first(
        scram_credential(SCRAM_SHA_256, "pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    )
    with pytest.raises(SaslError, match=match):
        server.receive_client_final(client_final)
    assert not server.complete


def test_scram_server_order() -> None:
    server = ScramServer(SCRAM_SHA_256, nonce="srv")
    with pytest.raises(SaslError, match="before client-first"):
        server.server_first(scram_credential(SCRAM_SHA_256, "p", b"s", 4096))
    with pytest.raises(SaslError, match="out of order"):
        server.receive_client_final(b"c=biws,r=x,p=AAAA")
    with pytest.raises(SaslError, match="salt"):
        scram_credential(SCRAM_SHA_256, "p", b"", 4096)


def test_plain_round_trip_and_refusals() -> None:
    client = PlainClient("alice", "alice-secret")
    message = client.initial_response()
    assert message == b"\0alice\0alice-secret"
    assert client.complete
    assert client.evaluate(b"") is None
    with pytest.raises(SaslError, match="PLAIN has none"):
        client.evaluate(b"challenge")
    parsed = parse_plain(message)
    assert (parsed.username, parsed.password, parsed.authzid) == ("alice", "alice-secret", "")
    assert "alice-secret" not in repr(parsed) + repr(client)
    assert parse_plain(b"alice\0alice\0pw").authzid == "alice"
    for bad, match in [
        (b"bob\0alice\0pw", "differs"),
        (b"\0alice", "authzid NUL username NUL password"),
        (b"\0\0pw", "empty"),
        (b"\0alice\0", "empty"),
        (b"\0al\xffice\0pw", "UTF-8"),
    ]:
        with pytest.raises(SaslError, match=match):
            parse_plain(bad)
    with pytest.raises(SaslError, match="cannot contain NUL"):
        PlainClient("a\0b", "pw")
    with pytest.raises(SaslError, match="needs a user name and a password"):
        PlainClient("alice", "")


def _unsecured_jwt(sub: str) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': 1, 'exp': 2})}."


def test_oauthbearer_initial_response_round_trip() -> None:
    token = _unsecured_jwt("app")
    client = OAuthBearerClient(token, extensions={"traceId": "123"}, authzid="app")
    message = client.initial_response()
    assert message == f"n,a=app,\x01auth=Bearer {token}\x01traceId=123\x01\x01".encode()
    parsed = parse_oauthbearer(message)
    assert (parsed.token, parsed.authzid, dict(parsed.extensions)) == (token, "app", {"traceId": "123"})
    assert token not in repr(parsed) + repr(client)
    assert client.evaluate(b"") is None
    assert client.complete
    assert OAuthBearerClient(token).initial_response() == f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_oauthbearer_error_challenge_is_acknowledged_with_kvsep() -> None:
    client = OAuthBearerClient(_unsecured_jwt("app"))
    client.initial_response()
    challenge = json.dumps({"status": "invalid_token", "scope": "kafka"}).encode()
    assert client.evaluate(challenge) == OAUTHBEARER_ERROR_ACK == b"\x01"
    assert client.server_error == "invalid_token, scope kafka"
    assert not client.complete
    with pytest.raises(SaslError, match=r"rejected the token \(invalid_token, scope kafka\)"):
        client.evaluate(b"")
    other = OAuthBearerClient("tok")
    other.initial_response()
    assert other.evaluate(b"not json") == b"\x01"
    assert other.server_error == "unreadable error challenge"


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (b"n,,\x01auth=Bearer tok\x01", "framing"),
        (b"y,,\x01auth=Bearer tok\x01\x01", "framing"),
        (b"n,x=y,\x01auth=Bearer tok\x01\x01", "authorization id"),
        (b"n,,\x01auth=Basic tok\x01\x01", "Bearer"),
        (b"n,,\x01k=v\x01\x01", "no auth=Bearer"),
        (b"n,,\x01auth=Bearer tok\x01k1=v\x01\x01", "key=value"),
        (b"n,,\x01auth=Bearer tok\x01auth=Bearer x\x01\x01", "key=value"),
        (b"n,,\x01\xff\x01\x01", "UTF-8"),
    ],
)
def test_parse_oauthbearer_refuses(message: bytes, match: str) -> None:
    with pytest.raises(SaslError, match=match):
        parse_oauthbearer(message)


def test_oauthbearer_client_refuses_bad_input() -> None:
    with pytest.raises(SaslError, match="needs a token"):
        OAuthBearerClient("")
    with pytest.raises(SaslError, match="needs a token"):
        OAuthBearerClient("a token with spaces")
    with pytest.raises(SaslError, match="extension 'auth'"):
        OAuthBearerClient("tok", extensions={"auth": "x"})
    with pytest.raises(SaslError, match="before the initial response"):
        OAuthBearerClient("tok").evaluate(b"")


def test_sasl_client_factory_covers_every_mechanism() -> None:
    clients = [sasl_client(m, username="u", password="pw", token="tok", nonce="n0nce") for m in MECHANISMS]
    assert [c.mechanism for c in clients] == list(MECHANISMS)
    with pytest.raises(SaslError, match="unknown SASL mechanism 'GSSAPI'"):
        sasl_client("GSSAPI")
