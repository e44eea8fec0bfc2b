"""Data movement on NumPy arrays: reshapes, transposes, broadcasts, slices and their scatters, concatenation.

Results are C-contiguous (a copy only when the view is not), so that the kernels after them read rows in order;
a reshape of a contiguous array is a view.
"""
import numpy as np


def contiguous(x) -> np.ndarray:
    """``x`` as a C-contiguous array, copied only if it is not one; 0-d stays 0-d (np.ascontiguousarray would
    make it 1-d)."""
    return np.require(x, requirements="C")


def scatter_slice(g, shape, index):
    """Zeros of ``shape`` with ``g`` written at ``index``: the gradient of ``x[index]``."""
    out = np.zeros(shape, dtype=g.dtype)
    out[index] = g
    return out


KERNELS = {
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, perm: contiguous(x.transpose(perm)),
    "broadcast_to": lambda x, shape: contiguous(np.broadcast_to(x, shape)),
    "getitem": lambda x, index: contiguous(x[index]),
    "scatter_slice": scatter_slice,
    "concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "stop_gradient": lambda x: x,
}
