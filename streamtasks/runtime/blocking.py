"""A minimal blocking Kafka connection for tooling (the embedded broker, admin chores).

The group protocols never go through here: they run on the asyncio driver. This exists so that
starting a broker and creating topics need no event loop.
"""

from __future__ import annotations

import itertools
import socket
from typing import Any, TypeVar

from streamtasks.errors import BrokerError
from streamtasks.runtime.framing import FrameDecoder, decode_response, encode_request

__all__ = ["BlockingConnection"]

R = TypeVar("R")


class BlockingConnection:
    """One TCP connection to one broker; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 10.0, client_id: str = "streamtasks"):
        self._addr = (host, port)
        self._client_id = client_id
        self._ids = itertools.count(1)
        try:
            self._sock = socket.create_connection(self._addr, timeout=timeout_s)
        except OSError as exc:
            raise BrokerError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._decoder = FrameDecoder()

    def call(self, request: Any, response_type: type[R]) -> R:
        correlation_id = next(self._ids)
        try:
            self._sock.sendall(
                encode_request(request, correlation_id=correlation_id, client_id=self._client_id)
            )
            while True:
                chunk = self._sock.recv(65536)
                if not chunk:
                    raise BrokerError(f"{self._addr[0]}:{self._addr[1]} closed the connection")
                frames = self._decoder.feed(chunk)
                if frames:
                    break
        except OSError as exc:
            raise BrokerError(f"request to {self._addr[0]}:{self._addr[1]} failed: {exc}") from exc
        got, response = decode_response(frames[0], response_type)
        if got != correlation_id:
            raise BrokerError(f"correlation id mismatch: sent {correlation_id}, got {got}")
        return response

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
