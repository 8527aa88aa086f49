"""The exception handlers under exactly-once, on a real broker, read back ``read_committed``.

The app and its poison records are tests/integration/test_app_errors.py's (a value the source
serde cannot read, one the processor raises on, one whose output the broker refuses), with
``processing_guarantee="exactly_once_v2"``:

* CONTINUE with a dead-letter topic: each poison record is skipped and dead-lettered inside the
  transaction; every input offset is in ``out`` or in the dead-letter topic, read committed,
  exactly once, and the committed offsets are the ends;
* FAIL: a first round is committed, then a round with a poison record: ``run`` raises, ``stop``
  aborts the transaction, and nothing of the failed round becomes visible: the committed
  offsets are the first round's, and the committed output and dead-letter topic hold the first
  round only (the FAIL handler's dead letter was written in the aborted transaction).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamtasks.app import ProcessingError
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from tests.integration.test_app_errors import (
    CONTINUE,
    COUNT,
    PARTITIONS,
    POISON,
    produce,
    read_all,
    set_up,
    value_of,
)
from tests.integration.test_app_send_failure import _committed

pytestmark = [pytest.mark.integration]


async def scenario(bootstrap: str, tmp: str, rounds: list[list[int]], **handlers: Any) -> dict[str, Any]:
    """Produce and process ``rounds`` in turn, committing after each; a failure ends it."""
    setup = await set_up(bootstrap, tmp, "eoserrors", processing_guarantee="exactly_once_v2", **handlers)
    app, topic, app_id, out, dlq = setup.app, setup.topic, setup.topic, setup.out, setup.dlq
    where: dict[int, tuple[int, int]] = {}
    failure: BaseException | None = None
    committed_rounds: list[dict[int, int | None]] = []
    await app.start()
    try:
        done = 0
        for seqs in rounds:
            where.update(await produce(bootstrap, topic, seqs))
            done += len(seqs)
            await asyncio.wait_for(app.run(until=lambda n=done: app.tasks.records_processed >= n), 60)
            await app.commit()
            committed_rounds.append(await _committed(bootstrap, app_id, topic))
    except ProcessingError as exc:
        failure = exc
    finally:
        await app.stop()
    committed = "read_committed"
    return {
        "topic": topic,
        "where": where,
        "failure": failure,
        "dropped": app.tasks.records_dropped,
        "rounds": committed_rounds,
        "committed": await _committed(bootstrap, app_id, topic),
        "out": await read_all(bootstrap, out, isolation_level=committed),
        "dlq": await read_all(bootstrap, dlq, 1, isolation_level=committed),
    }


def seq_of(record: Any) -> int:
    return int(dict(record.headers)["seq"])


def test_continue_dead_letters_in_the_transaction_and_commits_past_each_poison_record(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any
) -> None:
    seqs = list(range(COUNT))
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), [seqs], **CONTINUE))
    assert got["failure"] is None
    where: dict[int, tuple[int, int]] = got["where"]
    ends = {p: 1 + max(o for q, o in where.values() if q == p) for p in range(PARTITIONS)}
    assert got["committed"] == ends  # past every record, the poison ones included
    out = [seq_of(r) for r in got["out"]]
    dead = [seq_of(r) for r in got["dlq"]]
    assert sorted(out + dead) == seqs  # each input offset exactly once, read committed
    assert sorted(dead) == sorted(POISON)
    # a revival (the transaction coordinator once stalled the transaction here until the broker
    # timed it out and fenced the producer) skips them again: counted again, visible once
    assert got["dropped"] >= len(POISON)
    for r in got["dlq"]:
        partition, offset = where[seq_of(r)]
        assert r.value == value_of(seq_of(r))
        assert dict(r.headers)["__streams.errors.offset"] == str(offset).encode()
        assert dict(r.headers)["__streams.errors.partition"] == str(partition).encode()


@pytest.mark.parametrize("poison", [7, 12], ids=["undeserializable", "processor-raises"])
def test_fail_aborts_the_transaction_and_nothing_of_the_failed_round_is_visible(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any, poison: int
) -> None:
    first = [s for s in range(COUNT // 2) if s not in POISON]
    second = [s for s in range(COUNT // 2, COUNT) if s not in POISON] + [poison]
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), [first, second]))
    assert isinstance(got["failure"], ProcessingError)
    _, offset = got["where"][poison]
    assert f"@{offset}" in str(got["failure"])
    assert len(got["rounds"]) == 1  # the first round was committed, the second failed
    assert got["committed"] == got["rounds"][0]  # nothing committed past the first round
    assert sorted(seq_of(r) for r in got["out"]) == first  # nothing of the failed round
    assert got["dlq"] == []  # the FAIL handler's dead letter went with the aborted transaction
