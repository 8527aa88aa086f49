"""Importing the project from a script in benchmarks/.

``python benchmarks/X.py`` puts benchmarks/ first on ``sys.path``, where ``assignors.py`` (the
issue's name for the assignor benchmark) would shadow the ``assignors`` package and
``codecs.py`` the standard library's ``codecs``. Import the project inside
:func:`project_imports` to see the real packages.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent


@contextmanager
def project_imports() -> Iterator[None]:
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    try:
        yield
    finally:
        sys.path[:] = saved
