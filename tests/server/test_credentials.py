"""The credentials file: ``add-user`` writes salted SCRAM credentials (never the password, mode
0600), reading the password from stdin; the file reads back to the same credentials and logs
in with the right password only."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamtasks.errors import ConfigError
from streamtasks.protocol.sasl import scram_credential
from streamtasks.server.credentials import (
    add_user,
    dump_credentials,
    load_credentials,
    parse_credentials,
)
from streamtasks.server.sasl_server import SaslServer, SaslState

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"


def _plain_login(path: Path, user: str, password: str) -> bool:
    s = SaslServer(
        mechanisms=("PLAIN",), exchange_for=load_credentials(path).exchange_factory(lambda: "n0nce")
    )
    s.handshake(1, "PLAIN")
    s.authenticate(f"\0{user}\0{password}".encode(), 0)
    return s.state is SaslState.AUTHENTICATED


def test_round_trip_and_no_password_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    add_user(path, "alice", SecretStr(PASSWORD), iterations=4096)
    add_user(path, "bob", SecretStr("another one"), mechanisms=("SCRAM-SHA-256",))
    raw = path.read_bytes()
    for secret in (PASSWORD, "another one"):
        assert secret.encode() not in raw
        assert base64.b64encode(secret.encode()) not in raw
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = load_credentials(path)
    assert sorted(loaded.users) == ["alice", "bob"]
    assert sorted(loaded.users["alice"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    alice = loaded.users["alice"]["SCRAM-SHA-512"]
    assert alice.iterations == 4096
    assert len(alice.salt) == 32
    assert alice == scram_credential("SCRAM-SHA-512", PASSWORD, alice.salt, 4096)
    assert loaded.users["alice"]["SCRAM-SHA-256"].salt != alice.salt  # a salt per credential
    assert parse_credentials(dump_credentials(loaded)) == loaded
    assert _plain_login(path, "alice", PASSWORD)
    assert not _plain_login(path, "alice", PASSWORD + "!")
    assert _plain_login(path, "bob", "another one")


def test_add_user_replaces_a_password(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    add_user(path, "alice", SecretStr("old password"))
    add_user(path, "alice", SecretStr("new password"))
    assert _plain_login(path, "alice", "new password")
    assert not _plain_login(path, "alice", "old password")


@pytest.mark.parametrize(
    ("user", "password", "kwargs", "says"),
    [
        ("", "pw", {}, "user name"),
        ("a,b", "pw", {}, "user name"),
        ("alice", "", {}, "password is empty"),
        ("alice", "pw", {"iterations": 1000}, "at least 4096"),
        ("alice", "pw", {"mechanisms": ("PLAIN",)}, "mechanisms must be among"),
    ],
)
def test_add_user_refuses_bad_input(
    tmp_path: Path, user: str, password: str, kwargs: dict[str, object], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        add_user(tmp_path / "u.json", user, SecretStr(password), **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "u.json").exists()


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("nope", "not JSON"),
        (json.dumps({"version": 2, "users": {}}), "expected"),
        (json.dumps({"version": 1, "users": {"a": {"PLAIN": {}}}}), "mechanism must be one of"),
        (json.dumps({"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "!"}}}}), "needs base64"),
        (
            json.dumps(
                {
                    "version": 1,
                    "users": {
                        "a": {
                            "SCRAM-SHA-256": {
                                "salt": "YQ==",
                                "iterations": 10,
                                "stored_key": "",
                                "server_key": "",
                            }
                        }
                    },
                }
            ),
            "at least 4096",
        ),
    ],
)
def test_a_bad_file_is_one_config_error(doc: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_credentials(doc, source="users.json")


def _add_user(path: Path, stdin: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = ["coordinator", "add-user", "--credentials", str(path), *flags, "--password-stdin"]
    return subprocess.run(
        [sys.executable, "-m", "streamtasks", *command],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=60,
    )


def test_the_cli_reads_the_password_from_stdin_never_argv(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    result = _add_user(
        path, PASSWORD + "\n", "--user", "carol", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096"
    )
    assert result.returncode == 0, result.stderr
    assert "carol: SCRAM-SHA-512 credentials (4096 iterations)" in result.stdout
    assert PASSWORD not in result.stdout + result.stderr
    assert sorted(load_credentials(path).users["carol"]) == ["SCRAM-SHA-512"]
    assert _plain_login(path, "carol", PASSWORD)
    bad = _add_user(path, "pw\n", "--user", "dave", "--iterations", "10")
    assert bad.returncode != 0
    assert "at least 4096" in bad.stderr
    assert "Traceback" not in bad.stderr
