"""Parameter initialization with explicit, reproducible randomness.

Layers draw from the generator they are given, else from this module's default generator, which starts
from seed 0 in every process (``manual_seed`` restarts it): the same code builds the same model.
"""
from __future__ import annotations

import numpy as np

from .checks import integer

_default = [np.random.default_rng(0)]


def manual_seed(seed: int) -> None:
    _default[0] = np.random.default_rng(integer("seed", seed, minimum=0))


def generator(rng: np.random.Generator | None = None) -> np.random.Generator:
    """``rng``, or the default generator when it is None."""
    if rng is None:
        return _default[0]
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, e.g. np.random.default_rng(0), or None; "
                        f"got {rng!r} ({type(rng).__name__})")
    return rng


def uniform(shape, bound: float, dtype="float32", rng=None) -> np.ndarray:
    """U(−bound, bound)."""
    return generator(rng).uniform(-bound, bound, size=shape).astype(dtype)


def normal(shape, std: float = 1.0, dtype="float32", rng=None) -> np.ndarray:
    return (generator(rng).standard_normal(size=shape) * std).astype(dtype)
