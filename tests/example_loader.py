"""Load an example script (``examples/<name>/<name>.py``, not a package) as a module for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["ROOT", "load_example"]

ROOT = Path(__file__).resolve().parents[1]


def load_example(relative_path: str, module_name: str) -> ModuleType:
    """The script at ``ROOT / relative_path``, imported as ``module_name`` (kept in sys.modules,
    which dataclasses defined in it need)."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / relative_path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
