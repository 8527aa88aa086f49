"""The names of a topology's internal topics: the one place that spells them.

Kafka Streams' rule: ``<application_id>-<store>-changelog`` for a logged state store and
``<application_id>-<name>-repartition`` for a repartition topic. The app, the drills and the
benchmarks ask here instead of building the strings again.
"""

from __future__ import annotations

__all__ = ["changelog_topic", "repartition_topic"]


def changelog_topic(application_id: str, store: str) -> str:
    """The changelog topic of state store ``store``."""
    return f"{application_id}-{store}-changelog"


def repartition_topic(application_id: str, name: str) -> str:
    """The internal topic of repartition topic ``name``."""
    return f"{application_id}-{name}-repartition"
