"""What a failed TLS session means, in words naming the broker and the cause: the standard
library's verification messages (untrusted CA, host-name mismatch, expired certificate) and the
signs of a TLS/plaintext mix-up between client and listener."""

from __future__ import annotations

import ssl

__all__ = ["TLS_RECORD_STARTS", "handshake_failure", "session_failure", "ssl_reason", "verify_failure"]

#: The first bytes of a TLS record (alert 0x15 or handshake 0x16, version 3.x): a TLS listener
#: answering a plaintext request.
TLS_RECORD_STARTS = (b"\x15\x03", b"\x16\x03")


def ssl_reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc)


def verify_failure(exc: ssl.SSLCertVerificationError) -> str:
    message = exc.verify_message or ssl_reason(exc)
    lowered = message.lower()
    if "hostname mismatch" in lowered or "ip address mismatch" in lowered:
        hint = "the certificate is for another host name (ssl_check_hostname)"
    elif "expired" in lowered or "not yet valid" in lowered:
        hint = "the broker's certificate is outside its validity period"
    elif "issuer" in lowered or "self-signed" in lowered or "self signed" in lowered:
        hint = "no CA in ssl_cafile (or the system's) signed the broker's certificate"
    else:
        hint = "the broker's certificate did not verify"
    return f"certificate verify failed: {message} ({hint})"


def handshake_failure(peer: str, exc: ssl.SSLError) -> str:
    reason = ssl_reason(exc)
    if any(r in reason.upper() for r in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH")):
        return (
            f"the broker at {peer} is not a TLS listener (the TLS handshake got a non-TLS answer: {reason})"
        )
    if isinstance(exc, ssl.SSLEOFError) or "EOF" in reason.upper():
        return (
            f"the broker at {peer} closed the connection during the TLS handshake:"
            f" is it a TLS listener? ({reason})"
        )
    return f"TLS handshake with the broker at {peer} failed: {reason}"


def session_failure(peer: str, exc: ssl.SSLError) -> str:
    """The broker ended an established TLS session (TLS 1.3 sends its verdict on the client's
    certificate after the client's side of the handshake is done)."""
    reason = ssl_reason(exc)
    upper = reason.upper()
    if "CERTIFICATE" in upper or "UNKNOWN_CA" in upper:
        return (
            f"the broker at {peer} refused this client's certificate ({reason}): is ssl_certfile"
            " valid now, signed by a CA the broker trusts, and given at all?"
        )
    return f"the broker at {peer} ended the TLS session: {reason}"
