"""Data movement on NumPy arrays: reshapes, transposes, broadcasts, slices and their scatters, concatenation, and
the gather and scatter along an axis of torch.gather / torch.scatter_reduce:

  take_along_axis:  out[i, j, k] = x[i, index[i, j, k], k]                      (axis 1; index no longer than x)
  put_along_axis:   out = x;  out[i, index[i, j, k], k] ⊕= src[i, j, k]         (⊕: assign, +, ×, max or min)

An index outside [0, n) of its axis raises IndexError naming the axis (negative ones too, as torch's).

Results are C-contiguous (a copy only when the view is not), so that the kernels after them read rows in order;
a reshape of a contiguous array is a view. A slice read only by kernels that take strided views (products, sums,
concatenations, scatters) stays a view (``VIEWS``; the executor decides).
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


def take_along_axis(x, index, axis):
    _check_along(index, x.shape, axis)
    extent = tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(index.shape))
    return np.take_along_axis(x[extent], index, axis)


REDUCE = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def put_along_axis(x, index, src, axis, reduce):
    """A copy of ``x`` with ``src`` reduced in at ``index`` along ``axis``; ``"assign"`` keeps the last of repeated
    positions, the others combine them all (NaN wins amax and amin, as torch's)."""
    _check_along(index, x.shape, axis)
    out = np.array(x, order="C")
    at = tuple(index if a == axis else position for a, position in enumerate(np.indices(index.shape, sparse=True)))
    if reduce == "assign":
        out[at] = src
    else:
        with np.errstate(invalid="ignore"):         # NaN meeting NaN in amax / amin: NaN, as meant
            REDUCE[reduce].at(out, at, src)
    return out


def _check_along(index, shape, axis):
    bad = (index < 0) | (index >= shape[axis])
    if bad.any():
        raise IndexError(f"index {index[bad].flat[0]} is out of bounds for axis {axis} with size {shape[axis]}")


VIEWS = {"getitem": lambda x, index: x[index]}      # for readers of strided views (ops/backend.py)

KERNELS = {
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, perm: contiguous(x.transpose(perm)),
    "broadcast_to": lambda x, shape: contiguous(np.broadcast_to(x, shape)),
    "getitem": lambda x, index: contiguous(x[index]),
    "scatter_slice": scatter_slice,
    "concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "stop_gradient": lambda x: x,
    "take_along_axis": take_along_axis,
    "put_along_axis": put_along_axis,
}
