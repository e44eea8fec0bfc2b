"""Entry points: ``trace`` turns a function or module into a graph; ``value_and_grad`` differentiates a
function of NumPy arrays, tracing and compiling once per input signature (as ``jax.value_and_grad``).

Every way into execution goes through ``executor.compile``, which optimizes the graph unless debug mode is on:
``value_and_grad`` and gradcheck's executables run the same schedule as ``graph.compile()`` and the Trainer."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DTypeError, TracingError
from .autodiff import gradients
from . import debug
from .executor import Executable, compile
from .graph import Graph, gradient_name
from .tensor import Tensor, as_node
from .tracing import Input, add_node, add_output, building


def trace(fn: Callable, **inputs) -> Graph:
    """Call ``fn(**inputs)`` on symbolic tensors and record the graph. Each input is an ``Input`` spec or
    an example array (its shape and dtype are taken). A module's attribute paths become the scopes and
    parameter names (also for a bound method such as ``model.encode``). ``fn`` returns a tensor, or tuples,
    lists and dicts of them (see ``_named_outputs``)."""
    graph = Graph()
    owner = getattr(fn, "__self__", None)
    root = fn if hasattr(fn, "named_parameters") else owner if hasattr(owner, "named_parameters") else None
    with building(graph, root=root):
        tensors = {key: _input(key, spec) for key, spec in inputs.items()}
        result = fn(**tensors)
        for name, value in _named_outputs(result):
            add_output(as_node(value), name)
    return graph


def _input(key: str, spec) -> Tensor:
    """The input node named ``spec.name`` or ``key``; ``rng_seed`` is reserved for the seed of dropout masks,
    which the executor feeds by itself (see ``Executable``)."""
    if not isinstance(spec, Input):
        array = np.asarray(spec)
        spec = Input(array.shape, array.dtype, name=key)
    name = spec.name or key
    if name == "rng_seed":
        raise TracingError("the input name 'rng_seed' is reserved for the seed of dropout masks, which the executor "
                           "feeds by itself (pass rng_seed=... when running the graph to choose it); rename the input")
    return Tensor(add_node("input", (), {}, spec.shape, spec.dtype, name=name, scope=""))


def _named_outputs(result, prefix: str | None = None) -> list[tuple[str, Any]]:
    """Flatten what the traced function returned into named outputs: a lone tensor is ``output``; tuples
    and lists number their items (``output0``, ``output1_0``, ...); dicts use their keys."""
    if isinstance(result, dict):
        return [pair for key, value in result.items() for pair in _named_outputs(value, str(key))]
    if isinstance(result, (tuple, list)):
        return [pair for i, value in enumerate(result)
                for pair in _named_outputs(value, f"{prefix}_{i}" if prefix else f"output{i}")]
    if result is None:
        raise TracingError("the traced function returned None; return the tensor(s) to compute")
    return [(prefix or "output", result)]


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """``value_and_grad(f)(*arrays) -> (f(*arrays), df/darg)``; ``argnums`` picks the argument(s) to
    differentiate (a tuple gives a tuple of gradients). ``f`` must return a floating-point scalar."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    executables: dict[tuple, Executable] = {}

    def value_and_grad_fn(*args):
        arrays = [np.asarray(a) for a in args]
        for i in nums:
            if not 0 <= i < len(arrays):
                raise TracingError(f"argnums {argnums}: there is no argument {i} among the {len(arrays)} given")
            if arrays[i].dtype.kind != "f":
                raise DTypeError(f"argnums {argnums}: argument {i} is {arrays[i].dtype}; only floating-point "
                                 "arguments can be differentiated (cast it with .astype(np.float32))")
        signature = (debug.enabled(), *((a.shape, a.dtype.str) for a in arrays))
        executable = executables.get(signature)
        if executable is None:
            executable = executables[signature] = compile(_grad_graph(fn, arrays, nums))
        value, *grads = executable(**{f"arg{i}": a for i, a in enumerate(arrays)})
        return value, grads[0] if isinstance(argnums, int) else tuple(grads)

    return value_and_grad_fn


def _grad_graph(fn: Callable, arrays: list[np.ndarray], nums: tuple[int, ...]) -> Graph:
    graph = Graph()
    with building(graph):
        xs = [_input(f"arg{i}", a) for i, a in enumerate(arrays)]
        value = fn(*xs)
        grads = gradients(value, [xs[i] for i in nums])
        add_output(as_node(value), "value")
        for i, g in zip(nums, grads):
            add_output(as_node(g), gradient_name(f"arg{i}"))
    return graph
