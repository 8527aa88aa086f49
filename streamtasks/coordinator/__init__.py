"""The KIP-848 consumer-group coordinator, sans-IO, with client-side assignment.

Written as Kafka's own group coordinator is: a write returns ``Result(records, response)`` and
does not mutate; ``replay(record)`` is the only mutation of group state. See
``docs/membership.md`` (the coordinator section).
"""

__all__: list[str] = []
