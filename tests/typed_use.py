"""What a user's type checker sees of ``from streamtasks import ...``: real classes, not the
``object`` a lazy module ``__getattr__`` gives (``tests/test_typed_use.py`` runs ``mypy
--strict`` on this file; nothing here runs)."""

from __future__ import annotations

from typing import assert_type

from streamtasks import (
    App,
    AppConfig,
    ClientSettings,
    Consumer,
    EmbeddedBroker,
    KafkaBroker,
    ProcessorContext,
    Record,
    SecuritySettings,
    StreamTasksError,
    UndeclaredTopicError,
    load_client_config,
)
from streamtasks.state.serdes import INT64, STRING
from topology import TopologyBuilder


def split(ctx: ProcessorContext, record: Record) -> None:
    for word in (record.value or b"").split():
        ctx.forward("words", key=word, value=b"1")


def count(ctx: ProcessorContext, record: Record) -> None:
    counts = ctx.store("counts")
    counts.put(record.key, (counts.get(record.key) or 0) + 1)


def build(bootstrap_servers: str) -> App:
    builder = TopologyBuilder("word-count")
    builder.stream("lines").repartition("words").store("counts")
    return App(
        builder.build(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        application_id="word-count",
        bootstrap_servers=bootstrap_servers,
    )


async def run(app: App) -> AppConfig:
    async with app as running:
        assert_type(running, App)
        await running.run(until=lambda: True)
    return app.config


def settings(path: str, bootstrap_servers: str) -> SecuritySettings:
    client = ClientSettings(bootstrap_servers=bootstrap_servers, **load_client_config(path))
    assert_type(client, ClientSettings)
    return client


def brokers(tansu: EmbeddedBroker, kafka: KafkaBroker) -> tuple[str, str]:
    return tansu.bootstrap_servers, kafka.bootstrap_servers


def consumer_type() -> type[Consumer]:
    return Consumer


def is_ours(error: Exception) -> bool:
    return isinstance(error, UndeclaredTopicError) and isinstance(error, StreamTasksError)
