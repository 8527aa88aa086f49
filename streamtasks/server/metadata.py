"""The backing cluster's topics as the coordinator's :class:`~streamtasks.coordinator.MetadataImage`
(every topic with its id and partition count, from Metadata v12)."""

from __future__ import annotations

import uuid

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks.coordinator import MetadataImage, TopicMetadata
from streamtasks.errors import BrokerError
from streamtasks.runtime.connection import open_any
from streamtasks.runtime.security import ClientSettings

__all__ = ["fetch_api_versions", "fetch_image"]

_NO_ID = uuid.UUID(int=0)


async def fetch_image(
    bootstrap: str | ClientSettings, *, client_id: str = "streamtasks-coordinator"
) -> MetadataImage:
    conn = await open_any(bootstrap, client_id)
    try:
        request = metadata_req.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        response = await conn.call(request, MetadataResponse)
    finally:
        await conn.close()
    topics = [
        TopicMetadata(topic_id=t.topic_id, name=str(t.name), num_partitions=len(t.partitions))
        for t in response.topics
        if t.error_code.value == 0 and t.topic_id is not None and t.topic_id != _NO_ID and t.partitions
    ]
    return MetadataImage(tuple(topics))


async def fetch_api_versions(
    bootstrap: str | ClientSettings, *, client_id: str = "streamtasks-coordinator"
) -> dict[int, tuple[int, int]]:
    """The first reachable broker's APIs: api key -> (min version, max version)."""
    conn = await open_any(bootstrap, client_id)
    try:
        response = await conn.call(
            ApiVersionsRequest(client_software_name="streamtasks", client_software_version="0"),
            ApiVersionsResponse,
        )
    finally:
        await conn.close()
    if response.error_code.value != 0:
        raise BrokerError(f"ApiVersions at the backing cluster: error {response.error_code.value}")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
