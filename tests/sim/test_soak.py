"""``python -m streamtasks.sim --soak``: the soak loop on an injected clock, seed source and
runner; failures replayed from their printed command; a real short soak; bad arguments."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from streamtasks.errors import ConfigError
from streamtasks.sim import runner
from streamtasks.sim.__main__ import main
from streamtasks.sim.kip848 import runner as kip848_runner
from streamtasks.sim.scenario import FAULT_KINDS
from streamtasks.sim.soak import (
    CLASSIC,
    PROTOCOLS,
    SEED_RANGE,
    ChunkResult,
    ChunkSpec,
    InlineExecutor,
    PoolExecutor,
    SeedBases,
    SoakFailure,
    SoakPlan,
    SoakSummary,
    parse_protocols,
    progress_line,
    run_chunk,
    run_soak,
)
from streamtasks.sim.trace import Violation

ALL_FAULTS = frozenset(FAULT_KINDS)
FAULTS_ARG = ",".join(sorted(FAULT_KINDS))
Runner = Callable[[ChunkSpec, Callable[[ChunkResult], None] | None], ChunkResult]


class FakeClock:
    def __init__(self) -> None:
        self.t = 5_000.0

    def __call__(self) -> float:
        return self.t


def bases(start: int = 10_000_000, step: int = 1_000_000) -> Callable[[], int]:
    """Far-apart bases, so no two chunks' ranges touch."""
    it: Iterator[int] = iter(range(start, 2**31, step))
    return lambda: next(it)


def fake_runner(
    clock: FakeClock, rates: dict[str, float], failing: frozenset[int] = frozenset()
) -> tuple[Runner, list[ChunkSpec]]:
    """Advances the clock by each seed's (fake) cost; seeds in ``failing`` violate."""
    calls: list[ChunkSpec] = []

    def run(spec: ChunkSpec, progress: Callable[[ChunkResult], None] | None) -> ChunkResult:
        calls.append(spec)
        clock.t += spec.seeds * rates[spec.protocol]
        failures = tuple(
            SoakFailure(
                protocol=spec.protocol,
                seed=seed,
                invariant="fake",
                time_ms=12,
                detail="boom",
                replay=f"python -m streamtasks.sim --protocol {spec.protocol} --seeds 1 --seed-base {seed}",
            )
            for seed in range(spec.base, spec.base + spec.seeds)
            if seed in failing
        )
        return ChunkResult(
            spec=spec, seeds=spec.seeds, events=10 * spec.seeds, violations=len(failures), failures=failures
        )

    return run, calls


def plan(
    protocols: tuple[str, ...], seconds: float = 60.0, *, chunk: int = 200, seed_base: int = 1
) -> SoakPlan:
    return SoakPlan(protocols=protocols, faults=ALL_FAULTS, seconds=seconds, seed_base=seed_base, chunk=chunk)


# -- protocols, seed bases ------------------------------------------------------------------


def test_all_is_five_protocols_and_both_is_eager_and_cooperative() -> None:
    assert (
        parse_protocols("all")
        == PROTOCOLS
        == ("eager", "cooperative", "consumer", "consumer-client", "mixed", "streams", "streams-client")
    )
    assert parse_protocols("both") == CLASSIC
    assert parse_protocols("mixed, eager,both") == ("mixed", "eager", "cooperative")
    with pytest.raises(ConfigError, match="unknown protocol 'bogus'"):
        parse_protocols("eager,bogus")
    with pytest.raises(ConfigError, match="no protocol"):
        parse_protocols(" , ")


def test_seed_bases_are_fresh_and_reproducible_from_the_seed_base() -> None:
    first = SeedBases(42)
    drawn = [first() for _ in range(50)]
    again = SeedBases(42)
    assert [again() for _ in range(50)] == drawn
    other = SeedBases(43)
    assert [other() for _ in range(50)] != drawn
    # Far above the seeds the tests and docs/simulation.md use, and a whole chunk fits below 2**31.
    assert all(SEED_RANGE[0] <= b < SEED_RANGE[1] - 200 for b in drawn)


# -- the loop, on an injected clock ---------------------------------------------------------


