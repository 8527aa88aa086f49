"""A jittered crash and scale-out of stateful app workers, audited per input offset.

Worker processes run the stateful drill app (``stateful_app``, one standby per task) as one
group while a producer writes a steady stream. At a random moment one worker is killed with
``kill -9`` (possibly while the group is still forming), at another a fresh worker joins, and a
little later the producer stops. The run passes when every input offset the broker
acknowledged was processed (:mod:`streamtasks.drills.offset_audit`). The moments come from a
seeded ``random.Random``: the seed printed with every result replays its timing.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from dataclasses import dataclass
from typing import TextIO

from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAuditReport
from streamtasks.drills.stateful_demo import DrillRun
from streamtasks.runtime.admin import create_topics_async

__all__ = ["CrashAuditReport", "run_crash_audit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashAuditReport:
    seed: int
    kill_after_s: float
    join_after_s: float
    produce_after_s: float
    complete: bool
    offsets: OffsetAuditReport

    @property
    def ok(self) -> bool:
        return self.complete and self.offsets.lost == 0

    def line(self) -> str:
        return (
            f"seed {self.seed}: kill -9 at {self.kill_after_s:.1f}s, fresh worker "
            f"{self.join_after_s:.1f}s later, producing {self.produce_after_s:.1f}s more; "
            f"{self.offsets.line()}"
        )


async def run_crash_audit(
    bootstrap: str,
    out: TextIO,
    *,
    seed: int,
    workers: int = 3,
    partitions: int = 8,
    keys: int = 3_000,
    rate: int = 600,
    drain_timeout_s: float = 90.0,
) -> CrashAuditReport:
    """One jittered run (see the module docstring)."""
    rng = random.Random(seed)
    kill_after, join_after = rng.uniform(2.0, 9.0), rng.uniform(0.5, 8.0)
    produce_after = rng.uniform(2.0, 8.0)
    run = DrillRun(bootstrap, out, partitions, keys, rate)
    await create_topics_async(bootstrap, {run.topic: partitions, run.audit_topic: 1})
    reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets)
    await reader.start()
    stop_producing = asyncio.Event()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-crash-audit-") as state_root:
            first = [run.worker(f"w{i}", state_root) for i in range(1, workers + 1)]
            for w in first:
                await w.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop_producing))
            try:
                await asyncio.sleep(kill_after)
                victim = first[rng.randrange(len(first))]
                await victim.kill()
                run.say(f"seed {seed}: kill -9 {victim.name}")
                await asyncio.sleep(join_after)
                fresh = run.worker("fresh", state_root)
                await fresh.start()
                run.say(f"seed {seed}: fresh worker joins")
                await asyncio.sleep(produce_after)
            finally:
                stop_producing.set()
                await producer
            complete = await reader.wait_complete(drain_timeout_s)
            for w in run.workers.values():
                await w.stop()
        await asyncio.sleep(0.5)
    finally:
        await reader.stop()
    report = CrashAuditReport(
        seed=seed,
        kill_after_s=kill_after,
        join_after_s=join_after,
        produce_after_s=produce_after,
        complete=complete,
        offsets=run.offsets.report(),
    )
    run.say(report.line())
    return report
