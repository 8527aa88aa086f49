from __future__ import annotations

import dataclasses
import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from assignors import RUNNING_LAG, AssignmentConfigs
from assignors.types import CONFIG_BOUNDS
from streamtasks.errors import ConfigError
from streamtasks.scenario import PROCESS_NAMESPACE, _Configs, load_scenario, parse_scenario
from topology import TaskId

SAMPLE = Path(__file__).parent.parent / "streamtasks" / "scenarios" / "sample.yaml"


def minimal(**overrides: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "application_id": "app",
        "partitions": {"in": 2},
        "topology": {"subtopologies": [{"sources": ["in"], "stores": ["s"]}]},
        "processes": [{"name": "a", "previous_active": ["0_0"], "lags": {"0_1": 7}}, {"name": "b"}],
    }
    doc.update(overrides)
    return doc


def test_sample_scenario_loads() -> None:
    scenario = load_scenario(SAMPLE)
    assert len(scenario.state.tasks) == 12
    assert sorted(scenario.names.values()) == ["alpha", "bravo", "charlie", "delta"]
    assert scenario.state.configs.num_standby_replicas == 1
    assert scenario.assignor == "high_availability"


def test_json_and_yaml_agree(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(minimal()))
    scenario = load_scenario(path)
    a = uuid.uuid5(PROCESS_NAMESPACE, "a")
    client = scenario.state.clients[a]
    assert client.lag_for(TaskId(0, 0)) == RUNNING_LAG  # previous active without a lag runs it
    assert client.lag_for(TaskId(0, 1)) == 7


