"""The IO layer: Kafka framing, connections, and (as it lands) the asyncio driver."""

from streamtasks.runtime.framing import FrameDecoder, decode_response, encode_request

__all__ = ["FrameDecoder", "decode_response", "encode_request"]
