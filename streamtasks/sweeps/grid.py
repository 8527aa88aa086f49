"""Sweep grids: a YAML file (or a built-in name) validated with pydantic, expanded to points and
chunks of seeds.

A grid lists values per dimension; its points are the cross product, less the pairs a protocol
cannot run (an assignor it does not use, standbys outside ``consumer-client``, the KIP-429
upgrade outside ``eager`` or from ``cooperative_sticky`` itself). Every point runs the same
seeds; a chunk is one point and a run of consecutive seeds, the unit Spark schedules and the
sweep writes (and skips on resume).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from streamtasks.errors import ConfigError
from streamtasks.sim.scenario import parse_faults

__all__ = [
    "ASSIGNORS_BY_PROTOCOL",
    "BUILTIN_GRIDS",
    "DIMENSIONS",
    "Chunk",
    "Grid",
    "Point",
    "Seeds",
    "chunks",
    "load_grid",
    "parse_grid",
    "parse_point",
    "points",
    "with_chunk_size",
]

Protocol = Literal["eager", "cooperative", "consumer", "consumer-client", "streams", "streams-client"]
Drill = Literal["rolling_bounce", "scale_out", "crash", "upgrade"]

#: The assignors each protocol runs; ``default`` is the first.
ASSIGNORS_BY_PROTOCOL: dict[str, tuple[str, ...]] = {
    "eager": ("range", "round_robin", "sticky", "cooperative_sticky"),
    "cooperative": ("cooperative_sticky",),
    "consumer": ("uniform",),
    "consumer-client": ("streams",),
    # streams groups (KIP-1071): the coordinator's task assignor (streamtasks.sim.streams.MODES)
    "streams": ("sticky",),
    "streams-client": ("high_availability",),
}
#: The protocols whose points may have standby replicas.
WITH_STANDBYS = frozenset({"consumer-client", "streams", "streams-client"})
KNOWN_ASSIGNORS = frozenset(a for names in ASSIGNORS_BY_PROTOCOL.values() for a in names) | {"default"}
#: The grid's dimensions, in the order of the Parquet directories (``protocol=…/assignor=…/…``).
DIMENSIONS = ("protocol", "assignor", "members", "partitions", "standbys", "faults", "drill")

Positive = Annotated[int, Field(ge=1)]
NonNegative = Annotated[int, Field(ge=0)]


class Seeds(BaseModel):
    """``count`` consecutive seeds from ``start``."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    start: NonNegative = 0
    count: Positive


