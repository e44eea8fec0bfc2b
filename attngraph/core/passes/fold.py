"""Constant folding: evaluate at compile time what does not depend on the inputs.

An op call is folded into a constant when every input is a constant, or when it reads only its inputs'
shapes (``Primitive.shape_only``: ``size``, which ``mean`` divides by; ``arange``) and those are concrete.
Its CPU kernel computes the value once, run by the interpreter (core/interpreter.py). A folded value lives as
long as the compiled graph, so only results of up to MAX_FOLDED elements are folded: a large broadcast is
cheaper to recompute than to keep.
A kernel that fails while folding names the node, and so the user's source line.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..dims import is_symbolic
from ..graph import Graph
from ..interpreter import Interpreter
from ..primitive import lookup
from .rewrite import rewrite

MAX_FOLDED = 1 << 16            # elements


def fold(graph: Graph) -> Graph:
    interpreter = Folding("cpu")

    def visit(node, inputs, copy):
        if node.kind != "call" or not _foldable(node, inputs):
            return copy(node, inputs)
        values = [x.value if x.op == "constant" else np.broadcast_to(np.empty((), x.dtype), x.shape) for x in inputs]
        value = np.asarray(interpreter.evaluate(node, values))
        return copy(node, (), op="constant", attrs={}, value=value)

    return rewrite(graph, visit)


class Folding(Interpreter):
    """The CPU interpreter, its failures noted as folding."""
    action = "folding the constant"


def _foldable(node, inputs) -> bool:
    if not inputs or is_symbolic(node.shape) or prod(node.shape) > MAX_FOLDED:
        return False
    if lookup(node.op).shape_only:
        return not any(is_symbolic(x.shape) for x in inputs)
    return all(x.op == "constant" for x in inputs)
