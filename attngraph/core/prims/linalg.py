"""Matrix products: ``matmul`` over the last two axes, with NumPy broadcasting of the batch axes.

``matmul(a, b, transpose_a=False, transpose_b=False)`` computes op(a) @ op(b), op swapping the last two
axes of an operand whose flag is set, as BLAS's gemm does. ``ag.matmul`` never sets the flags; the
compiler's fusion pass does, absorbing ``transpose`` nodes that would otherwise copy the operand."""
from math import prod


from .. import tensor as F
from ..dims import broadcast, format_shape
from ..primitive import define
from ._infer import require_float, same_dtype


def swapped(shape, transpose: bool):
    return shape[:-2] + shape[:-3:-1] if transpose else shape


def matmul_rule(a, b, transpose_a=False, transpose_b=False):
    require_float(a, b)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError("the matmul primitive takes operands of at least two dimensions")
    a_shape, b_shape = swapped(a.shape, transpose_a), swapped(b.shape, transpose_b)
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"inner dimensions differ: {format_shape(a_shape)} @ {format_shape(b_shape)} "
                         f"contracts {a_shape[-1]} with {b_shape[-2]}")
    return broadcast(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]), same_dtype(a, b)


def matmul_vjp(g, y, a, b, transpose_a=False, transpose_b=False):
    """dA = G Bᵀ, dB = Aᵀ G. A 2-D weight shared by every row of a batched ``a`` gets its gradient from one
    flattened product instead of a per-batch product summed afterwards. A transposed operand gets the
    transpose of its operand's gradient."""
    if transpose_a or transpose_b:
        a_, b_ = (F.swapaxes(a, -1, -2) if transpose_a else a), (F.swapaxes(b, -1, -2) if transpose_b else b)
        da, db = matmul_vjp(g, y, a_, b_)
        return (F.swapaxes(da, -1, -2) if transpose_a else da), (F.swapaxes(db, -1, -2) if transpose_b else db)
    if len(b.shape) == 2 and len(a.shape) > 2:
        k, n = b.shape
        return g @ b.mT, F.reshape(a, (-1, k)).mT @ F.reshape(g, (-1, n))
    return g @ b.mT, a.mT @ g


define("matmul", matmul_rule, vjp=matmul_vjp,
       flops=lambda out, a, b, transpose_a=False, transpose_b=False: 2 * prod(out) * a[-2 if transpose_a else -1])
