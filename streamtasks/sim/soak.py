"""Soak runs: every protocol on fresh seeds until the time is up (``python -m streamtasks.sim --soak``).

The loop hands out *chunks* (a protocol and a range of consecutive seeds, ``base..base+n-1``),
round-robin over the protocols, so each protocol gets its share even when the soak is stopped
early. Each chunk's base is drawn from a seed source; a chunk is no larger than the time left
allows at the rate (wall seconds per seed) measured for its protocol so far, so a soak ends
within about one scenario of its limit. Failures are reported with the replay command of their
seed.

Nothing here reads a clock or the system's entropy: the wall clock (``now``), the seed source
and the executor that runs the chunks are injected (``__main__`` passes ``time.monotonic``,
bases drawn from a fresh random ``--seed-base`` and, with ``--jobs``, the process pool of
:class:`PoolExecutor`).
"""

from __future__ import annotations

import math
import multiprocessing
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.pool import AsyncResult
from typing import Protocol

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.sim.batch import Failure
from streamtasks.sim.kip848 import ConsumerBatchSummary, run_consumer_batch
from streamtasks.sim.runner import BatchSummary, run_batch
from streamtasks.sim.streams import MODES as STREAMS_MODES
from streamtasks.sim.streams import StreamsBatchSummary, run_streams_batch

__all__ = [
    "CLASSIC",
    "DEFAULT_CHUNK",
    "KIP848",
    "PROTOCOLS",
    "SEED_RANGE",
    "ChunkExecutor",
    "ChunkResult",
    "ChunkSpec",
    "InlineExecutor",
    "PoolExecutor",
    "SeedBases",
    "SoakFailure",
    "SoakPlan",
    "SoakSummary",
    "parse_protocols",
    "progress_line",
    "run_chunk",
    "run_soak",
]

CLASSIC = ("eager", "cooperative")
KIP848 = ("consumer", "consumer-client", "mixed")
#: The streams-group sides (KIP-1071): ``streams``, ``streams-client``.
STREAMS = tuple(STREAMS_MODES)
#: ``--protocol all``. The batch CLI's ``both`` is not one of them: it runs eager and then
#: cooperative on the same seeds, which a soak does already by running both on fresh ones.
PROTOCOLS = CLASSIC + KIP848 + STREAMS
#: Chunk bases are drawn from this range: far above the seeds the tests and docs/simulation.md
#: use (0 to a few ten thousands), so a soak explores seeds nobody has run yet.
SEED_RANGE = (1_000_000, 2**31)
DEFAULT_CHUNK = 200
#: Wall seconds per seed assumed for a protocol before one of its chunks has finished (or the
#: slowest rate measured, if higher): sizes its first chunk near the end of a short soak.
SEED_SECONDS_GUESS = 0.15


