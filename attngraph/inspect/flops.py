"""FLOP counts and sizes of a graph's nodes, on concrete shapes.

Each primitive counts its own floating-point operations: ``flops=`` in its definition (``core/prims``) is
the documentation of its count. The conventions they follow: a multiply-add counts 2 (``matmul`` is 2·m·n·k
per output matrix); an elementwise op counts the operations of the short polynomial its kernel evaluates, per
output element (1 for ``add``, 6 for ``tanh``, 10 for ``erf``); a reduction counts 1 per input element; the
fused kernels (attention flash-style, softmax, layer norm, cross-entropy) count what their composition would,
over the whole Tq × Tk matrix even when causal; a ``fused`` node counts the ops it runs; data movement and
integer work count 0; a ``scan`` counts its body's ops × its T steps (``loop_flops`` lists them).

Symbolic dimensions must be bound to count: ``binding(graph, B=32, T=128)``. A symbol left unbound counts
as 1, and every report says which binding it used.
"""
from __future__ import annotations

from math import prod
from numbers import Integral

from ..core.dims import resolve, resolve_shape, symbols
from ..core.graph import Graph, Node
from ..core.primitive import lookup
from ..core.prims.recurrence import step_bindings
from ..errors import AttnGraphError, BindingError


def binding(graph: Graph, **sizes: int) -> dict[str, int]:
    """Every symbolic dimension of ``graph`` bound to a size: ``sizes`` where given, else 1. A size that is not
    a positive integer raises ``BindingError``."""
    names = sorted({s for node in graph.nodes for d in node.shape for s in symbols(d)})
    unknown = set(sizes) - set(names)
    if unknown:
        raise AttnGraphError(f"the graph has no dimension(s) {sorted(unknown)}; its symbolic dimensions are "
                             f"{names or 'none'}")
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
            raise BindingError(f"{name}={size!r}: a dimension's size must be a positive integer")
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


def loop_flops(node: Node, bindings: dict[str, int]) -> dict[Node, int]:
    """A ``scan`` node's FLOPs op by op of its body, each over the T steps: they add up to ``node_flops(node)``."""
    body = node.attrs["body"]
    inner = step_bindings(body, *(resolve_shape(x.shape, bindings) for x in node.inputs))
    steps = resolve(node.shape[1], bindings)
    return {n: steps * node_flops(n, inner) for n in body.graph.nodes if n.kind == "call"}


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
