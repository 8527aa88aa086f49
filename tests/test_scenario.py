from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from assignors import RUNNING_LAG
from streamtasks.errors import ConfigError
from streamtasks.scenario import PROCESS_NAMESPACE, load_scenario, parse_scenario
from topology import TaskId

SAMPLE = Path(__file__).parent.parent / "examples" / "scenarios" / "sample.yaml"


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
        (minimal(processes=[{"name": "a", "capacity": 0}]), "capacity 0"),
        (minimal(processes=[{"name": "a", "lags": {"0_0": -5}}]), "lag -5"),
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
