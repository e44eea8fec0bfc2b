"""Fusion: common patterns folded into primitives that already do the combined work in one kernel.

  matmul(transpose(x), y)   →  matmul(x, y, transpose_a=True)   when the transpose swaps the last two axes
  matmul(x, transpose(y))   →  matmul(x, y, transpose_b=True)      (BLAS reads the operand in place)
  gelu(add(x, b))           →  gelu(x, b)                        when b is a vector along x's last axis
  gelu_grad(g, add(x, b))   →  gelu_grad(g, x, b)                  (a Linear layer's bias, then GELU)

and, in ``fuse_bias``, after attention fusion has matched its patterns of plain products:

  add(matmul(x, w), b)      →  matmul(x, w, b)                   when nothing else reads the product

The bypassed transposes and adds are left to dead-code elimination: they go when nothing else reads
them. No kernel is generated per pattern, so numba's on-disk cache keeps serving every kernel.
"""
from collections import Counter

from ..graph import Graph
from .rewrite import rewrite


def fuse(graph: Graph) -> Graph:
    def visit(node, inputs, copy):
        if node.op == "matmul":
            (a, ta), (b, tb) = (_untransposed(x, node.attrs.get(flag, False))
                                for x, flag in zip(inputs, ("transpose_a", "transpose_b")))
            return copy(node, (a, b) + inputs[2:], attrs={**node.attrs, "transpose_a": ta, "transpose_b": tb})
        if node.op in ("gelu", "gelu_grad") and len(inputs) == (1 if node.op == "gelu" else 2):
            split = _bias_add(inputs[-1])
            if split is not None:
                return copy(node, inputs[:-1] + split)
        return copy(node, inputs)

    return rewrite(graph, visit)


def fuse_bias(graph: Graph) -> Graph:
    """A bias added to a product that nothing else reads goes into the product (torch's addmm). A product
    whose bias went into a GELU is read by the GELU too, so it keeps that fusion, which costs no pass."""
    readers = Counter(x for node in graph.nodes for x in node.inputs)

    def visit(node, inputs, copy):
        split = _bias_add(node)
        if split is not None and split[0].op == "matmul" and len(split[0].inputs) == 2 and readers[split[0]] == 1:
            product, bias = (inputs[node.inputs.index(x)] for x in split)
            return copy(node, product.inputs + (bias,), op="matmul", attrs=dict(product.attrs))
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
