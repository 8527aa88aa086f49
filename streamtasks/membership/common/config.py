"""Checks every member's configuration makes alike: bounds of its timings, its instance id."""

from __future__ import annotations

from collections.abc import Iterable

from streamtasks.errors import ConfigError

__all__ = ["check_instance_id", "check_timings"]


def check_timings(
    positive: Iterable[tuple[str, int]],
    non_negative: Iterable[tuple[str, int]],
) -> None:
    """Raise :class:`ConfigError` for the first ``(name, value)`` of ``positive`` that is not
    > 0, then for the first of ``non_negative`` that is < 0."""
    for name, value in positive:
        if value <= 0:
            raise ConfigError(f"{name} must be > 0, got {value}")
    for name, value in non_negative:
        if value < 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")


def check_instance_id(group_instance_id: str | None) -> None:
    """Raise :class:`ConfigError` for an empty static instance id (``None``: dynamic)."""
    if group_instance_id is not None and not group_instance_id:
        raise ConfigError("group_instance_id must be None or a non-empty string")
