"""Checks of the arguments of constructors and other public functions, shared by every layer and model.

Each check returns the value it accepts (normalized: a NumPy integer becomes an int) and otherwise raises
``TypeError`` for a value of the wrong type or ``ValueError`` for one out of range, with a message naming the
argument, the value and what is allowed. Sizes follow PyTorch: an ``int`` (NumPy integers too), never a float
such as ``8.0``; unlike PyTorch, a ``bool`` is refused where a number is expected.

Every layer and model checks all its arguments before it draws its first random number, so that a refused
argument leaves the default generator (``init``) where it was.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Iterable

import numpy as np

from ..errors import DTypeError
from .module import Module


def integer(name: str, value, minimum: int = 1, maximum: int | None = None) -> int:
    """An int in [minimum, maximum] (no upper bound when ``maximum`` is None); sizes are >= 1, the default."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum or (maximum is not None and value > maximum):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an int {allowed}, got {value}")
    return int(value)


def sizes(**values) -> tuple[int, ...]:
    """Several sizes (ints >= 1) checked at once, in the order given: ``d, h = sizes(d_model=d, heads=h)``."""
    return tuple(integer(name, value) for name, value in values.items())


def _number(name: str, value, accepts: Callable[[float], bool], allowed: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not accepts(float(value)):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return float(value)


def positive(name: str, value) -> float:
    """A finite number > 0: an epsilon, a scale."""
    return _number(name, value, lambda x: 0 < x < math.inf, "a finite number > 0")


def non_negative(name: str, value) -> float:
    """A finite number >= 0: a weight, a standard deviation, a temperature."""
    return _number(name, value, lambda x: 0 <= x < math.inf, "a finite number >= 0")


def probability(name: str, value, certain: bool = False) -> float:
    """A probability in [0, 1): a dropout rate (1 would drop everything), a momentum; in [0, 1] when
    ``certain`` events are allowed."""
    if certain:
        return _number(name, value, lambda x: 0 <= x <= 1, "a probability in [0, 1]")
    return _number(name, value, lambda x: 0 <= x < 1, "a probability in [0, 1)")


def flag(name: str, value) -> bool:
    """True or False (a NumPy bool too): not a string or a number, which would always read as true or false."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def one_of(name: str, value, choices: Iterable[str]) -> str:
    """One of the strings ``choices``."""
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def divisible(name: str, value: int, by_name: str, by: int) -> int:
    """``value`` a multiple of ``by`` (both already checked as ints)."""
    if value % by:
        raise ValueError(f"{name} ({value}) must be divisible by {by_name} ({by})")
    return value


def module(name: str, value) -> Module:
    """An attngraph ``Module`` (a score function, a cell, a layer), not a class or a plain function."""
    if not isinstance(value, Module):
        raise TypeError(f"{name} must be an attngraph Module instance, got {value!r} ({type(value).__name__})")
    return value


def function(name: str, value) -> Callable:
    """Something callable, such as ``ag.relu``."""
    if not callable(value):
        raise TypeError(f"{name} must be a function such as ag.relu, got {value!r} ({type(value).__name__})")
    return value


def float_dtype(name: str, value) -> np.dtype:
    """float32 or float64, the dtypes parameters may have, given as a name or a NumPy dtype."""
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        dtype = None
    if dtype not in (np.float32, np.float64):
        raise DTypeError(f"{name} must be float32 or float64, got {value!r}")
    return dtype
