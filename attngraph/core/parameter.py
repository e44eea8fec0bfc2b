"""Parameters: named, trainable arrays that a graph reads each time it runs."""
from __future__ import annotations

import numpy as np


class Parameter:
    """A trainable array. Graphs hold the ``Parameter`` itself, so updating ``data`` in place (an optimizer
    step) or assigning a new array of the same shape and dtype changes what every compiled graph computes.
    ``name`` is the dotted path the owning module gives it (``encoder.layers.0.attn.w_q.weight``)."""

    __array_priority__ = 100
    __array_ufunc__ = None      # NumPy defers to the graph operators: ``array @ parameter`` builds a node

    def __init__(self, data, trainable: bool = True, name: str | None = None):
        self.data = np.ascontiguousarray(data)
        if self.data.dtype.kind != "f":
            raise TypeError(f"a parameter must hold floating-point values, not {self.data.dtype}")
        self.trainable = trainable
        self.name = name

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)

    def __repr__(self):
        return f"Parameter({self.name or ''}{list(self.shape)}, {self.dtype}, trainable={self.trainable})"
