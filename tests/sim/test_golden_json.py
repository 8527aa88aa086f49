"""The simulator's output for fixed seeds, frozen: every simulated event stays the same.

A structural change of ``streamtasks.sim`` or ``streamtasks.membership`` must not change what
is simulated. For each protocol a fixed range of seeds is run twice over:

* through ``streamtasks sim --json`` — the printed JSON must be byte-identical to the file
  under ``tests/sim/golden/``;
* world by world with an unbounded trace — the SHA-256 of each seed's complete event trace and
  its event count must match.

Regenerate (only when a change of behaviour is intended, and say so in the commit):
``python -m tests.sim.test_golden_json``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim import WorldSettings, classic_world, generate
from streamtasks.sim.__main__ import main as sim_main
from streamtasks.sim.kip848.runner import MIXED, consumer_scenario
from streamtasks.sim.kip848.side import SERVER, ConsumerSettings, consumer_world
from streamtasks.sim.scenario import RECORDED_FAULT_KINDS

GOLDEN = Path(__file__).parent / "golden"
PROTOCOLS = ("eager", "cooperative", "consumer", "consumer-client", "mixed")
SEED_BASE = 7
SEEDS = 30
UNBOUNDED = 10**9
#: The fault set the golden files were recorded with ("all" before the ``move`` fault existed).
FAULTS = frozenset(RECORDED_FAULT_KINDS)


def cli_json(protocol: str) -> str:
    """What ``streamtasks sim --protocol P --seeds N --seed-base B --json`` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        sim_main(
            [
                "--protocol",
                protocol,
                "--seeds",
                str(SEEDS),
                "--seed-base",
                str(SEED_BASE),
                "--faults",
                ",".join(sorted(FAULTS)),
                "--json",
                "--progress-every",
                str(10**6),
            ]
        )
    return out.getvalue()


def trace_digests(protocol: str) -> dict[str, dict[str, object]]:
    """Each seed's complete trace, hashed, with its event and trace-line counts."""
    lines_by_seed = {seed: _trace(protocol, seed) for seed in range(SEED_BASE, SEED_BASE + SEEDS)}
    return {
        str(seed): {
            "trace_lines": len(lines),
            "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
        }
        for seed, lines in lines_by_seed.items()
    }


def _trace(protocol: str, seed: int) -> list[str]:
    faults = FAULTS
    if protocol in ("eager", "cooperative"):
        world = classic_world(
            generate(seed, RebalanceProtocol[protocol.upper()], faults),
            WorldSettings(trace_limit=UNBOUNDED),
        )
        world.run()
        return world.trace.lines()
    cworld = consumer_world(
        consumer_scenario(seed, protocol, faults),
        SERVER if protocol == MIXED else protocol,
        ConsumerSettings(trace_limit=UNBOUNDED),
    )
    cworld.run()
    return cworld.trace.lines()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sim_json_is_byte_identical(protocol: str) -> None:
    expected = (GOLDEN / f"{protocol}.json").read_text()
    assert cli_json(protocol) == expected


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_seeds_trace_is_unchanged(protocol: str) -> None:
    expected = json.loads((GOLDEN / f"{protocol}.traces.json").read_text())
    assert trace_digests(protocol) == expected


def regenerate() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for protocol in PROTOCOLS:
        (GOLDEN / f"{protocol}.json").write_text(cli_json(protocol))
        (GOLDEN / f"{protocol}.traces.json").write_text(
            json.dumps(trace_digests(protocol), indent=2, sort_keys=True) + "\n"
        )


if __name__ == "__main__":
    regenerate()
