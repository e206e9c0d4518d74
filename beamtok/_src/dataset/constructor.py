"""``constructor``: a classmethod made from a function written in another module, typed so the
class it is bound to is what it makes (``Dataset.from_files(...)`` is a ``Dataset`` to a type
checker, as it is at run time)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

__all__ = ["constructor"]

P = ParamSpec("P")
T = TypeVar("T")


class constructor(Generic[P]):  # lower case: it stands where ``classmethod`` would
    """A classmethod of ``make``, whose first parameter takes the class it is called on.

    ``classmethod(make)`` works the same at run time, but a type checker cannot tell what it
    returns when ``make`` is generic in that class; this says it: the class bound to.

    Args:
        make: A function ``(cls, ...) -> an instance of cls``.
    """

    def __init__(self, make: Callable[Concatenate[Any, P], Any]) -> None:
        self.__func__ = make
        self.__doc__ = make.__doc__
        self.__name__ = make.__name__

    def __get__(self, instance: object, owner: type[T]) -> Callable[P, T]:
        return cast("Callable[P, T]", types.MethodType(self.__func__, owner))
