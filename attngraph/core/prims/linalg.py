"""Matrix products: ``matmul`` over the last two axes, with NumPy broadcasting of the batch axes."""
from math import prod

from ops.cpu import matmul as mm

from .. import functional as F
from ..dims import broadcast, format_shape
from ..primitive import define
from ._infer import require_float, same_dtype


def matmul_rule(a, b):
    require_float(a, b)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError("the matmul primitive takes operands of at least two dimensions")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"inner dimensions differ: {format_shape(a.shape)} @ {format_shape(b.shape)} "
                         f"contracts {a.shape[-1]} with {b.shape[-2]}")
    return broadcast(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), same_dtype(a, b)


def matmul_vjp(g, y, a, b):
    """dA = G Bᵀ, dB = Aᵀ G. A 2-D weight shared by every row of a batched ``a`` gets its gradient from one
    flattened product instead of a per-batch product summed afterwards."""
    if len(b.shape) == 2 and len(a.shape) > 2:
        k, n = b.shape
        return g @ b.mT, F.reshape(a, (-1, k)).mT @ F.reshape(g, (-1, n))
    return g @ b.mT, a.mT @ g


define("matmul", matmul_rule, cpu=mm.matmul, vjp=matmul_vjp,
       flops=lambda out, a, b: 2 * prod(out) * a[-1])
