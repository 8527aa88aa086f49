"""``--client-config FILE`` / ``$STREAMTASKS_CLIENT_CONFIG`` on the commands that dial a broker:
a bad file or setting exits 2 with one line naming the key, never the secret, before any broker
is started or dialled."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.cli import main

SECRET = "s3cret-Pa55word"
BAD_FILES = {
    # file body -> what the one line must name
    f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-999\nsasl.username=a\nsasl.password={SECRET}\n": (
        "sasl.mechanism"
    ),
    f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.password={SECRET}\n": "sasl_plain_username",
    f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password={SECRET}\n"
    "ssl.ca.location=/nonexistent/ca.pem\n": "ssl_cafile",
    f"sasl.password={SECRET}\nsasl.pasword=typo\n": "sasl.pasword",
}
COMMANDS = {
    "demo": ["demo", "--bootstrap-servers", "127.0.0.1:1"],
    "drill run": ["drill", "run", "eager-to-cooperative", "--bootstrap-servers", "127.0.0.1:1"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("body", "key"), list(BAD_FILES.items()), ids=[v for v in BAD_FILES.values()])
def test_a_bad_client_config_is_one_line_naming_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, body: str, key: str
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(body)
    code = main([*COMMANDS[command], "--client-config", str(config)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("streamtasks: error: ")
    assert key in err
    assert str(config) in err
    assert SECRET not in err


def test_the_environment_variable_is_read_and_a_missing_file_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nowhere.yaml"
    monkeypatch.setenv("STREAMTASKS_CLIENT_CONFIG", str(missing))
    code = main(COMMANDS["drill run"])
    _, err = capsys.readouterr()
    assert code == 2
    assert str(missing) in err
    assert err.count("\n") == 1


def test_secure_takes_no_client_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "client.yaml"
    config.write_text("security_protocol: PLAINTEXT\n")
    code = main(["demo", "--secure", "--client-config", str(config)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "--secure" in err


def test_secured_cluster_refuses_a_coordinator_in_front(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password={SECRET}\n"
    )
    code = main([*COMMANDS["demo"], "--protocol", "consumer-client", "--client-config", str(config)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "coordinator" in err
    assert SECRET not in err
