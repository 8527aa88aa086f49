"""The certificate kit: real TLS handshakes (stdlib ssl over memory BIOs, no sockets) and
cryptography's RFC 5280 path validation prove each file is what the kit says it is."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from streamtasks.embedded.certs import WRONG_HOST, CertKit, make_cert_kit


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("certs"))


def _server_context(cert: Path, key: Path, *, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _client_context(ca: Path, *, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> None:
    """Run a TLS handshake between the two contexts in memory; raises what either side raised.
    With TLS 1.3 the server checks the client certificate after the client thinks it is done, so
    both sides then exchange one byte of application data to surface the server's verdict."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname=host)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values()), f"handshake did not finish: {done}"
    client_side.write(b"x")
    s_in.write(c_out.read())
    assert server_side.read(1) == b"x"
    server_side.write(b"y")
    c_in.write(s_out.read())
    assert client_side.read(1) == b"y"


def _verify_server(kit: CertKit, cert: Path, host: str, *, ca: Path | None = None) -> None:
    """cryptography's path validation of ``cert`` as a server certificate for ``host``."""
    store = Store([x509.load_pem_x509_certificate((ca or kit.ca_cert).read_bytes())])
    try:
        subject: x509.DNSName | x509.IPAddress = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        subject = x509.DNSName(host)
    verifier = PolicyBuilder().store(store).build_server_verifier(subject)
    verifier.verify(x509.load_pem_x509_certificate(cert.read_bytes()), [])


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_the_broker_certificate_verifies_against_the_ca_for_each_host(kit: CertKit, host: str) -> None:
    _handshake(_server_context(kit.broker_cert, kit.broker_key), _client_context(kit.ca_cert), host)
    _verify_server(kit, kit.broker_cert, host)


def test_the_broker_certificate_does_not_verify_against_the_other_ca(kit: CertKit) -> None:
    server = _server_context(kit.broker_cert, kit.broker_key)
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
        _handshake(server, _client_context(kit.other_ca_cert), "localhost")
    with pytest.raises(VerificationError):
        _verify_server(kit, kit.broker_cert, "localhost", ca=kit.other_ca_cert)


def test_the_expired_certificate_is_expired(kit: CertKit) -> None:
    cert = x509.load_pem_x509_certificate(kit.expired_cert.read_bytes())
    assert cert.not_valid_after_utc < datetime.datetime.now(datetime.UTC)
    server = _server_context(kit.expired_cert, kit.expired_key)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
        _handshake(server, _client_context(kit.ca_cert), "localhost")
    with pytest.raises(VerificationError, match="not valid at validation time"):
        _verify_server(kit, kit.expired_cert, "localhost")


def test_the_wrong_host_certificate_is_signed_by_the_ca_but_does_not_match(kit: CertKit) -> None:
    server = _server_context(kit.wrong_host_cert, kit.wrong_host_key)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(server, _client_context(kit.ca_cert), "localhost")
    with pytest.raises(VerificationError):
        _verify_server(kit, kit.wrong_host_cert, "localhost")
    _verify_server(kit, kit.wrong_host_cert, WRONG_HOST)


def test_the_client_certificate_passes_mutual_tls_and_none_does_not(kit: CertKit) -> None:
    server = _server_context(kit.broker_cert, kit.broker_key, client_ca=kit.ca_cert)
    client = _client_context(kit.ca_cert, cert=kit.client_cert, key=kit.client_key)
    _handshake(server, client, "localhost")
    with pytest.raises(ssl.SSLError):
        _handshake(server, _client_context(kit.ca_cert), "localhost")
    subject = x509.load_pem_x509_certificate(kit.client_cert.read_bytes()).subject.rfc4514_string()
    assert f"User:{subject}" == kit.client_principal


def test_a_client_certificate_signed_by_the_other_ca_is_refused(kit: CertKit, tmp_path: Path) -> None:
    other = make_cert_kit(tmp_path)  # its CA is not ours
    server = _server_context(kit.broker_cert, kit.broker_key, client_ca=kit.ca_cert)
    client = _client_context(kit.ca_cert, cert=other.client_cert, key=other.client_key)
    with pytest.raises(ssl.SSLError):
        _handshake(server, client, "localhost")


def test_the_encrypted_key_needs_its_password(kit: CertKit) -> None:
    data = kit.encrypted_key.read_bytes()
    assert b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in data
    with pytest.raises(TypeError):
        load_pem_private_key(data, password=None)
    with pytest.raises(ValueError, match=r"Bad decrypt|Incorrect password"):
        load_pem_private_key(data, password=b"not the password")
    password = kit.key_password.get_secret_value()
    plain = load_pem_private_key(kit.client_key.read_bytes(), password=None)
    assert load_pem_private_key(data, password=password.encode()).private_numbers() == plain.private_numbers()  # type: ignore[union-attr]
    context = ssl.create_default_context()
    with pytest.raises(ssl.SSLError):
        context.load_cert_chain(kit.client_cert, kit.encrypted_key, password="not the password")
    context.load_cert_chain(kit.client_cert, kit.encrypted_key, password=password)


def test_keys_are_unencrypted_pkcs8_and_private(kit: CertKit) -> None:
    for key in (
        kit.ca_key,
        kit.broker_key,
        kit.client_key,
        kit.other_ca_key,
        kit.expired_key,
        kit.wrong_host_key,
    ):
        assert key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----"), key.name
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key.name
    assert kit.key_password.get_secret_value() not in repr(kit)


def test_make_cert_kit_refuses_no_hosts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one host"):
        make_cert_kit(tmp_path, hosts=())
