"""``streamtasks groups`` failures through the command: one line on stderr, status 2, no
traceback (the live cases, a group that does not exist, are in tests/integration/test_groups.py)."""

from __future__ import annotations

import pytest

from streamtasks.cli import main
from streamtasks.groups import command
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.security import ClientSettings


@pytest.mark.parametrize("args", [["list"], ["describe", "some-group", "--members"]])
def test_an_unreachable_cluster_is_one_line_and_status_2(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["groups", *args, "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("streamtasks: error: ")
    assert "127.0.0.1:1" in err


def test_bad_member_bytes_are_one_line_and_status_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The decoding runs on what the broker answered; here that answer is made up."""

    async def answer(
        settings: ClientSettings, group_id: str, *, timeout_s: float
    ) -> cg.DescribeGroupResponse:
        member = cg.DescribedMember(member_id="m-1", assignment=b"\x00\x03\x00\x00\x00\x09")
        return cg.DescribeGroupResponse(
            error=KafkaErrorCode.NONE, group_state="Stable", protocol_type="consumer",
            protocol_name="streamtasks",
            members=(member,),
        )  # fmt: skip

    monkeypatch.setattr(command, "describe_group", answer)
    code = main(["groups", "describe", "app", "--bootstrap-servers", "127.0.0.1:1"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert "group 'app', member 'm-1': bad assignment" in err


def test_the_bootstrap_servers_are_required(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("STREAMTASKS_BOOTSTRAP", raising=False)
    monkeypatch.delenv("STREAMTASKS_CLIENT_CONFIG", raising=False)
    assert main(["groups", "list"]) == 2
    assert "no bootstrap servers" in capsys.readouterr().err
