"""Parameter initialization with explicit, reproducible randomness.

Layers draw from the generator they are given, else from this module's default generator, which starts
from seed 0 in every process (``manual_seed`` restarts it): the same code builds the same model.
"""
from __future__ import annotations

import numpy as np

_default = [np.random.default_rng(0)]


def manual_seed(seed: int) -> None:
    _default[0] = np.random.default_rng(seed)


def generator(rng: np.random.Generator | None = None) -> np.random.Generator:
    return _default[0] if rng is None else rng


def uniform(shape, bound: float, dtype="float32", rng=None) -> np.ndarray:
    """U(−bound, bound)."""
    return generator(rng).uniform(-bound, bound, size=shape).astype(dtype)


def normal(shape, std: float = 1.0, dtype="float32", rng=None) -> np.ndarray:
    return (generator(rng).standard_normal(size=shape) * std).astype(dtype)
