"""What :class:`streamtasks.App` checks and resolves before it wires anything: its config (a
mapping or an :class:`~streamtasks.app.config.AppConfig`, with keyword settings over it), that
the topology and the processors belong together, and faust's protocol assignor for
``upgrade_from="faust"``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from streamtasks.app.config import AppConfig, make_app_config
from streamtasks.app.processor import AnyProcessor
from streamtasks.errors import ConfigError
from streamtasks.streams.faust_protocol import FaustProtocolAssignor
from topology.model import Topology

__all__ = ["check_app", "faust_assignor", "resolve_config"]


def check_app(config: AppConfig, topology: Topology, processors: Mapping[int, AnyProcessor]) -> None:
    """The topology is the configured application's and the processors cover its subtopologies
    exactly (a :class:`ConfigError` otherwise)."""
    if config.application_id != topology.application_id:
        raise ConfigError(
            f"application_id {config.application_id!r} differs from the topology's "
            f"{topology.application_id!r}"
        )
    missing = sorted(s.id for s in topology.subtopologies if s.id not in processors)
    unknown = sorted(set(processors) - {s.id for s in topology.subtopologies})
    if missing or unknown:
        raise ConfigError(
            f"processors must cover every subtopology exactly: missing {missing}, unknown {unknown}"
        )


def resolve_config(config: Mapping[str, Any] | AppConfig | None, settings: Mapping[str, Any]) -> AppConfig:
    """The App's config: ``config`` (a mapping or an :class:`AppConfig`) with ``settings`` over it."""
    if isinstance(config, AppConfig):
        return config if not settings else make_app_config(config.model_dump(), **settings)
    return make_app_config(dict(config or {}), **settings)


def faust_assignor(topology: Topology, cfg: AppConfig) -> FaustProtocolAssignor:
    """faust's protocol for ``upgrade_from="faust"`` (this process's URL made unique)."""
    return FaustProtocolAssignor(
        topology,
        url=f"streamtasks://{cfg.client_id}-{uuid.uuid4().hex[:12]}/",
        replicas=cfg.num_standby_replicas,
    )
