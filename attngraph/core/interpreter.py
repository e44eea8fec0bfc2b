"""The interpreter: a node's kernel found once, then run step by step through one hook.

``Interpreter.run_node(node, call, args)`` is the per-step hook (as torch.fx's ``Interpreter.run_node``): every
kernel that attngraph runs outside the executor's fast loop goes through it. Debug mode (``Checking``), constant
folding (core/passes/fold.py) and the search for the op of a fused node that first makes a NaN all use it, and
a subclass sees every step of an executable it is set on (``Executable.interpreter``): the profiler
(attngraph/inspect/profile.py) times each call. Without an interpreter set (and out of debug mode) the executor
runs its own loop over the same calls, which costs nothing per step.

    class Counting(Interpreter):
        def run_node(self, node, call, args):
            self.count[node.op] += 1
            return super().run_node(node, call, args)
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..errors import BindingError, DeviceError, NonFiniteError
from . import half
from .device import backend
from .dims import resolve_shape
from .prims.fused import run_program, viewed


class Interpreter:
    """Runs kernels of ``device`` one node at a time; ``bindings`` holds the sizes of the symbolic dimensions of
    the run in progress (set by ``run``). ``action`` names what a failing kernel was doing, in the note added
    to its exception."""

    action = "running"

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.backend = backend(device)
        self.bindings: dict[str, int] = {}

    def kernel(self, node) -> Callable:
        """The device's kernel of ``node``'s op, specialized for its input dtypes where the kernel is generic (run in
        float32 where the node touches float16: core/half.py)."""
        kernel = self.backend.kernels.get(node.op)
        if kernel is None:
            raise DeviceError(f"op {node.op!r} has no {self.device} kernel ({node.describe()})")
        if half.touches_half(node):
            return half.in_float32(kernel, node, self.backend)
        if hasattr(kernel, "for_dtypes"):
            kernel = kernel.for_dtypes(*(x.dtype for x in node.inputs), **node.attrs)
        return kernel

    def call(self, node, bindings: dict[str, int] | None = None) -> Callable:
        """``node``'s kernel with its attributes bound, a ``shape`` attribute resolved with ``bindings``."""
        attrs = {k: resolve_shape(v, bindings or {}) if k == "shape" else v for k, v in node.attrs.items()}
        kernel = self.kernel(node)
        return functools.partial(kernel, **attrs) if attrs else kernel

    def evaluate(self, node, args: list) -> Any:
        """``node``'s value for the arrays ``args`` (its shape concrete), through ``run_node``."""
        return self.run_node(node, self.call(node), args)

    def run(self, steps: list[tuple], nodes: list, env: list, bindings: dict[str, int]) -> None:
        """An executable's plan: ``steps`` are (call, input slots, output slot, slots freed) for ``nodes``, the
        values live in ``env``."""
        self.bindings = bindings
        node = None
        try:
            for (call, inputs, output, frees), node in zip(steps, nodes):
                env[output] = self.run_node(node, call, [env[i] for i in inputs])
                for i in frees:
                    env[i] = None
        except IndexError as error:         # an index fed or computed from the sizes fed: the caller's error
            raise out_of_range(error, node) from error

    def run_node(self, node, call: Callable, args: list) -> Any:
        """The hook: ``call(*args)``, ``node``'s value. A failing kernel's exception names the node."""
        try:
            return call(*args)
        except Exception as e:
            e.add_note(f"while {self.action} {node.describe()}")
            raise


class Checking(Interpreter):
    """Debug mode: each value must have the node's shape and, if floating, be finite; else ``NonFiniteError``
    names the first bad node, for a fused node the first of the ops it stands for that makes the NaN or Inf."""

    def run_node(self, node, call: Callable, args: list) -> Any:
        out = super().run_node(node, call, args)
        expected = resolve_shape(node.shape, self.bindings)
        if out.shape != expected:
            raise AssertionError(f"kernel of {node.describe()} returned shape {out.shape}, expected {expected}")
        values = self.backend.get(out)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            if node.op == "fused":
                members = Checking("cpu")
                members.bindings = self.bindings
                members.run_members(node, list(map(self.backend.get, args)))
            raise NonFiniteError(f"{'NaN' if np.isnan(values).any() else 'Inf'} in the output of {node.describe()}")
        return out

    def run_members(self, node, args: list) -> None:
        """Run the ops a fused ``node`` stands for on the host arrays ``args``, each through ``run_node``: the
        first whose value is not finite raises, named, with the fused node it was part of."""
        def step(k, op, xs, dtype):
            member = node.value[k]
            call = (lambda x: np.asarray(x).astype(dtype)) if op == "astype" else self.backend.kernels[op]
            try:
                return self.run_node(member, call, xs)
            except NonFiniteError as e:
                raise NonFiniteError(f"{e}, fused into {node.label}") from None

        run_program(node.attrs["program"], viewed(args, node.attrs["views"], lambda x, view: x[view]), step)


def out_of_range(error: IndexError, node) -> BindingError:
    """The error for an index that a kernel (gather, embedding) found out of range at run time: one fed to the
    graph, or one computed from the sizes fed (positions of a sequence longer than their table)."""
    return BindingError(f"{error}, in {node.describe()}: check the indices fed to the graph, or the sizes they are "
                        "computed from (a sequence longer than its position table)")
