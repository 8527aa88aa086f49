"""``streamtasks coordinator``'s flags of its metrics server's TLS and authentication and of its
OpenTelemetry export (docs/operations.md). Secrets are read from files (a token on the command
line would show in ``ps``): ``--metrics-token-file`` holds the bearer token,
``--metrics-basic-auth-file`` a ``username:password`` line."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import SecretStr, ValidationError

from streamtasks.errors import ConfigError
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.security import describe_errors

__all__ = ["add_metrics_security_arguments", "metrics_security_from_args"]


def add_metrics_security_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--metrics-tls-*``, ``--metrics-*-file`` and ``--otel-metrics`` flags."""
    parser.add_argument(
        "--metrics-tls-cert",
        type=Path,
        help="PEM certificate: serve /metrics over HTTPS (default: plain HTTP)",
    )
    parser.add_argument(
        "--metrics-tls-key",
        type=Path,
        help="the PEM key of --metrics-tls-cert (default: none; both or neither)",
    )
    parser.add_argument(
        "--metrics-tls-client-ca",
        type=Path,
        help="PEM CAs of the scrapers' certificates (mutual TLS; default: none asked)",
    )
    parser.add_argument(
        "--metrics-tls-require-client-cert",
        action="store_true",
        help="refuse a scraper without a certificate signed by --metrics-tls-client-ca",
    )
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument(
        "--metrics-token-file",
        type=Path,
        help="a file holding the bearer token scrapers send (default: no authentication)",
    )
    auth.add_argument(
        "--metrics-basic-auth-file",
        type=Path,
        help="a file holding username:password (HTTP basic auth; default: none)",
    )
    parser.add_argument(
        "--otel-metrics",
        choices=("console", "otlp"),
        default=None,
        help="also export the metrics through OpenTelemetry (the 'otel' extra; otlp needs "
        "opentelemetry-exporter-otlp-proto-http and reads OTEL_EXPORTER_OTLP_*; default: not exported)",
    )


def _read_secret(path: Path, flag: str) -> str:
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: {exc.strerror or exc}") from None
    if not text:
        raise ConfigError(f"{flag} {path} is empty")
    return text


def metrics_security_from_args(args: argparse.Namespace) -> HttpSecurity | None:
    """The metrics server's :class:`HttpSecurity` (None when no flag asks for any)."""
    values: dict[str, object] = {
        "certfile": args.metrics_tls_cert,
        "keyfile": args.metrics_tls_key,
        "cafile": args.metrics_tls_client_ca,
        "require_client_cert": args.metrics_tls_require_client_cert,
    }
    if args.metrics_token_file is not None:
        values["token"] = SecretStr(_read_secret(args.metrics_token_file, "--metrics-token-file"))
    if args.metrics_basic_auth_file is not None:
        text = _read_secret(args.metrics_basic_auth_file, "--metrics-basic-auth-file")
        username, sep, password = text.partition(":")
        if not sep or not username or not password:
            raise ConfigError(
                f"--metrics-basic-auth-file {args.metrics_basic_auth_file}: expected username:password"
            )
        values.update(username=username, password=SecretStr(password))
    if not any(v for v in values.values()):
        return None
    try:
        security = HttpSecurity.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"the metrics server's security: {describe_errors(exc)}") from None
    security.server_ssl_context()  # a file that cannot be read fails now, before anything starts
    return security
