"""A faust-streaming app whose partitions are placed by streamtasks.

It counts clicks per user in a table (changelogged, with one standby replica) and uses
``streamtasks.faust.StreamtasksAssignor`` instead of faust's own assignor: actives go to workers
whose local table state is caught up, standbys are placed lag-aware, and a worker that has to
take over a table first warms it up, then asks for the rebalance that moves it.

Run two workers (each with its own data directory and url)::

    FAUST_BROKER=127.0.0.1:9092 FAUST_WORKER=1 faust -A examples.faust_app.app worker -l info
    FAUST_BROKER=127.0.0.1:9092 FAUST_WORKER=2 faust -A examples.faust_app.app worker -l info

and produce keyed records (key = user, value = anything) to the ``clicks`` topic.
Environment: ``FAUST_BROKER`` (bootstrap servers), ``FAUST_APP_ID`` (default ``faust-clicks``),
``FAUST_TOPIC`` (default ``clicks``), ``FAUST_WORKER`` (a name for this worker: its url and data
directory), ``FAUST_DATADIR`` (default ``/tmp/faust-<app>``), ``FAUST_ASSIGNOR``
(``streamtasks``, the default, or ``faust`` for faust's own), ``FAUST_PARTITIONS`` (4),
``FAUST_AUDIT_LOG`` (optional: a file that gets one ``partition offset`` line per processed
record, for an audit of what was processed against what the broker acknowledged).
"""

from __future__ import annotations

import os

import faust

APP_ID = os.environ.get("FAUST_APP_ID", "faust-clicks")
TOPIC = os.environ.get("FAUST_TOPIC", "clicks")
WORKER = os.environ.get("FAUST_WORKER", "1")
PARTITIONS = int(os.environ.get("FAUST_PARTITIONS", "4"))
ASSIGNORS = {
    "streamtasks": "streamtasks.faust:StreamtasksAssignor",
    "faust": "faust.assignor:PartitionAssignor",
}

DATADIR = os.path.join(os.environ.get("FAUST_DATADIR", f"/tmp/faust-{APP_ID}"), WORKER)
os.makedirs(DATADIR, exist_ok=True)

app = faust.App(
    APP_ID,
    broker=f"kafka://{os.environ.get('FAUST_BROKER', '127.0.0.1:9092')}",
    store="rocksdb://",  # faust uses the rocksdict driver when python-rocksdb is absent
    datadir=DATADIR,
    canonical_url=f"http://worker-{WORKER}.invalid:6066/",
    web_enabled=False,
    table_standby_replicas=1,
    topic_partitions=PARTITIONS,
    PartitionAssignor=ASSIGNORS[os.environ.get("FAUST_ASSIGNOR", "streamtasks")],
)

clicks = app.topic(TOPIC, key_type=str, value_type=str, key_serializer="raw", value_serializer="raw")
counts = app.Table("counts", default=int, partitions=PARTITIONS, key_type=str, value_type=int)


AUDIT_LOG = os.environ.get("FAUST_AUDIT_LOG")


@app.agent(clicks)
async def count(stream: faust.StreamT) -> None:  # type: ignore[type-arg]
    audit = open(AUDIT_LOG, "a", buffering=1) if AUDIT_LOG else None  # noqa: SIM115 - lives with the agent
    async for event in stream.events():
        counts[event.key] += 1
        if audit is not None:
            audit.write(f"{event.message.partition} {event.message.offset}\n")
