"""A throw-away certificate kit for tests, demos and the secured embedded broker.

:func:`make_cert_kit` writes PEM files, made at run time with the ``cryptography`` package, into a
directory the caller owns (a pytest ``tmp_path``, a broker's temporary directory)::

    kit = make_cert_kit(tmp_path)
    broker_settings = {"ssl.keystore.type": "PEM", ...}     # kit.broker_cert, kit.broker_key
    client = ClientSettings(security_protocol="SSL", ssl_cafile=kit.ca_cert, ...)

What it holds (:class:`CertKit`, every field a :class:`~pathlib.Path`):

- ``ca_cert``/``ca_key``: the certificate authority every other certificate but the second CA's
  is signed by;
- ``broker_cert``/``broker_key``: the server certificate, subject alternative names = ``hosts``
  (DNS names, and IP addresses for the entries that parse as one), server and client auth usage;
- ``client_cert``/``client_key``: a client certificate for mutual TLS (subject ``CN=client``, the
  principal ``User:CN=client`` on a Kafka SSL listener);
- ``other_ca_cert``/``other_ca_key``: an unrelated CA (nothing it signed is trusted by ``ca_cert``;
  it signed nothing here), for "a CA that did not sign the broker";
- ``expired_cert``/``expired_key``: signed by the CA for ``hosts``, valid for one day that ended
  a day ago;
- ``wrong_host_cert``/``wrong_host_key``: signed by the CA, valid, for ``wrong-host.invalid`` only;
- ``encrypted_key``: the client's key again, PKCS#8 encrypted with ``key_password`` (a
  :class:`~pydantic.SecretStr`: random per kit, never in a repr).

Every key is an unencrypted PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``) but ``encrypted_key``;
keys are ECDSA P-256 (fast to make: the whole kit takes well under a second). Key files are mode
0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pydantic import SecretStr

__all__ = ["DEFAULT_HOSTS", "WRONG_HOST", "CertKit", "make_cert_kit"]

#: The names the embedded brokers listen under.
DEFAULT_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1")
#: The only name ``wrong_host_cert`` is valid for (``.invalid`` never resolves, RFC 2606).
WRONG_HOST = "wrong-host.invalid"
#: The subject common name of the client certificate (Kafka's principal ``User:CN=client``).
CLIENT_CN = "client"

_Key = ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True, kw_only=True)
class CertKit:
    """The PEM files :func:`make_cert_kit` wrote (see the module docstring for each)."""

    directory: Path
    hosts: tuple[str, ...]
    ca_cert: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path
    other_ca_cert: Path
    other_ca_key: Path
    expired_cert: Path
    expired_key: Path
    wrong_host_cert: Path
    wrong_host_key: Path
    encrypted_key: Path
    key_password: SecretStr

    @property
    def client_principal(self) -> str:
        """The principal a Kafka SSL listener gives a client presenting ``client_cert``."""
        return f"User:CN={CLIENT_CN}"


def make_cert_kit(directory: Path | str, *, hosts: tuple[str, ...] = DEFAULT_HOSTS) -> CertKit:
    """Make a CA and the certificates signed by it in ``directory`` (created if missing)."""
    if not hosts:
        raise ValueError("make_cert_kit needs at least one host name for the broker certificate")
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)

    ca_key = _new_key()
    ca_name = _name("streamtasks test CA")
    ca_cert = _ca_certificate(ca_key, ca_name, now)
    other_key = _new_key()
    other_cert = _ca_certificate(other_key, _name("streamtasks unrelated CA"), now)

    def leaf(
        key: _Key, cn: str, names: tuple[str, ...], start: datetime.datetime, end: datetime.datetime
    ) -> x509.Certificate:
        return _leaf_certificate(key, cn, names, start, end, issuer=ca_name, issuer_key=ca_key)

    broker_key, client_key, expired_key, wrong_key = _new_key(), _new_key(), _new_key(), _new_key()
    broker_cert = leaf(broker_key, hosts[0], hosts, now - day, now + 30 * day)
    client_cert = leaf(client_key, CLIENT_CN, (), now - day, now + 30 * day)
    expired_cert = leaf(expired_key, hosts[0], hosts, now - 2 * day, now - day)
    wrong_cert = leaf(wrong_key, WRONG_HOST, (WRONG_HOST,), now - day, now + 30 * day)
    password = SecretStr(secrets.token_urlsafe(18))

    def cert(name: str, certificate: x509.Certificate) -> Path:
        path = root / name
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return path

    def key(name: str, private: _Key, secret: SecretStr | None = None) -> Path:
        encryption: serialization.KeySerializationEncryption = (
            serialization.NoEncryption()
            if secret is None
            else serialization.BestAvailableEncryption(secret.get_secret_value().encode())
        )
        data = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        path = root / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return path

    return CertKit(
        directory=root,
        hosts=tuple(hosts),
        ca_cert=cert("ca.pem", ca_cert),
        ca_key=key("ca-key.pem", ca_key),
        broker_cert=cert("broker.pem", broker_cert),
        broker_key=key("broker-key.pem", broker_key),
        client_cert=cert("client.pem", client_cert),
        client_key=key("client-key.pem", client_key),
        other_ca_cert=cert("other-ca.pem", other_cert),
        other_ca_key=key("other-ca-key.pem", other_key),
        expired_cert=cert("expired.pem", expired_cert),
        expired_key=key("expired-key.pem", expired_key),
        wrong_host_cert=cert("wrong-host.pem", wrong_cert),
        wrong_host_key=key("wrong-host-key.pem", wrong_key),
        encrypted_key=key("client-key-encrypted.pem", client_key, password),
        key_password=password,
    )


def _new_key() -> _Key:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca_certificate(key: _Key, name: x509.Name, now: datetime.datetime) -> x509.Certificate:
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=60))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf_certificate(
    key: _Key,
    cn: str,
    names: tuple[str, ...],
    start: datetime.datetime,
    end: datetime.datetime,
    *,
    issuer: x509.Name,
    issuer_key: _Key,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """A CA signs certificates and CRLs; a leaf signs (ECDHE) handshakes."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=not ca,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
