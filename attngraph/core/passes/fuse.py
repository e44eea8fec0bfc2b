"""Fusion: common patterns folded into primitives that already do the combined work in one kernel.

  matmul(transpose(x), y)   →  matmul(x, y, transpose_a=True)   when the transpose swaps the last two axes
  matmul(x, transpose(y))   →  matmul(x, y, transpose_b=True)      (BLAS reads the operand in place)
  gelu(add(x, b))           →  gelu(x, b)                        when b is a vector along x's last axis
  gelu_grad(g, add(x, b))   →  gelu_grad(g, x, b)                  (a Linear layer's bias, then GELU)

The bypassed transposes and adds are left to dead-code elimination: they go when nothing else reads
them. No kernel is generated per pattern, so numba's on-disk cache keeps serving every kernel.
"""
from ..graph import Graph
from .rewrite import rewrite


def fuse(graph: Graph) -> Graph:
    def visit(node, inputs, copy):
        if node.op == "matmul":
            (a, ta), (b, tb) = (_untransposed(x, node.attrs.get(flag, False))
                                for x, flag in zip(inputs, ("transpose_a", "transpose_b")))
            return copy(node, (a, b), attrs={**node.attrs, "transpose_a": ta, "transpose_b": tb})
        if node.op in ("gelu", "gelu_grad") and len(inputs) == (1 if node.op == "gelu" else 2):
            split = _bias_add(inputs[-1])
            if split is not None:
                return copy(node, inputs[:-1] + split)
        return copy(node, inputs)

    return rewrite(graph, visit)


def _untransposed(x, transposed: bool):
    """(x, flag) with the transposes of x's last two axes absorbed into the flag (autodiff transposes a
    transposed key back: two cancel)."""
    swap = tuple(range(len(x.shape) - 2)) + (len(x.shape) - 1, len(x.shape) - 2)
    while x.op == "transpose" and tuple(x.attrs["perm"]) == swap:
        x, transposed = x.inputs[0], not transposed
    return x, transposed


def _bias_add(x):
    """(u, b) when x = u + b with b a vector along u's last axis and u of x's shape, else None."""
    if x.op != "add":
        return None
    for u, b in (x.inputs, x.inputs[::-1]):
        if u.shape == x.shape and b.shape == x.shape[-1:] and b.dtype == x.dtype:
            return u, b
    return None
