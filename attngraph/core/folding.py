"""Views folded into the steps that read them: the fast loop makes no call of its own for a view.

A reshape of a C-contiguous array, and a slice that the executor leaves a strided view (the backend's ``views``),
compute nothing: each is a new shape and strides over its input's memory. As steps of their own they cost the run
loop an iteration, a call and a slot each: in seq2seq's training step, 43 of its 126 steps. ``folded`` takes them
out of a plan: a step that reads a view calls the view's function on the array viewed (a chain of views, the
functions composed), and each array is freed after the last step that reads it, directly or through a view. The
backend names the ops whose kernels are such views (``Backend.costless``, ``Backend.views``); the executor decides
which nodes fold (not an output, read by at least one step, and for a reshape an input that is not itself a strided
view, which it might copy). An interpreter (the profiler, debug mode) still runs every node as a step of its own.
"""
from __future__ import annotations

from typing import Callable


def folded(plan: list[tuple], views: set[int], keep: set[int]) -> list[tuple]:
    """``plan``'s steps (call, inputs, output, frees) but those whose output slot is in ``views`` (steps of one
    input), the steps reading them calling them on what they view; the frees recomputed, sparing ``keep``."""
    viewing: dict[int, tuple[int, Callable]] = {}      # a folded view's slot -> the slot it views, and how
    steps = []
    for call, inputs, output, _ in plan:
        reads = [viewing.get(slot, (slot, None)) for slot in inputs]
        if isinstance(output, int) and output in views:
            [(source, inner)] = reads
            viewing[output] = source, call if inner is None else _then(inner, call)
            continue
        functions = tuple(function for _, function in reads)
        if any(functions):
            call = _reading(call, functions)
        steps.append((call, tuple(source for source, _ in reads), output))
    last_reader = {slot: k for k, (_, inputs, _) in enumerate(steps) for slot in inputs}
    frees: list[list[int]] = [[] for _ in steps]
    for slot, k in last_reader.items():
        if slot not in keep:
            frees[k].append(slot)
    return [(call, inputs, output, tuple(free)) for (call, inputs, output), free in zip(steps, frees)]


def _then(first: Callable, second: Callable) -> Callable:
    """``second`` of ``first``: a view of a view."""
    return lambda x: second(first(x))


def _reading(call: Callable, views: tuple[Callable | None, ...]) -> Callable:
    """``call`` with each argument whose entry of ``views`` is a function replaced by that function of it."""
    def run(*args):
        return call(*[x if view is None else view(x) for view, x in zip(views, args)])
    return run