def parse_protocols(text: str) -> tuple[str, ...]:
    """``all`` or a comma-separated list of protocols; ``both`` stands for eager,cooperative."""
    names: list[str] = []
    for raw in text.lower().split(","):
        name = raw.strip()
        if not name:
            continue
        expanded = PROTOCOLS if name == "all" else CLASSIC if name == "both" else (name,)
        for one in expanded:
            if one not in PROTOCOLS:
                raise ConfigError(
                    f"unknown protocol {one!r}; choose 'all' or from {', '.join(PROTOCOLS)} "
                    "(comma-separated; 'both' is eager,cooperative)"
                )
            if one not in names:
                names.append(one)
    if not names:
        raise ConfigError("no protocol given")
    return tuple(names)


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakPlan:
    """What to run: the protocols (in round-robin order), the faults, the time limit."""

    protocols: tuple[str, ...]
    faults: frozenset[str]
    seconds: float
    seed_base: int
    chunk: int = DEFAULT_CHUNK
    shrink: bool = False
    #: ``--seed-base`` given (else drawn at random for this soak).
    seed_base_given: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ConfigError(f"--soak must be a positive number of minutes, not {self.seconds / 60:g}")
        if self.chunk < 1:
            raise ConfigError(f"--chunk must be >= 1, not {self.chunk}")
        if not self.protocols:
            raise ConfigError("no protocol given")
        unknown = [p for p in self.protocols if p not in PROTOCOLS]
        if unknown:
            raise ConfigError(f"unknown protocols {unknown}; choose from {', '.join(PROTOCOLS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkSpec:
    """One chunk: ``seeds`` consecutive seeds from ``base`` under ``protocol``."""

    number: int
    protocol: str
    base: int
    seeds: int
    faults: frozenset[str]
    shrink: bool = False

    @property
    def last(self) -> int:
        return self.base + self.seeds - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakFailure:
    """A violating seed and the command that replays it."""

    protocol: str
    seed: int
    invariant: str
    time_ms: int
    detail: str
    replay: str
    #: The shrunk scenario's steps (``--shrink`` only).
    steps: tuple[str, ...] = ()

    @classmethod
    def of(cls, protocol: str, failure: Failure, *, shrunk: bool) -> SoakFailure:
        v = failure.violation
        return cls(
            protocol=protocol,
            seed=failure.seed,
            invariant=v.invariant,
            time_ms=v.time_ms,
            detail=v.detail,
            replay=failure.replay,
            steps=failure.steps if shrunk else (),
        )

    @property
    def violation(self) -> str:
        return f"[{self.invariant}] t={self.time_ms}ms: {self.detail}"

    def as_dict(self) -> dict[str, object]:
        return {
            "protocol": self.protocol,
            "seed": self.seed,
            "invariant": self.invariant,
            "time_ms": self.time_ms,
            "detail": self.detail,
            "replay": self.replay,
            "minimal_steps": list(self.steps),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkResult:
    """What a chunk ran: ``seeds`` of its seeds from its base (fewer when it was interrupted)."""

    spec: ChunkSpec
    seeds: int
    events: int
    violations: int
    failures: tuple[SoakFailure, ...] = ()


def run_chunk(spec: ChunkSpec, progress: Callable[[ChunkResult], None] | None = None) -> ChunkResult:
    """Run a chunk with the real simulator (``run_batch``, ``run_consumer_batch`` or
    ``run_streams_batch``), without
    shrinking unless the spec asks; ``progress`` gets the chunk so far after every seed."""
    seeds = range(spec.base, spec.base + spec.seeds)

    def snapshot(s: BatchSummary | ConsumerBatchSummary | StreamsBatchSummary) -> ChunkResult:
        return ChunkResult(
            spec=spec,
            seeds=s.scenarios,
            events=s.events,
            violations=s.violations,
            failures=tuple(SoakFailure.of(spec.protocol, f, shrunk=spec.shrink) for f in s.failures),
        )

    def report(s: BatchSummary | ConsumerBatchSummary | StreamsBatchSummary) -> None:
        if progress is not None:
            progress(snapshot(s))

    done: BatchSummary | ConsumerBatchSummary | StreamsBatchSummary
    faults, shrink, every = spec.faults, spec.shrink, 1  # progress after every seed: what Ctrl-C keeps
    if spec.protocol in CLASSIC:
        protocol = RebalanceProtocol[spec.protocol.upper()]
        done = run_batch(
            protocol, seeds, faults=faults, shrink_failures=shrink, progress=report, progress_every=every
        )
    elif spec.protocol in KIP848:
        done = run_consumer_batch(
            spec.protocol, seeds, faults=faults, shrink_failures=shrink, progress=report, progress_every=every
        )
    elif spec.protocol in STREAMS:
        done = run_streams_batch(
            spec.protocol, seeds, faults=faults, shrink_failures=shrink, progress=report, progress_every=every
        )
    else:
        raise ConfigError(f"unknown protocol {spec.protocol!r}")
    return snapshot(done)


class SeedBases:
    """Chunk bases drawn from ``random.Random(seed_base)`` in :data:`SEED_RANGE`: a soak's
    ``--seed-base`` gives its chunks the same bases again, in the same order."""

    def __init__(self, seed_base: int, chunk: int = DEFAULT_CHUNK) -> None:
        self._rng = random.Random(seed_base)
        self._high = SEED_RANGE[1] - chunk

    def __call__(self) -> int:
        return self._rng.randrange(SEED_RANGE[0], self._high)


class ChunkExecutor(Protocol):
    """Runs submitted chunks: in this process, or in worker processes (``--jobs``)."""

    @property
    def jobs(self) -> int:
        """How many chunks may run at once."""
        ...

    def submit(self, spec: ChunkSpec) -> None: ...

    def next_done(self) -> ChunkResult:
        """Wait for a submitted chunk to finish and return it."""
        ...

    def abandon(self) -> list[ChunkResult]:
        """On Ctrl-C: stop whatever runs; return what is known of the chunks that did not finish."""
        ...


class InlineExecutor:
    """One chunk at a time, in this process. A chunk interrupted by Ctrl-C still counts the
    seeds it finished."""

    jobs = 1

    def __init__(
        self,
        run: Callable[[ChunkSpec, Callable[[ChunkResult], None] | None], ChunkResult] = run_chunk,
    ) -> None:
        self._run = run
        self._queue: list[ChunkSpec] = []
        self._partial: ChunkResult | None = None

    def submit(self, spec: ChunkSpec) -> None:
        self._queue.append(spec)

    def next_done(self) -> ChunkResult:
        spec = self._queue.pop(0)
        self._partial = ChunkResult(spec=spec, seeds=0, events=0, violations=0)
        result = self._run(spec, self._keep)
        self._partial = None
        return result

    def _keep(self, partial: ChunkResult) -> None:
        self._partial = partial

    def abandon(self) -> list[ChunkResult]:
        partial, self._partial = self._partial, None
        self._queue.clear()
        return [partial] if partial is not None else []


class PoolExecutor:
    """``--jobs N``: chunks in N spawned worker processes, which ignore Ctrl-C (the parent
    stops them; the seeds of chunks that were running then are not counted)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_ignore_sigint)
        self._running: list[AsyncResult[ChunkResult]] = []

    def submit(self, spec: ChunkSpec) -> None:
        self._running.append(self._pool.apply_async(run_chunk, (spec,)))

    def next_done(self) -> ChunkResult:
        while True:
            for done in self._running:
                if done.ready():
                    self._running.remove(done)
                    return done.get()
            self._running[0].wait(0.05)

    def abandon(self) -> list[ChunkResult]:
        self._pool.terminate()
        self._running.clear()
        return []

    def close(self) -> None:
        self._pool.close()
        self._pool.join()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass(slots=True)
class ProtocolTotals:
    protocol: str
    chunks: list[tuple[int, int]] = field(default_factory=list)
    seeds: int = 0
    events: int = 0
    violations: int = 0
    seconds: float = 0.0

    def ranges(self) -> list[str]:
        """``base..last`` per chunk, in the order they ran; touching chunks merged."""
        merged: list[list[int]] = []
        for base, n in self.chunks:
            if merged and merged[-1][1] + 1 == base:
                merged[-1][1] = base + n - 1
            else:
                merged.append([base, base + n - 1])
        return [f"{a}..{b}" if a != b else str(a) for a, b in merged]


@dataclass(slots=True, kw_only=True)
class SoakSummary:
    plan: SoakPlan
    jobs: int = 1
    totals: dict[str, ProtocolTotals] = field(default_factory=dict)
    failures: list[SoakFailure] = field(default_factory=list)
    elapsed: float = 0.0
    interrupted: bool = False
    #: Chunks that were running at Ctrl-C and whose seeds are not counted (worker processes).
    not_counted: list[ChunkSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        for p in self.plan.protocols:
            self.totals.setdefault(p, ProtocolTotals(p))

    def add(self, result: ChunkResult, seconds: float = 0.0) -> None:
        t = self.totals.setdefault(result.spec.protocol, ProtocolTotals(result.spec.protocol))
        if result.seeds:
            t.chunks.append((result.spec.base, result.seeds))
        t.seeds += result.seeds
        t.events += result.events
        t.violations += result.violations
        t.seconds += seconds
        self.failures.extend(result.failures)

    @property
    def seeds(self) -> int:
        return sum(t.seeds for t in self.totals.values())

    @property
    def violations(self) -> int:
        return sum(t.violations for t in self.totals.values())

    def as_dict(self) -> dict[str, object]:
        plan = self.plan
        return {
            "soak": {
                "minutes": round(plan.seconds / 60, 3),
                "elapsed_seconds": round(self.elapsed, 1),
                "interrupted": self.interrupted,
                "protocols": list(plan.protocols),
                "faults": sorted(plan.faults),
                "chunk": plan.chunk,
                "jobs": self.jobs,
                "shrink": plan.shrink,
                "seed_base": plan.seed_base,
                "seed_base_given": plan.seed_base_given,
            },
            "protocols": [
                {
                    "protocol": t.protocol,
                    "chunks": [{"base": b, "seeds": n} for b, n in t.chunks],
                    "seed_ranges": t.ranges(),
                    "seeds": t.seeds,
                    "events": t.events,
                    "violations": t.violations,
                }
                for t in self.totals.values()
            ],
            "not_counted": [
                {"protocol": s.protocol, "base": s.base, "seeds": s.seeds} for s in self.not_counted
            ],
            "seeds": self.seeds,
            "violations": self.violations,
            "failures": [f.as_dict() for f in self.failures],
        }

    def report(self, width: int = 110) -> str:
        """The summary table, then every failure with its replay command."""
        plan = self.plan
        faults = ",".join(sorted(plan.faults)) or "none"
        how = "given" if plan.seed_base_given else "drawn at random"
        lines = [
            f"soak: {_clock(self.elapsed)} of {_clock(plan.seconds)}"
            + (" (interrupted)" if self.interrupted else "")
            + f"; faults {faults}; chunks of up to {plan.chunk} seeds; jobs {self.jobs}",
            f"chunk bases from --seed-base {plan.seed_base} ({how}; pass it to draw the same bases again)",
            "",
        ]
        head = ["protocol", "seeds", "events", "violations"]
        rows = [
            [t.protocol, f"{t.seeds:,}", f"{t.events:,}", f"{t.violations:,}"] for t in self.totals.values()
        ]
        events = sum(t.events for t in self.totals.values())
        rows.append(["total", f"{self.seeds:,}", f"{events:,}", f"{self.violations:,}"])
        ranges = [t.ranges() for t in self.totals.values()] + [[]]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

        def cells(row: list[str]) -> str:
            return "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )

        indent = sum(widths) + 2 * len(widths)
        lines.append(cells(head) + "  seed ranges")
        lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 11)
        for row, spans in zip(rows, ranges, strict=True):
            wrapped = _wrap(spans, max(width - indent, 24))
            lines.append(cells(row) + ("  " + wrapped[0] if wrapped else ""))
            lines += [" " * indent + w for w in wrapped[1:]]
        for spec in self.not_counted:
            lines.append(
                f"not counted (running at Ctrl-C): {spec.protocol} {spec.base}..{spec.last} "
                f"({spec.seeds} seeds)"
            )
        if self.failures:
            lines += ["", f"{len(self.failures)} failing seed{'s' if len(self.failures) != 1 else ''}:"]
            for f in self.failures:
                lines.append(f"{f.protocol} seed {f.seed}: {f.violation}")
                lines.append(f"  replay: {f.replay}")
                if f.steps:
                    lines.append(f"  minimal scenario ({len(f.steps)} steps):")
                    lines += [f"    {s}" for s in f.steps]
        elif not self.violations:
            lines += ["", "no violations"]
        return "\n".join(lines)


def progress_line(result: ChunkResult, summary: SoakSummary, elapsed: float, remaining: float) -> str:
    """The line printed (to stderr) after each chunk."""
    spec = result.spec
    per = ", ".join(f"{t.protocol} {t.seeds:,}" for t in summary.totals.values())
    seeds = f"{spec.base}..{spec.base + result.seeds - 1}" if result.seeds > 1 else str(spec.base)
    return (
        f"[soak {_clock(elapsed)} elapsed, {_clock(max(remaining, 0.0))} left] {spec.protocol} "
        f"{seeds}: {result.seeds} seed{'s' if result.seeds != 1 else ''}, {result.violations} "
        f"violations | seeds so far: {per} | violations {summary.violations}"
    )


def run_soak(
    plan: SoakPlan,
    *,
    now: Callable[[], float],
    executor: ChunkExecutor,
    seed_bases: Callable[[], int] | None = None,
    on_chunk: Callable[[ChunkResult, SoakSummary, float, float], None] | None = None,
    seed_seconds_guess: float = SEED_SECONDS_GUESS,
) -> SoakSummary:
    """Run chunks round-robin over ``plan.protocols`` until ``plan.seconds`` have passed on
    ``now``; Ctrl-C ends the soak early with what ran so far. ``seed_bases`` defaults to
    :class:`SeedBases` of ``plan.seed_base``."""
    bases = seed_bases if seed_bases is not None else SeedBases(plan.seed_base, plan.chunk)
    summary = SoakSummary(plan=plan, jobs=executor.jobs)
    start = now()
    deadline = start + plan.seconds
    running: dict[int, tuple[ChunkSpec, float]] = {}
    number = 0

    def seconds_per_seed(protocol: str) -> float:
        t = summary.totals[protocol]
        if t.seeds:
            return t.seconds / t.seeds
        # Not measured yet: the slowest rate seen, at least the guess (protocols differ).
        return max([seed_seconds_guess] + [u.seconds / u.seeds for u in summary.totals.values() if u.seeds])

    def next_spec() -> ChunkSpec | None:
        protocol = plan.protocols[number % len(plan.protocols)]
        left = deadline - now()
        rate = seconds_per_seed(protocol)
        n = min(plan.chunk, int(left / rate) if rate > 0 else plan.chunk)
        if left <= 0 or n < max(1, plan.chunk // 20):  # no tail of chunks of a seed or two
            return None
        return ChunkSpec(
            number=number,
            protocol=protocol,
            base=bases(),
            seeds=n,
            faults=plan.faults,
            shrink=plan.shrink,
        )

    try:
        while True:
            while len(running) < executor.jobs and (spec := next_spec()) is not None:
                executor.submit(spec)
                running[spec.number] = (spec, now())
                number += 1
            if not running:
                break
            result = executor.next_done()
            spec, started = running.pop(result.spec.number)
            summary.add(result, now() - started)
            if on_chunk is not None:
                t = now()
                on_chunk(result, summary, t - start, deadline - t)
    except KeyboardInterrupt:
        summary.interrupted = True
        for partial in executor.abandon():
            running.pop(partial.spec.number, None)
            summary.add(partial)
        summary.not_counted = [spec for spec, _ in running.values()]
    summary.elapsed = now() - start
    return summary


def _clock(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60}:{rest % 60:02}"


def _wrap(items: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            if lines:
                lines[-1] += ","
            lines.append(item)
    return lines
