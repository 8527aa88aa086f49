"""Every command of ``streamtasks``: help on every flag with its default, and ``--log-level``."""

from __future__ import annotations

import argparse
import logging

import pytest

from streamtasks import cli
from streamtasks.cli import build_parser, main


def _commands(
    parser: argparse.ArgumentParser, name: str = "streamtasks"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += _commands(sub, f"{name} {sub_name}")
    return found


COMMANDS = _commands(build_parser())
OPTIONS = [
    (f"{name} {action.option_strings[-1]}", parser, action)
    for name, parser in COMMANDS
    for action in parser._actions
    if action.option_strings and not isinstance(action, argparse._HelpAction | argparse._VersionAction)
]


def test_the_walk_finds_every_command() -> None:
    names = {name for name, _ in COMMANDS}
    assert {
        "streamtasks assign",
        "streamtasks sim",
        "streamtasks sweep",
        "streamtasks drill run",
        "streamtasks coordinator add-user",
    } <= names
    assert len(OPTIONS) > 60


@pytest.mark.parametrize(("name", "parser", "action"), OPTIONS, ids=[o[0] for o in OPTIONS])
def test_every_option_has_help_that_gives_its_default(
    name: str, parser: argparse.ArgumentParser, action: argparse.Action
) -> None:
    assert action.help, f"{name} has no help"
    assert action.help != argparse.SUPPRESS, f"{name} hides its help"
    shown = parser._get_formatter()._expand_help(action)
    takes_a_value = action.nargs != 0
    if takes_a_value and not action.required:
        assert "default" in shown, f"{name}: {shown!r} does not say what happens without it"


@pytest.mark.parametrize(("name", "parser"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_takes_log_level(name: str, parser: argparse.ArgumentParser) -> None:
    assert "--log-level" in parser._option_string_actions, name
    assert "--log-level LEVEL" in parser.format_help()


def test_a_value_default_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["drill", "run", "--help"])
    out = capsys.readouterr().out
    assert "(default: 200)" in out  # --rate
    assert "(default: WARNING)" in out  # --log-level


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["assignors"], logging.WARNING),
        (["--log-level", "debug", "assignors"], logging.DEBUG),
        (["assignors", "--log-level", "INFO"], logging.INFO),
        (["--log-level", "ERROR", "assignors", "--log-level", "info"], logging.INFO),
    ],
)
def test_log_level_is_applied_before_the_command_runs(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], level: int
) -> None:
    seen: list[int] = []

    def command(args: argparse.Namespace) -> int:
        seen.append(logging.getLogger("streamtasks.anything").getEffectiveLevel())
        return 0

    monkeypatch.setattr(cli, "_cmd_assignors", command)
    before = logging.getLogger("streamtasks").level
    assert main(argv) == 0
    assert seen == [level]
    assert logging.getLogger("streamtasks").level == before  # restored for whoever called main()


def test_an_unknown_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--log-level", "loud", "assignors"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'LOUD'" in capsys.readouterr().err
