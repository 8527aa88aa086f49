"""Many instances of a slotted dataclass at once, for the hot paths that make 100,000 of them
(partitions an assignor hands out, the subscriptions and owned partitions a leader decodes)."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import TypeVar

__all__ = ["bulk", "slot_setters"]

T = TypeVar("T")


def slot_setters(cls: type) -> Mapping[str, Callable[[object, object], None]] | None:
    """Field name -> the setter of its slot, if ``cls`` is a slotted dataclass whose instances
    are nothing but their fields (no ``__post_init__``, no ``__new__`` of its own, every slot a
    field): then an instance made by ``object.__new__`` with every slot set is the one its
    constructor makes. None otherwise. (A frozen dataclass's own ``__init__`` sets each field
    through ``object.__setattr__``: a call per field, the most of what making one costs.)"""
    if not dataclasses.is_dataclass(cls):
        return None
    names = tuple(field.name for field in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        return None
    if cls.__new__ is not object.__new__:
        return None
    return {name: cls.__dict__[name].__set__ for name in names}


def bulk(cls: type[T], count: int, columns: Mapping[str, Sequence[object]]) -> list[T]:
    """``count`` instances of ``cls``, instance ``i`` with field ``name`` set to
    ``columns[name][i]``; ``columns`` names every field. Made with C-level passes, one per
    field (:func:`slot_setters`), or through the constructor if ``cls`` is not that plain."""
    setters = slot_setters(cls)
    if setters is None or setters.keys() != columns.keys():
        rows = zip(*columns.values(), strict=True)
        return [cls(**dict(zip(columns, row, strict=True))) for row in rows]
    made: list[T] = list(map(object.__new__, repeat(cls, count)))
    for name, values in columns.items():
        deque(map(setters[name], made, values), maxlen=0)
    return made
