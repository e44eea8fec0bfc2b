"""FLOP counts and sizes of a graph's nodes, on concrete shapes.

Each primitive counts its own floating-point operations (``flops=`` in ``core/prims``); a multiply-add
counts 2. Per op:

- ``matmul`` (..., m, k) @ (..., k, n): 2·m·n·k per output matrix, times the batch.
- 1 per output element: ``add sub mul div neg maximum minimum where relu sqrt abs`` and the comparisons ``equal
  not_equal less less_equal greater greater_equal``; 2: ``rsqrt clip``; 4: ``exp log``; 6: ``tanh sigmoid``;
  7: ``silu``; 10: ``erf gelu pow sin cos`` (transcendentals as the short polynomials the kernels evaluate).
- ``sum max min``: 1 per input element; ``logsumexp``: 4 per input element (max, subtract, exp, sum);
  ``scatter_add``: 1 per added element.
- ``softmax log_softmax``: 5 per element (max, subtract, exp, sum, divide); ``softmax_grad
  log_softmax_grad``: 4.
- ``layer_norm``: 8 per element, ``layer_norm_grad``: 10, ``layer_norm_params_grad``: 8 per input element;
  ``cross_entropy cross_entropy_grad``: 5 per logit; ``dropout``: 2 per element; ``gelu_grad``: 14 per
  element.
- ``attention`` (fused, flash-style): per score 2·d (q·k) + 1 (scale) + 5 (softmax) + 2·dv (mixing), over
  the whole Tq × Tk matrix even when causal — as the composition counts them; ``attention_grad``: per score
  6·d + 4·dv + 9 (the recomputed scores and the three gradient products); ``attention_bias_grad``: per score
  2·d + 2·dv + 9 (the recomputed scores and dO vᵀ).
- ``conv2d`` (B, C, H, W) by (O, C, kh, kw): 2·C·kh·kw per output element; ``conv2d_input_grad
  conv2d_weight_grad``: as many per element of their output gradient g. ``max_pool2d avg_pool2d``: kh·kw per
  output element; ``avg_pool2d_grad``: kh·kw per element of g, ``max_pool2d_grad``: 1.
- ``argmax argmin``: 1 per input element (a comparison); ``argsort``: n·⌈log₂ n⌉ per row of n elements (a merge
  sort's comparisons); ``cumsum``: 1 per element.
- ``fused`` (the fusion pass's generated kernels): the sum of the counts of the ops it runs.
- 0, for data movement and integer work: ``reshape transpose broadcast_to getitem scatter_slice concat
  gather astype stop_gradient size arange relative_distance logical_and logical_or logical_not``.

Symbolic dimensions must be bound to count: ``binding(graph, B=32, T=128)``. A symbol left unbound counts
as 1, and every report says which binding it used.
"""
from __future__ import annotations

from math import prod

from ..core.dims import resolve_shape, symbols
from ..core.graph import Graph, Node
from ..core.primitive import lookup
from ..errors import AttnGraphError


def binding(graph: Graph, **sizes: int) -> dict[str, int]:
    """Every symbolic dimension of ``graph`` bound to a size: ``sizes`` where given, else 1."""
    names = sorted({s for node in graph.nodes for d in node.shape for s in symbols(d)})
    unknown = set(sizes) - set(names)
    if unknown:
        raise AttnGraphError(f"the graph has no dimension(s) {sorted(unknown)}; its symbolic dimensions are "
                             f"{names or 'none'}")
    return {name: int(sizes.get(name, 1)) for name in names}


def describe_binding(bindings: dict[str, int]) -> str:
    """``"B=1, T=16"``, or ``""`` for a graph of concrete shapes."""
    return ", ".join(f"{name}={size}" for name, size in bindings.items())


def node_flops(node: Node, bindings: dict[str, int]) -> int:
    """Floating-point operations of one node (0 for inputs, parameters, constants and outputs)."""
    if node.kind != "call":
        return 0
    shapes = [resolve_shape(x.shape, bindings) for x in node.inputs]
    return int(lookup(node.op).flops(resolve_shape(node.shape, bindings), *shapes, **node.attrs))


def node_bytes(node: Node, bindings: dict[str, int]) -> int:
    """Size in bytes of the node's value."""
    return prod(resolve_shape(node.shape, bindings)) * node.dtype.itemsize


def total_flops(graph: Graph, **sizes: int) -> int:
    """FLOPs of every op call of ``graph`` (forward and backward, if it has one)."""
    bindings = binding(graph, **sizes)
    return sum(node_flops(n, bindings) for n in graph.nodes)


def format_count(n: float, unit: str = "") -> str:
    """``1234567 -> "1.23 M"``: three significant digits and an SI prefix (k, M, G, T)."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:g} {unit}".rstrip()


def format_bytes(n: int) -> str:
    """``13312 -> "13 KiB"``."""
    for prefix, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.3g} {prefix}"
    return f"{n} B"