def test_chunks_interleave_protocols_and_the_time_limit_holds() -> None:
    clock = FakeClock()
    rates = {"eager": 0.05, "consumer": 0.1, "mixed": 0.12}
    run, calls = fake_runner(clock, rates)
    seen: list[str] = []
    summary = run_soak(
        plan(("eager", "consumer", "mixed"), seconds=120.0),
        now=clock,
        executor=InlineExecutor(run),
        seed_bases=bases(),
        on_chunk=lambda r, s, elapsed, left: seen.append(progress_line(r, s, elapsed, left)),
    )
    protocols = [c.protocol for c in calls]
    assert protocols == [("eager", "consumer", "mixed")[i % 3] for i in range(len(calls))]
    assert len(calls) >= 6
    assert all(t.seeds > 0 for t in summary.totals.values())
    # Never over the limit (each protocol's first chunk is sized at 0.15 s a seed, the measured
    # rate after), and it stops only when less than 10 seeds' time is left.
    assert 120.0 - 10 * 0.12 <= summary.elapsed <= 120.0
    assert summary.elapsed == clock.t - 5_000.0
    assert all(c.seeds <= 200 for c in calls)
    assert len(seen) == len(calls)
    assert "seeds so far: eager" in seen[-1]
    assert not summary.interrupted
    assert summary.seeds == sum(c.seeds for c in calls)


def test_summary_lists_every_chunk_s_seed_range() -> None:
    clock = FakeClock()
    run, calls = fake_runner(clock, {"eager": 0.1, "consumer-client": 0.1})
    summary = run_soak(
        plan(("eager", "consumer-client"), seconds=90.0),
        now=clock,
        executor=InlineExecutor(run),
        seed_bases=bases(),
    )
    report = summary.report()
    data = summary.as_dict()
    by_protocol = {p["protocol"]: p for p in data["protocols"]}  # type: ignore[attr-defined]
    for spec in calls:
        assert f"{spec.base}..{spec.last}" in report
        assert {"base": spec.base, "seeds": spec.seeds} in by_protocol[spec.protocol]["chunks"]
        assert f"{spec.base}..{spec.last}" in by_protocol[spec.protocol]["seed_ranges"]
    assert by_protocol["eager"]["seeds"] == sum(c.seeds for c in calls if c.protocol == "eager")
    assert "no violations" in report
    assert data["violations"] == 0


def test_touching_chunks_are_merged_in_the_ranges() -> None:
    summary = SoakSummary(plan=plan(("eager",)))
    spec = ChunkSpec(number=0, protocol="eager", base=100, seeds=10, faults=ALL_FAULTS)
    summary.add(ChunkResult(spec=spec, seeds=10, events=1, violations=0))
    summary.add(ChunkResult(spec=replace(spec, number=1, base=110), seeds=5, events=1, violations=0))
    summary.add(ChunkResult(spec=replace(spec, number=2, base=7), seeds=1, events=1, violations=0))
    assert summary.totals["eager"].ranges() == ["100..114", "7"]


def test_a_failing_seed_is_listed_with_its_replay_command() -> None:
    clock = FakeClock()
    run, _ = fake_runner(clock, {"eager": 0.1, "mixed": 0.1}, failing=frozenset({10_000_003, 11_000_005}))
    summary = run_soak(
        plan(("eager", "mixed"), seconds=40.0), now=clock, executor=InlineExecutor(run), seed_bases=bases()
    )
    assert summary.violations == 2
    report = summary.report()
    assert "eager seed 10000003: [fake] t=12ms: boom" in report
    assert "replay: python -m streamtasks.sim --protocol eager --seeds 1 --seed-base 10000003" in report
    assert "mixed seed 11000005" in report
    failures = summary.as_dict()["failures"]
    assert [f["seed"] for f in failures] == [10_000_003, 11_000_005]  # type: ignore[attr-defined]


def test_ctrl_c_ends_the_soak_and_keeps_the_seeds_that_finished() -> None:
    clock = FakeClock()
    run, _ = fake_runner(clock, {"eager": 0.1, "consumer": 0.1})

    def interrupted(spec: ChunkSpec, progress: Callable[[ChunkResult], None] | None) -> ChunkResult:
        if spec.number < 3:
            return run(spec, progress)
        assert progress is not None
        clock.t += 0.7
        progress(ChunkResult(spec=spec, seeds=7, events=70, violations=0))
        raise KeyboardInterrupt

    summary = run_soak(
        plan(("eager", "consumer"), seconds=600.0),
        now=clock,
        executor=InlineExecutor(interrupted),
        seed_bases=bases(),
    )
    assert summary.interrupted
    assert summary.totals["eager"].seeds == 200 + 200
    assert summary.totals["consumer"].seeds == 200 + 7
    assert summary.totals["consumer"].chunks[-1] == (13_000_000, 7)
    assert summary.not_counted == []
    assert "(interrupted)" in summary.report()
    assert summary.elapsed == pytest.approx(60.0 + 0.7)


