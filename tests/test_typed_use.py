"""``from streamtasks import App`` (and the other lazily loaded names) as mypy sees them: the
classes themselves, so a user's ``mypy --strict`` checks code written against them."""

from __future__ import annotations

from pathlib import Path

from mypy import api as mypy_api

ROOT = Path(__file__).parents[1]


def test_the_public_names_are_typed_for_mypy() -> None:
    out, err, status = mypy_api.run(
        ["--strict", "--follow-imports=silent", "--no-error-summary", str(ROOT / "tests" / "typed_use.py")]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert (status, errors, err) == (0, [], "")
