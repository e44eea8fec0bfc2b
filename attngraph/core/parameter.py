"""Parameters: named, trainable arrays that a graph reads each time it runs."""
from __future__ import annotations

import numpy as np

from .device import backend, backend_of, host
from .tensor import Tensor
from .graph import FLOAT_DTYPES, Node, unsupported_dtype
from .tracing import parameter_node


class Parameter(Tensor):
    """A trainable array, and a Tensor while a graph is traced: its node is made on its first use there, and its
    operators are a Tensor's (as in PyTorch, where a Parameter is a Tensor). Graphs hold the ``Parameter`` itself,
    so updating ``data`` in place (an optimizer step) or assigning a new array of the same shape and dtype changes
    what every compiled graph computes; a compiled graph refuses to run on a parameter whose shape or dtype has
    changed since it was traced.
    ``name`` is the dotted path the owning module gives it (``encoder.layers.0.attn.w_q.weight``).

    ``data`` is a NumPy array, or a CUDA device array after ``to("cuda")``: graphs compiled for "cuda" then use
    it in place, and an optimizer can update it on the GPU (see attngraph/core/executor.py)."""

    name: str | None = None         # a plain attribute here, not Tensor's property of the node

    def __init__(self, data, trainable: bool = True, name: str | None = None):
        self.name = name
        self.data = data
        self.trainable = trainable

    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, values) -> None:
        """Host values become a C-contiguous NumPy array (copied when they are not one); a device array is kept
        as it is. Either must hold float32, float64 or float16 (else DTypeError, and ``data`` is left as it was)."""
        values = values if backend_of(values).name != "cpu" else np.require(values, requirements="C")
        if values.dtype not in FLOAT_DTYPES:
            raise unsupported_dtype(values.dtype, f"parameter {self.name!r}" if self.name else "a parameter",
                                    FLOAT_DTYPES)
        self._data = values

    @property
    def node(self) -> Node:
        """This parameter's node in the graph being traced."""
        return parameter_node(self)

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)

    @property
    def device(self) -> str:
        """Where ``data`` lives: "cpu" (a NumPy array) or "cuda" (a device array)."""
        return backend_of(self.data).name

    def to(self, device: str) -> "Parameter":
        """Move ``data`` to ``device`` ("cpu" or "cuda"); DeviceError when that device cannot run."""
        self.data = backend(device).put(self.data)
        return self

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the values, wherever they live."""
        return np.array(host(self.data), copy=True)

    def assign(self, values) -> None:
        """Replace the values with the host array ``values``, keeping the parameter on its device."""
        self.data = backend_of(self.data).put(np.asarray(values, order="C"))

    def __repr__(self):
        where = "" if self.device == "cpu" else f", device={self.device!r}"
        return f"Parameter({self.name or ''}{list(self.shape)}, {self.dtype}, trainable={self.trainable}{where})"