def test_with_jobs_every_running_chunk_is_sized_to_the_time_left() -> None:
    """A fake executor with two workers: chunks run side by side, each ends by the deadline."""
    clock = FakeClock()

    class TwoWorkers:
        jobs = 2

        def __init__(self) -> None:
            self.running: list[tuple[float, ChunkSpec]] = []
            self.ran: list[tuple[ChunkSpec, float, float]] = []

        def submit(self, spec: ChunkSpec) -> None:
            self.running.append((clock.t + spec.seeds * 0.1, spec))

        def next_done(self) -> ChunkResult:
            self.running.sort(key=lambda r: r[0])
            finish, spec = self.running.pop(0)
            self.ran.append((spec, finish - spec.seeds * 0.1, finish))
            clock.t = max(clock.t, finish)
            return ChunkResult(spec=spec, seeds=spec.seeds, events=spec.seeds, violations=0)

        def abandon(self) -> list[ChunkResult]:
            return []

    executor = TwoWorkers()
    summary = run_soak(plan(CLASSIC, seconds=30.0), now=clock, executor=executor, seed_bases=bases())
    protocols = [spec.protocol for spec, _, _ in sorted(executor.ran, key=lambda r: r[0].number)]
    assert protocols == [CLASSIC[i % 2] for i in range(len(protocols))]
    started = [start for _, start, _ in executor.ran]
    assert started[:2] == [5_000.0, 5_000.0]  # both workers busy from the start
    assert all(finish <= 5_000.0 + 30.0 + 1e-9 for _, _, finish in executor.ran)
    assert summary.jobs == 2
    assert summary.seeds > 2 * 200


# -- the real runner -------------------------------------------------------------------------


@pytest.fixture
def failing_seeds(monkeypatch: pytest.MonkeyPatch) -> frozenset[int]:
    """These seeds violate, in the classic simulator (the scenario names an assignor that does
    not exist: ``no-exception``) and in the KIP-848 one (a violation added to the result)."""
    seeds = frozenset({30_000_002, 31_000_001})
    generate, run_consumer = runner.generate, kip848_runner.run_consumer_scenario

    def bad_generate(seed: int, *args: object, **kw: object) -> object:
        scenario = generate(seed, *args, **kw)  # type: ignore[arg-type]
        return replace(scenario, assignors=("no_such_assignor",)) if seed in seeds else scenario

    def bad_consumer(scenario: object, mode: str, settings: object = None) -> object:
        result = run_consumer(scenario, mode, settings)  # type: ignore[arg-type]
        if scenario.seed not in seeds:  # type: ignore[attr-defined]
            return result
        return replace(result, violations=(Violation(invariant="planted", time_ms=1, detail="x"),))

    monkeypatch.setattr(runner, "generate", bad_generate)
    monkeypatch.setattr(kip848_runner, "run_consumer_scenario", bad_consumer)
    return seeds


