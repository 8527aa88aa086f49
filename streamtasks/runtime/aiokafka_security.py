"""aiokafka under streamtasks' security settings: its connection failures told by their real
cause (and, from :mod:`streamtasks.runtime.aiokafka_redaction`, its logs without secrets).
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiokafka.errors import KafkaError

from streamtasks.errors import BrokerError
from streamtasks.runtime.aiokafka_redaction import (
    REDACTED,
    aiokafka_token_provider,
    install_log_redaction,
    redact_text,
)
from streamtasks.runtime.connection import ConnectionLost, open_any
from streamtasks.runtime.security import ClientSettings

__all__ = ["REDACTED", "aiokafka_token_provider", "install_log_redaction", "redact_text", "start_aiokafka"]


async def start_aiokafka(client: Any, settings: ClientSettings, what: str = "aiokafka") -> None:
    """``await client.start()`` for an aiokafka consumer, producer or admin client built from
    ``settings``. aiokafka says only "Unable to bootstrap from [...]" when a password is wrong
    or a CA untrusted: then the runtime's own connection asks the broker, and its
    :class:`~streamtasks.errors.TlsError` / :class:`~streamtasks.errors.AuthenticationError`
    (the real cause) is raised instead; any other failure is a BrokerError naming the servers."""
    try:
        await client.start()
    except KafkaError as exc:
        with contextlib.suppress(Exception):
            await client.stop()
        try:
            conn = await open_any(settings, "streamtasks-probe")
        except ConnectionLost as lost:
            raise BrokerError(f"{what} cannot reach {settings.bootstrap_servers}: {lost}") from exc
        await conn.close()
        raise BrokerError(f"{what} could not start against {settings.bootstrap_servers}: {exc}") from exc