class Grid(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    name: str = "grid"
    protocols: tuple[Protocol, ...] = Field(min_length=1)
    assignors: tuple[str, ...] = Field(default=("default",), min_length=1)
    members: tuple[Positive, ...] = Field(min_length=1)
    partitions: tuple[Positive, ...] = Field(min_length=1)
    standbys: tuple[NonNegative, ...] = Field(default=(0,), min_length=1)
    faults: tuple[str, ...] = Field(default=("none",), min_length=1)
    drills: tuple[Drill, ...] = Field(default=("rolling_bounce",), min_length=1)
    seeds: Seeds
    #: Seeds per chunk (the unit of work and of resume).
    chunk_size: Positive = 10

    @field_validator("assignors")
    @classmethod
    def _known_assignors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - KNOWN_ASSIGNORS)
        if unknown:
            raise ValueError(f"unknown assignors {unknown}; choose from {sorted(KNOWN_ASSIGNORS)}")
        return value

    @field_validator("faults")
    @classmethod
    def _fault_profiles(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(fault_label(parse_faults(text.replace("+", ","))) for text in value)


def fault_label(kinds: frozenset[str]) -> str:
    """``none``, or the kinds joined by ``+`` (a directory name)."""
    return "+".join(sorted(kinds)) or "none"


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Point:
    """One combination of the grid's dimensions."""

    protocol: str
    assignor: str
    members: int
    partitions: int
    standbys: int
    faults: str
    drill: str

    @property
    def key(self) -> str:
        """``protocol=eager/assignor=range/…``: the Parquet directory of its rows, and what
        ``streamtasks sweep replay`` takes."""
        return "/".join(f"{d}={getattr(self, d)}" for d in DIMENSIONS)

    def fault_kinds(self) -> frozenset[str]:
        return frozenset() if self.faults == "none" else frozenset(self.faults.split("+"))


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Chunk:
    point: Point
    first_seed: int
    seeds: int

    @property
    def seed_range(self) -> range:
        return range(self.first_seed, self.first_seed + self.seeds)

    @property
    def chunk_id(self) -> str:
        return f"seeds-{self.first_seed:07d}-{self.first_seed + self.seeds - 1:07d}"


def _runnable(protocol: str, assignor: str, standbys: int, drill: str) -> bool:
    if assignor not in ASSIGNORS_BY_PROTOCOL[protocol]:
        return False
    if standbys and protocol not in WITH_STANDBYS:
        return False
    # KIP-429's upgrade moves an eager group onto cooperative_sticky: it starts from another
    # assignor (an eager group on cooperative_sticky already lists it with range, the upgrade's
    # first bounce).
    return drill != "upgrade" or (protocol == "eager" and assignor != "cooperative_sticky")


def points(grid: Grid) -> tuple[Point, ...]:
    """The grid's runnable points, sorted; an empty expansion is a :class:`ConfigError`."""
    out = set()
    for protocol in grid.protocols:
        for name in grid.assignors:
            assignor = ASSIGNORS_BY_PROTOCOL[protocol][0] if name == "default" else name
            for members in grid.members:
                for partitions in grid.partitions:
                    for standbys in grid.standbys:
                        for faults in grid.faults:
                            for drill in grid.drills:
                                if _runnable(protocol, assignor, standbys, drill):
                                    out.add(
                                        Point(
                                            protocol=protocol,
                                            assignor=assignor,
                                            members=members,
                                            partitions=partitions,
                                            standbys=standbys,
                                            faults=faults,
                                            drill=drill,
                                        )
                                    )
    if not out:
        raise ConfigError(
            f"grid {grid.name!r}: assignors: no protocol of {list(grid.protocols)} runs "
            f"{list(grid.assignors)} with standbys {list(grid.standbys)} and drills {list(grid.drills)} "
            f"(assignors per protocol: {ASSIGNORS_BY_PROTOCOL}; standbys only with {sorted(WITH_STANDBYS)}; "
            "upgrade only from eager, from an assignor other than cooperative_sticky)"
        )
    return tuple(sorted(out))


def chunks(grid: Grid) -> tuple[Chunk, ...]:
    """Every point's seeds cut in runs of ``chunk_size``."""
    start, end = grid.seeds.start, grid.seeds.start + grid.seeds.count
    return tuple(
        Chunk(point=p, first_seed=s, seeds=min(grid.chunk_size, end - s))
        for p in points(grid)
        for s in range(start, end, grid.chunk_size)
    )


def parse_point(key: str) -> Point:
    """The inverse of :attr:`Point.key`."""
    try:
        fields = dict(part.split("=", 1) for part in key.strip("/").split("/"))
        return Point(
            protocol=fields["protocol"],
            assignor=fields["assignor"],
            members=int(fields["members"]),
            partitions=int(fields["partitions"]),
            standbys=int(fields["standbys"]),
            faults=fields["faults"],
            drill=fields["drill"],
        )
    except (KeyError, ValueError) as exc:
        raise ConfigError(
            f"not a sweep point {key!r} (expected {'/'.join(f'{d}=…' for d in DIMENSIONS)})"
        ) from exc


def parse_grid(data: object, name: str) -> Grid:
    if not isinstance(data, dict):
        raise ConfigError(f"grid {name!r}: expected a mapping of dimensions, got {type(data).__name__}")
    data = {"name": name, **data}
    try:
        # JSON mode: strict types (no "3" for 3) while YAML's lists stand for tuples
        return Grid.model_validate_json(json.dumps(data))
    except ValidationError as exc:
        errors = exc.errors()
        # a bad item also fails the field's min_length (the item was dropped): name the item only
        itemised = {e["loc"][0] for e in errors if len(e["loc"]) > 1}
        errors = [e for e in errors if not (e["type"] == "too_short" and e["loc"][0] in itemised)]
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'grid'}: {error['msg']}"
            + (f" (got {error['input']!r})" if not isinstance(error["input"], dict | list) else "")
            for error in errors
        )
        raise ConfigError(f"grid {name!r}: {problems}") from None


#: Named grids: ``streamtasks sweep protocols --out DIR``.
BUILTIN_GRIDS: dict[str, dict[str, object]] = {
    # every protocol on the same drills and group sizes
    "protocols": {
        "protocols": ["eager", "cooperative", "consumer", "consumer-client"],
        "members": [3, 6, 12],
        "partitions": [24],
        "drills": ["rolling_bounce", "scale_out", "crash"],
        "seeds": {"start": 0, "count": 8},
        "chunk_size": 4,
    },
    # the classic assignors (and each KIP-848 protocol's) on one drill
    "assignors": {
        "protocols": ["eager", "cooperative", "consumer", "consumer-client"],
        "assignors": ["range", "round_robin", "sticky", "cooperative_sticky", "uniform", "streams"],
        "members": [4, 8, 16],
        "partitions": [32],
        "drills": ["rolling_bounce", "scale_out"],
        "seeds": {"start": 0, "count": 6},
        "chunk_size": 3,
    },
    # cost against group size: rolling bounces of growing groups
    "scale": {
        "protocols": ["eager", "cooperative", "consumer", "consumer-client"],
        "members": [4, 16, 64],
        "partitions": [256],
        "drills": ["rolling_bounce"],
        "seeds": {"start": 0, "count": 2},
        "chunk_size": 1,
    },
}


def load_grid(spec: str) -> Grid:
    """A built-in grid's name, or a YAML file's path."""
    if spec in BUILTIN_GRIDS:
        return parse_grid(BUILTIN_GRIDS[spec], spec)
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"grid {spec!r}: neither a built-in grid ({', '.join(BUILTIN_GRIDS)}) nor a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"grid {spec!r}: not valid YAML: {exc}") from None
    return parse_grid(data, path.stem)


def with_chunk_size(grid: Grid, chunk_size: int) -> Grid:
    """The grid with another chunk size (``--chunk-size``), validated as the grid's own field."""
    data = grid.model_dump(mode="json")
    name = data.pop("name")
    data["chunk_size"] = chunk_size
    return parse_grid(data, str(name))
