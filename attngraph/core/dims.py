"""Dimensions and shapes, concrete or symbolic.

A dimension is an ``int`` or a ``str``. A string names a symbolic dimension (``"B"``, ``"T"``) bound when
the graph runs, or a product of them with an optional integer factor (``"B*T"``, ``"4*T"``), which is what
flattening a symbolic shape gives. Products are kept in one normal form (factor first, symbols sorted), so
two equal dimensions compare equal as Python values.
"""
from __future__ import annotations

from collections import Counter
from math import prod
from typing import Mapping, Sequence, Union

Dim = Union[int, str]
Shape = tuple[Dim, ...]


def _factors(dim: Dim) -> tuple[int, Counter]:
    """Split a dimension into its integer factor and the multiset of its symbols."""
    if isinstance(dim, int):
        return dim, Counter()
    factor, symbols = 1, Counter()
    for token in dim.split("*"):
        token = token.strip()
        if token.isdigit():
            factor *= int(token)
        elif token.isidentifier():
            symbols[token] += 1
        else:
            raise ValueError(f"bad symbolic dimension {dim!r}: use names like 'B' or products like 'B*T'")
    return factor, symbols


def _join(factor: int, symbols: Counter) -> Dim:
    if not symbols or factor == 0:
        return factor
    names = "*".join(sorted(symbols.elements()))
    return names if factor == 1 else f"{factor}*{names}"


def normalize(dim: Dim) -> Dim:
    """The normal form of a dimension; checks that it is a non-negative int or a valid symbol product."""
    if isinstance(dim, bool) or not isinstance(dim, (int, str)):
        raise ValueError(f"a dimension must be an int or a symbol name, not {dim!r}")
    if isinstance(dim, int) and dim < 0:
        raise ValueError(f"a dimension cannot be negative ({dim})")
    return _join(*_factors(dim))


def multiply(*dims: Dim) -> Dim:
    """The product of dimensions, symbolic when any factor is."""
    factor, symbols = 1, Counter()
    for dim in dims:
        f, s = _factors(dim)
        factor *= f
        symbols += s
    return _join(factor, symbols)


def divide(total: Dim, part: Dim) -> Dim | None:
    """``total / part`` when it is a whole dimension, else None."""
    ft, st = _factors(total)
    fp, sp = _factors(part)
    if fp == 0 or ft % fp or (sp - st):
        return None
    return _join(ft // fp, st - sp)


def symbols(dim: Dim) -> set[str]:
    return set(_factors(dim)[1])


def is_symbolic(shape: Shape) -> bool:
    """Whether ``shape`` holds a symbolic dimension (its size known when the graph runs)."""
    return any(isinstance(d, str) for d in shape)


def resolve(dim: Dim, bindings: Mapping[str, int]) -> int:
    """The concrete value of a dimension under ``bindings`` (symbol -> size)."""
    if isinstance(dim, int):
        return dim
    factor, syms = _factors(dim)
    return factor * prod(bindings[s] ** n for s, n in syms.items())


def resolve_shape(shape: Shape, bindings: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(resolve(d, bindings) for d in shape)


def format_shape(shape: Sequence[Dim]) -> str:
    """``(B, T, 64)`` — the way shapes appear in messages."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast(*shapes: Shape) -> Shape:
    """NumPy broadcasting over possibly symbolic shapes; raises ValueError when they do not broadcast.

    A symbolic dimension broadcasts with 1 and with itself only: ``T`` against ``10`` is an error, because
    the graph must hold for every value of ``T``.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        dims = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(dims) > 1:
            raise ValueError("shapes " + " and ".join(format_shape(s) for s in shapes) + " do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)