def test_the_printed_replay_command_reproduces_the_failure(
    failing_seeds: frozenset[int], capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()

    def timed(spec: ChunkSpec, progress: Callable[[ChunkResult], None] | None) -> ChunkResult:
        result = run_chunk(spec, progress)
        clock.t += 0.1 * result.seeds
        return result

    summary = run_soak(
        plan(("eager", "consumer"), seconds=0.8, chunk=4),
        now=clock,
        executor=InlineExecutor(timed),
        seed_bases=bases(30_000_000),
    )
    assert [(f.protocol, f.seed) for f in summary.failures] == [
        ("eager", 30_000_002),
        ("consumer", 31_000_001),
    ]
    assert summary.failures[0].invariant == "no-exception"
    assert summary.failures[0].steps == ()  # not shrunk unless asked
    for failure in summary.failures:
        assert failure.replay == (
            f"python -m streamtasks.sim --protocol {failure.protocol} --seeds 1 "
            f"--seed-base {failure.seed} --faults {FAULTS_ARG}"
        )
        argv = shlex.split(failure.replay)
        assert argv[:3] == ["python", "-m", "streamtasks.sim"]
        capsys.readouterr()
        assert main([*argv[3:], "--json", "--no-shrink"]) == 1
        (run,) = json.loads(capsys.readouterr().out)["runs"]
        assert [(f["seed"], f["invariant"]) for f in run["failures"]] == [(failure.seed, failure.invariant)]


def test_shrink_is_asked_for(failing_seeds: frozenset[int]) -> None:
    spec = ChunkSpec(number=0, protocol="cooperative", base=30_000_002, seeds=1, faults=ALL_FAULTS)
    assert run_chunk(spec).failures[0].steps == ()
    (shrunk,) = run_chunk(replace(spec, shrink=True)).failures
    assert shrunk.steps
    assert shrunk.replay.endswith(f"--seed-base 30000002 --faults {FAULTS_ARG}")


def test_a_real_short_soak_on_two_protocols(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--soak", "0.08", "--protocol", "cooperative,consumer-client", "--chunk", "10", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    assert data["violations"] == 0
    assert not data["soak"]["seed_base_given"]
    protocols = {p["protocol"]: p for p in data["protocols"]}
    assert set(protocols) == {"cooperative", "consumer-client"}
    for p in protocols.values():
        assert p["seeds"] > 0
        assert p["events"] > 0
        for chunk in p["chunks"]:
            assert SEED_RANGE[0] <= chunk["base"] < SEED_RANGE[1]
            assert f"{chunk['base']}..{chunk['base'] + chunk['seeds'] - 1}" in p["seed_ranges"] or (
                chunk["seeds"] == 1
            )
    assert data["soak"]["elapsed_seconds"] < 4.8 + 10  # the limit, and a slack for a loaded machine
    assert "[soak " in err
    assert "seeds so far: cooperative" in err


def test_the_seed_base_gives_a_soak_the_same_bases() -> None:
    expected = SeedBases(77, 1)
    clock = FakeClock()
    run, calls = fake_runner(clock, {"eager": 0.1, "consumer": 0.1})
    run_soak(
        plan(("eager", "consumer"), seconds=1.0, chunk=1, seed_base=77),
        now=clock,
        executor=InlineExecutor(run),
    )
    assert len(calls) >= 4
    assert [c.base for c in calls] == [expected() for _ in calls]


def test_a_pool_of_two_workers_runs_chunks() -> None:
    pool = PoolExecutor(2)
    try:
        pool.submit(ChunkSpec(number=0, protocol="eager", base=2_000_000, seeds=2, faults=ALL_FAULTS))
        pool.submit(ChunkSpec(number=1, protocol="mixed", base=3_000_000, seeds=2, faults=ALL_FAULTS))
        done = sorted((pool.next_done() for _ in range(2)), key=lambda r: r.spec.number)
    finally:
        pool.close()
    assert [(r.spec.protocol, r.seeds, r.violations) for r in done] == [("eager", 2, 0), ("mixed", 2, 0)]
    assert all(r.events > 0 for r in done)


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--soak", "0"], "--soak must be a positive number of minutes"),
        (["--soak", "-1"], "--soak must be a positive number of minutes"),
        (["--soak", "nan"], "--soak must be a positive number of minutes"),
        (["--soak", "1", "--protocol", "eager,bogus"], "unknown protocol 'bogus'"),
        (["--soak", "1", "--chunk", "0"], "--chunk must be >= 1"),
        (["--soak", "1", "--jobs", "0"], "--jobs must be >= 1"),
        (["--soak", "1", "--faults", "meteor"], "unknown fault"),
        (["--soak", "1", "--seeds", "5"], "--seeds does not apply to --soak"),
        (["--soak", "1", "--same-assignor"], "--same-assignor does not apply to --soak"),
        (["--soak", "1", "--shrink", "--no-shrink"], "contradict"),
        (["--shrink"], "--shrink applies to --soak only"),
        (["--jobs", "2"], "--jobs applies to --soak only"),
        (["--protocol", "all"], "need --soak"),
        (["--protocol", "eager,cooperative"], "need --soak"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_soak_that_is_not_a_number_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--soak", "ten"])
    assert exc.value.code == 2
    assert "--soak: invalid float value" in capsys.readouterr().err
