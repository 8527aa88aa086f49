"""Grids: validation (bad grids exit 2 naming the field), built-ins, expansion and chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.cli import main
from streamtasks.errors import ConfigError
from streamtasks.sweeps.grid import (
    BUILTIN_GRIDS,
    Point,
    chunks,
    load_grid,
    parse_point,
    points,
    with_chunk_size,
)

GOOD = """
protocols: [eager, cooperative, consumer-client]
assignors: [default, range]
members: [3, 5]
partitions: [12]
standbys: [0, 1]
faults: [none, "loss,failover"]
drills: [rolling_bounce, upgrade]
seeds: {start: 10, count: 5}
chunk_size: 2
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", sorted(BUILTIN_GRIDS))
def test_builtin_grids_are_valid(name: str) -> None:
    grid = load_grid(name)
    assert grid.name == name
    assert points(grid)


def test_expansion_skips_what_a_protocol_cannot_run(tmp_path: Path) -> None:
    grid = load_grid(str(_write(tmp_path, GOOD)))
    got = points(grid)
    assert {p.faults for p in got} == {"none", "failover+loss"}
    # range only under eager; standbys only client-side; upgrade only from eager
    assert {(p.protocol, p.assignor) for p in got} == {
        ("eager", "range"),
        ("cooperative", "cooperative_sticky"),
        ("consumer-client", "streams"),
    }
    assert all(p.standbys == 0 for p in got if p.protocol != "consumer-client")
    assert {p.drill for p in got if p.protocol != "eager"} == {"rolling_bounce"}
    assert len(got) == len(set(got))
    # eager: 2 sizes x 2 fault profiles x 2 drills; cooperative: 2 x 2 x 1; client: 2 x 2 x 2 standbys
    assert len(got) == 8 + 4 + 8


def test_upgrade_starts_from_an_assignor_other_than_cooperative_sticky(tmp_path: Path) -> None:
    # an eager group on cooperative_sticky already lists it beside range (the upgrade's first
    # bounce): an upgrade from there would list cooperative_sticky twice
    text = GOOD.replace("[default, range]", "[range, cooperative_sticky]").replace(
        "[eager, cooperative, consumer-client]", "[eager]"
    )
    got = {(p.assignor, p.drill) for p in points(load_grid(str(_write(tmp_path, text))))}
    assert got == {
        ("range", "rolling_bounce"),
        ("range", "upgrade"),
        ("cooperative_sticky", "rolling_bounce"),
    }


def test_chunks_cover_every_seed_once_per_point(tmp_path: Path) -> None:
    grid = load_grid(str(_write(tmp_path, GOOD)))
    cut = chunks(grid)
    for point in points(grid):
        seeds = [s for c in cut if c.point == point for s in c.seed_range]
        assert seeds == list(range(10, 15))
    assert {c.seeds for c in cut} == {2, 1}
    assert len({c.chunk_id for c in cut if c.point == cut[0].point}) == 3
    assert {c.seeds for c in chunks(with_chunk_size(grid, 5))} == {5}


def test_point_key_round_trips() -> None:
    point = Point(
        protocol="consumer-client",
        assignor="streams",
        members=7,
        partitions=21,
        standbys=1,
        faults="dup+loss",
        drill="crash",
    )
    assert parse_point(point.key) == point
    with pytest.raises(ConfigError, match="not a sweep point"):
        parse_point("protocol=eager/members=x")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("protocols: [eager, bogus]", "protocols.1"),
        ("members: [3, -2]", "members.1"),
        ("seeds: {start: 0, count: 0}", "seeds.count"),
        ("partitions: ['12']", "partitions.0"),
        ("faults: [loss, meteor]", "faults"),
        ("assignors: [roundrobin]", "assignors"),
        ("drills: [earthquake]", "drills.0"),
        ("colour: blue", "colour"),
    ],
)
def test_bad_grid_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, field: str
) -> None:
    key = change.split(":", maxsplit=1)[0]
    lines = [line for line in GOOD.strip().splitlines() if not line.startswith(f"{key}:")]
    path = _write(tmp_path, "\n".join([*lines, change]) + "\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("streamtasks: error: grid 'grid': ")
    assert f"{field}:" in err
    assert not (tmp_path / "out").exists()


def test_a_grid_with_nothing_runnable_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "protocols: [cooperative]\nassignors: [range]\nmembers: [2]\npartitions: [4]\nseeds: {count: 1}\n",
    )
    with pytest.raises(ConfigError, match="assignors: no protocol"):
        points(load_grid(str(path)))


def test_missing_grid_names_the_built_ins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "protocols, assignors, scale" in capsys.readouterr().err