def test_explicit_uuid_is_kept() -> None:
    pid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    doc = minimal(processes=[{"name": "x", "id": str(pid)}])
    assert list(parse_scenario(doc).state.clients) == [pid]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (minimal(processes=[]), "processes"),
        (minimal(partitions={"other": 2}), "no partition count for source topic 'in'"),
        (minimal(processes=[{"name": "a", "previous_active": ["9_9"]}]), "9_9"),
        (minimal(processes=[{"name": "a", "previous_active": ["zero"]}]), "not a task id"),
        (minimal(processes=[{"name": "a", "capacity": 0}]), r"processes\[0\]\.capacity: .* got 0"),
        (minimal(processes=[{"name": "a", "lags": {"0_0": -5}}]), r"processes\[0\]\.lags\.0_0: .* got -5"),
        (minimal(processes=[{"name": "a"}, {"name": "a"}]), "same id"),
        (minimal(configs={"num_standbys": 1}), "unknown assignment config"),
        (minimal(surprise=1), "surprise"),
    ],
)
def test_bad_scenarios_are_config_errors(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_scenario(doc)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("application_id: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(bad)


# -- every field is type-checked: strict ints (no bool, float or numeric string), Kafka's ranges --

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def with_value(path: tuple[str | int, ...], value: object) -> dict[str, object]:
    """A small valid scenario with the field at ``path`` set to ``value`` (containers created)."""
    topology: dict[str, object] = {"subtopologies": [{"sources": ["in"], "stores": [{"name": "s"}]}]}
    if path[:2] == ("topology", "repartition_topics"):
        topology = {
            "repartition_topics": [{"name": "r"}],
            "subtopologies": [
                {"sources": ["in"], "repartition_sinks": ["r"]},
                {"repartition_sources": ["r"]},
            ],
        }
    doc = minimal(topology=topology, processes=[{"name": "a"}, {"name": "b"}])
    node: Any = doc
    for key, nxt in itertools.pairwise(path):
        empty: Any = {} if isinstance(nxt, str) else []
        if isinstance(node, dict):
            node = node.setdefault(key, empty)
        else:
            if key == len(node):
                node.append(empty)
            node = node[key]
    if isinstance(node, list) and path[-1] == len(node):
        node.append(value)
    else:
        node[path[-1]] = value
    return doc


def _rows(
    path: tuple[str | int, ...], where: str, bad: list[tuple[object, str]]
) -> list[tuple[tuple[str | int, ...], object, str]]:
    return [(path, value, f"{where}: {problem}") for value, problem in bad]


NOT_AN_INT = [
    (True, "Input should be a valid integer, got true"),
    (False, "Input should be a valid integer, got false"),
    (1.7, "Input should be a valid integer, got 1.7"),
    (2.0, "Input should be a valid integer, got 2.0"),
    ("two", "Input should be a valid integer, got 'two'"),
    ("2", "Input should be a valid integer, got '2'"),
    (None, "Input should be a valid integer, got null"),
    ([1], "Input should be a valid integer, got a list"),
]


def _range(low: int, high: int) -> list[tuple[object, str]]:
    return [
        (low - 1, f"Input should be greater than or equal to {low}, got {low - 1}"),
        (high + 1, f"Input should be less than or equal to {high}, got {high + 1}"),
    ]


BAD_VALUES = [
    *_rows(("now_ms",), "now_ms", [*NOT_AN_INT, *_range(0, INT64_MAX)]),
    *_rows(("partitions", "in"), r"partitions\.in", [*NOT_AN_INT, *_range(1, INT32_MAX)]),
    *_rows(
        ("topology", "subtopologies", 0, "id"),
        r"topology\.subtopologies\[0\]\.id",
        [*[r for r in NOT_AN_INT if r[0] is not None], *_range(0, INT32_MAX)],
    ),
    *_rows(
        ("topology", "repartition_topics", 0, "partitions"),
        r"topology\.repartition_topics\[0\]\.partitions",
        [*[r for r in NOT_AN_INT if r[0] is not None], *_range(1, INT32_MAX)],
    ),
    *_rows(
        ("topology", "subtopologies", 0, "stores", 0, "logging"),
        r"topology\.subtopologies\[0\]\.stores\[0\]\.logging",
        [
            (v, f"Input should be a valid boolean, got {s}")
            for v, s in [("yes", "'yes'"), (1, "1"), (None, "null")]
        ],
    ),
    *_rows(
        ("topology", "subtopologies", 0, "stores", 0),
        r"topology\.subtopologies\[0\]\.stores\[0\]",
        [(3, "Input should be a mapping, got 3")],
    ),
    *_rows(("processes", 0, "capacity"), r"processes\[0\]\.capacity", [*NOT_AN_INT, *_range(1, INT32_MAX)]),
    *_rows(
        ("processes", 0, "lags", "0_1"),
        r"processes\[0\]\.lags\.0_1",
        [
            (v, f"Input should be an int from 0 to {INT64_MAX} or 'running', got {s}")
            for v, s in [
                (True, "true"),
                (1.5, "1.5"),
                ("7", "'7'"),
                ("runnin", "'runnin'"),
                (None, "null"),
                (-1, "-1"),
                (-2, "-2"),  # the RUNNING_LAG sentinel is spelled 'running' in a file
                (INT64_MAX + 1, str(INT64_MAX + 1)),
            ]
        ],
    ),
    *_rows(
        ("processes", 0, "previous_active"),
        r"processes\[0\]\.previous_active",
        [
            ("0_0", "Input should be a valid list, got '0_0'"),
            (None, "Input should be a valid list, got null"),
        ],
    ),
    *_rows(
        ("processes", 0, "previous_active", 0),
        r"processes\[0\]\.previous_active\[0\]",
        [(0, "Input should be a valid string, got 0")],
    ),
    *_rows(
        ("processes", 0, "previous_standby", 0),
        r"processes\[0\]\.previous_standby\[0\]",
        [(1.5, "Input should be a valid string, got 1.5")],
    ),
    *_rows(
        ("processes", 0, "client_tags", "zone"),
        r"processes\[0\]\.client_tags\.zone",
        [(1, "Input should be a valid string, got 1")],
    ),
    *_rows(
        ("processes", 0, "client_tags"),
        r"processes\[0\]\.client_tags",
        [(["zone"], "Input should be a valid dictionary, got a list")],
    ),
    *_rows(
        ("processes", 0, "id"),
        r"processes\[0\]\.id",
        [
            (5, "UUID input should be a string, bytes or UUID object, got 5"),
            ("nope", "Input should be a valid UUID"),
        ],
    ),
    *_rows(("processes", 0, "rack"), r"processes\[0\]\.rack", [(5, "Input should be a valid string, got 5")]),
    *_rows(
        ("processes", 0, "name"),
        r"processes\[0\]\.name",
        [(None, "Input should be a valid string, got null")],
    ),
    *_rows(("application_id",), "application_id", [(5, "Input should be a valid string, got 5")]),
    *_rows(("assignor",), "assignor", [(True, "Input should be a valid string, got true")]),
    *_rows(("processes",), "processes", [({"name": "a"}, "Input should be a valid list, got a mapping")]),
]

CONFIG_RANGES = {
    "num_standby_replicas": (0, INT32_MAX),
    "acceptable_recovery_lag": (0, INT64_MAX),
    "max_warmup_replicas": (1, INT32_MAX),
    "probing_rebalance_interval_ms": (60_000, INT64_MAX),
}
for _name, (_low, _high) in CONFIG_RANGES.items():
    BAD_VALUES += _rows(("configs", _name), rf"configs\.{_name}", [*NOT_AN_INT, *_range(_low, _high)])
BAD_VALUES += _rows(
    ("configs", "rack_aware_assignment_tags"),
    r"configs\.rack_aware_assignment_tags",
    [
        ("zone", "Input should be a valid tuple, got 'zone'"),
        (None, "Input should be a valid tuple, got null"),
    ],
)
BAD_VALUES += _rows(
    ("configs", "rack_aware_assignment_tags", 0),
    r"configs\.rack_aware_assignment_tags\[0\]",
    [(1, "Input should be a valid string, got 1")],
)


@pytest.mark.parametrize(
    ("path", "value", "message"), BAD_VALUES, ids=[f"{'.'.join(map(str, p))}={v!r}" for p, v, _ in BAD_VALUES]
)
def test_a_bad_value_is_a_config_error_that_names_the_field(
    path: tuple[str | int, ...], value: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^<scenario>: {message}") as info:
        parse_scenario(with_value(path, value))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        *[(("configs", name), low) for name, (low, _) in CONFIG_RANGES.items()],
        *[(("configs", name), high) for name, (_, high) in CONFIG_RANGES.items()],
        (("configs", "rack_aware_assignment_tags"), ["zone", "cluster"]),
        (("processes", 0, "capacity"), INT32_MAX),
        (("processes", 0, "lags", "0_1"), INT64_MAX),
        (("processes", 0, "lags", "0_1"), 0),
        (("processes", 0, "lags", "0_1"), "running"),
        (("now_ms",), INT64_MAX),
        (("topology", "subtopologies", 0, "id"), INT32_MAX),
        (("topology", "repartition_topics", 0, "partitions"), 3),
    ],
)
def test_values_at_the_edges_of_their_range_are_accepted(path: tuple[str | int, ...], value: object) -> None:
    parse_scenario(with_value(path, value))


def test_configs_reach_the_assignor_input_and_unset_ones_keep_their_defaults() -> None:
    configs = parse_scenario(
        minimal(configs={"num_standby_replicas": 2, "rack_aware_assignment_tags": ["zone"]})
    )
    assert configs.state.configs == AssignmentConfigs(
        num_standby_replicas=2, rack_aware_assignment_tags=("zone",)
    )


def test_the_scenario_knows_every_assignment_config() -> None:
    assert set(_Configs.model_fields) == {f.name for f in dataclasses.fields(AssignmentConfigs)}
    assert set(CONFIG_BOUNDS) == set(CONFIG_RANGES)
    for name, (low, high) in CONFIG_RANGES.items():
        assert CONFIG_BOUNDS[name] == (low, high)


def test_a_rule_only_the_pure_layer_knows_is_still_a_config_error() -> None:
    doc = minimal(configs={"rack_aware_assignment_tags": ["zone", "zone"]})
    with pytest.raises(
        ConfigError, match=r"^<scenario>: configs: rack_aware_assignment_tags lists a tag twice"
    ):
        parse_scenario(doc)


def test_many_problems_are_counted_not_all_listed() -> None:
    doc = minimal(partitions={f"t{i}": True for i in range(25)})
    with pytest.raises(ConfigError) as info:
        parse_scenario(doc)
    message = str(info.value)
    assert message.count("Input should be a valid integer") == 10
    assert message.endswith("and 15 more problems")


@pytest.mark.parametrize(
    ("yaml_text", "problem"),
    [
        ("configs: {num_standby_replicas: 1.7}", r"configs\.num_standby_replicas: .* got 1\.7"),
        ("configs: {num_standby_replicas: two}", r"configs\.num_standby_replicas: .* got 'two'"),
        ("configs: {num_standby_replicas: null}", r"configs\.num_standby_replicas: .* got null"),
        ("configs: {num_standby_replicas: true}", r"configs\.num_standby_replicas: .* got true"),
        ("partitions: {in: true}", r"partitions\.in: .* got true"),
    ],
)
def test_the_issue_12_examples_from_a_file(tmp_path: Path, yaml_text: str, problem: str) -> None:
    doc = minimal()
    key = yaml_text.split(":", maxsplit=1)[0]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in doc.items() if k != key}) + yaml_text + "\n")
    with pytest.raises(ConfigError, match=problem) as info:
        load_scenario(path)
    assert "not supported between" not in str(info.value)


@pytest.mark.parametrize(
    ("process", "message"),
    [
        ({"previous_active": ["0_0", "3_1"]}, "process 'a' reports previous tasks 3_1 that the topology"),
        ({"previous_standby": ["0_5"]}, "process 'a' reports previous tasks 0_5 that the topology"),
        ({"lags": {"0_1": 7, "2_0": 9, "0_9": 1}}, "process 'a' reports lags for tasks 0_9, 2_0 that the"),
    ],
)
def test_tasks_the_topology_does_not_have_are_named_with_the_process(
    process: dict[str, object], message: str
) -> None:
    doc = minimal(processes=[{"name": "a", **process}, {"name": "b"}])
    with pytest.raises(ConfigError, match=message) as info:
        parse_scenario(doc)
    assert "its tasks: 0_0..0_1" in str(info.value)
    assert str(uuid.uuid5(PROCESS_NAMESPACE, "a")) not in str(info.value)
