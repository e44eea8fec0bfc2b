"""Reductions over axes: ``sum``, ``max``, and ``size`` (the element count that ``mean`` divides by, read
at run time so that it holds for symbolic dimensions). Sums of bool and integers are int64 (as torch.sum);
max keeps its input's dtype and has no value over an axis of size 0 (as torch.amax)."""
from math import prod

import numpy as np

from ops.cpu import reduce as red

from .. import functional as F
from ..primitive import define


def reduced_shape(x, axes, keepdims):
    for a in axes:
        if not 0 <= a < len(x.shape):
            raise ValueError(f"axis {a} is out of range for {len(x.shape)} dimensions")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def sum_rule(x, axes, keepdims):
    return reduced_shape(x, axes, keepdims), x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)


def max_rule(x, axes, keepdims):
    empty = [a for a in axes if x.shape[a] == 0]
    if empty:
        raise ValueError(f"max over axis {empty[0]}, of size 0, has no value; reduce over other axes")
    return reduced_shape(x, axes, keepdims), x.dtype


def spread(g, x, axes, keepdims):
    """The gradient of a reduction, broadcast back over the reduced axes."""
    return F.broadcast_to(g if keepdims else F.reshape(g, reduced_shape(x, axes, True)), x.shape)


def max_vjp(g, y, x, axes, keepdims):
    """The maximum's gradient goes to the elements equal to it, shared evenly between ties."""
    winners = F.equal(x, spread(y, x, axes, keepdims)).astype(x.dtype)
    return (winners * spread(g, x, axes, keepdims) / F.sum(winners, axes, keepdims=True),)


def reduce_flops(out, x, axes, keepdims):
    return prod(x)


define("sum", sum_rule, cpu=lambda x, axes, keepdims: red.sum(x, axes, keepdims), flops=reduce_flops,
       vjp=lambda g, y, x, axes, keepdims: (spread(g, x, axes, keepdims),))
define("max", max_rule, cpu=lambda x, axes, keepdims: red.max(x, axes, keepdims), flops=reduce_flops,
       vjp=max_vjp)
define("size", lambda x, axes, dtype: ((), np.dtype(dtype)), differentiable=False,
       cpu=lambda x, axes, dtype: np.asarray(prod(x.shape[a] for a in axes), dtype=dtype))
