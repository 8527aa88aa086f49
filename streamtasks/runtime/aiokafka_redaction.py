"""aiokafka's logs without secrets, and a token provider it accepts (what
:meth:`~streamtasks.runtime.security.SecuritySettings.aiokafka_kwargs` installs).

aiokafka 0.14 logs every request and response at DEBUG, SaslAuthenticate included (with PLAIN
the password in clear, with OAUTHBEARER the token). :func:`install_log_redaction` puts a filter
on every aiokafka logger (once; later calls only add secrets) that replaces SASL payloads by
their size and any known secret by ``***``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

import aiokafka
import aiokafka.admin
import aiokafka.conn
import aiokafka.consumer.fetcher
import aiokafka.producer.sender
from aiokafka.abc import AbstractTokenProvider

__all__ = ["REDACTED", "aiokafka_token_provider", "install_log_redaction", "redact_text"]

REDACTED = "***"

_lock = threading.Lock()
_secrets: set[str] = set()
_filtered: set[str] = set()


def redact_text(text: str) -> str:
    """``text`` with every registered secret replaced by ``***`` (longest first)."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def _redact_arg(arg: Any) -> Any:
    name = type(arg).__name__
    if name.startswith(("SaslAuthenticateRequest", "SaslAuthenticateResponse")):
        payload = getattr(arg, "auth_bytes", None) or getattr(arg, "sasl_auth_bytes", None) or b""
        return f"{name}(<SASL payload, {len(payload)} bytes, redacted>)"
    return arg


class _Redactor(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_redact_arg(a) for a in args)
        if _secrets or args:
            try:
                text = record.getMessage()
            except (TypeError, ValueError):
                text = str(record.msg)
            record.msg, record.args = redact_text(text), None
        if record.exc_info and _secrets:
            # The traceback is formatted later by a handler: render it now, redacted.
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


_FILTER = _Redactor()


def install_log_redaction(secrets: Iterable[str] = ()) -> None:
    """Redact SASL payloads and ``secrets`` in every aiokafka logger (idempotent)."""
    with _lock:
        _secrets.update(s for s in secrets if s)
        names = [
            n for n in list(logging.root.manager.loggerDict) if n == "aiokafka" or n.startswith("aiokafka.")
        ]
        for name in ["aiokafka", *names]:
            if name not in _filtered:
                logging.getLogger(name).addFilter(_FILTER)
                _filtered.add(name)


class _TokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """A streamtasks :class:`~streamtasks.runtime.security.TokenProvider` as aiokafka's type;
    every token it hands out is redacted from aiokafka's logs."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    async def token(self) -> str:
        token = str(await self._provider.token())
        install_log_redaction([token])
        return token

    def extensions(self) -> dict[str, str]:
        extensions = getattr(self._provider, "extensions", None)
        return dict(extensions()) if callable(extensions) else {}


def aiokafka_token_provider(provider: Any) -> Any:
    """``provider`` in the shape aiokafka's OAUTHBEARER checks for (an AbstractTokenProvider)."""
    if provider is None:
        return None
    return _TokenProvider(provider)


# aiokafka's loggers exist once its modules are imported (above).
_ = (aiokafka.admin, aiokafka.conn, aiokafka.consumer.fetcher, aiokafka.producer.sender)
