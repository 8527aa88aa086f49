"""A member's read-only view, one line a value: :class:`ReadOnly`.

A machine shows what its records hold (its epoch, what it owns, whether the coordinator is
known) without letting anyone assign it: ``member_epoch = ReadOnly[int]("_membership.epoch",
"The epoch ...")`` is the property that reads ``self._membership.epoch``.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Generic, TypeVar, cast, overload

__all__ = ["ReadOnly"]

T = TypeVar("T")


class ReadOnly(Generic[T]):
    """A read-only property reading ``path`` (dotted attribute names) from the instance; the
    members have ``__slots__``, so assigning the name raises ``AttributeError``. (No
    ``__slots__`` here: each instance carries its own ``__doc__``, which ``help()`` shows.)"""

    def __init__(self, path: str, doc: str = "") -> None:
        self.path = path
        self._get = attrgetter(path)
        self.__doc__ = doc or f"``{path}``"

    @overload
    def __get__(self, obj: None, owner: type) -> ReadOnly[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object, owner: type) -> ReadOnly[T] | T:
        if obj is None:
            return self
        return cast(T, self._get(obj))
