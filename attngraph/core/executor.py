"""Execution: a graph compiled into a prepared schedule of kernel calls for one device.

Compiling resolves, once, which kernel each node calls, which slot holds each value and after which step
an intermediate is dead (its slot is cleared, so its buffer is freed). Running binds the symbolic
dimensions from the inputs, checks them, picks the plan for those sizes (cached) and runs a tight loop.

Memory planning. The schedule is a depth-first order from the outputs: first those of the forward pass (a
loss, which frees the activations only it reads), then the gradients, last to first. A gradient graph lists
its gradients in the order of the parameters, the forward order, so last to first is the order of the
backward pass: each layer's weight gradients are computed as soon as the backward pass reaches the layer,
and the activations and output gradients they read die there rather than at the end: a lower peak, and
products that read inputs still in cache. Dead buffers go back to the allocator, which hands their memory to
the next allocation (glibc's malloc is set to keep it rather than return it to the system:
ops/cpu/memory.py). There is no pool handing dead buffers to later kernels' ``out=`` (buffers waiting in a
pool are memory the allocating kernels cannot have), and no elementwise result is written over a dying input
(Numba's ufunc loops lose their vectorization when an operand aliases the output). A slice whose readers all take
strided views (the backend's ``reads_views``: on the CPU products, sums, concatenations and scatters; or reshapes
whose readers all do) is left a view of its array (the backend's ``views``) instead of being copied to a
contiguous one. Such a slice, and a reshape of a contiguous array, are folded into the steps that read them
(core/folding.py): the fast loop makes no call for a view.

Independent long steps run together: the backend names the ops (``concurrent``: the CPU's time loops) two of which,
when neither depends on the other, the schedule places side by side (core/together.py) and the fast loop runs at
once (``together``), their outputs in two adjacent slots that the pair's step fills as one slice. An interpreter
(the profiler, debug mode) runs the same schedule one node at a time.

Outputs are the caller's: an output that shares memory with what the executor borrowed for the call (an input,
a parameter, a constant, or a view of one, such as a parameter reshaped) is copied, so that writing into it
changes neither the model nor the executable; outputs the kernels allocated are returned without a copy. On
"cpu" each output's owner (followed through NumPy's ``base`` and Numba's MemInfo ``parent``) is compared with
the borrowed arrays' owners, a set built per call; on "cuda" ``__call__`` copies every output to the host, and
``run_on_device`` returns what the kernels returned. The arrays are checked rather than the ops declared as
views because whether a kernel returns a view is its own business (a reshape does, a getitem may, a Numba
kernel can). The check costs a small fraction of a step.

Each call checks each parameter's shape and dtype against the graph's (a changed one raises ShapeError or
DTypeError naming it) and takes a call number under a lock, so that threads sharing an executable draw
distinct dropout masks.

Devices: "cpu" runs the Numba CPU kernels on NumPy arrays. "cuda" runs the kernels of ops/cuda on device
arrays: the inputs are copied to the GPU once per call, constants once per executable, intermediates stay on
the GPU between kernels, and only the outputs are copied back (``run_on_device`` keeps them there too).
Parameters are read where they live: a parameter moved to the GPU (``Module.to("cuda")``,
``Parameter.to("cuda")``) is used in place, so an optimizer that updates it on the GPU changes what every
compiled graph computes, as it does on the CPU; a parameter left on the host is copied on every call.
"""
from __future__ import annotations

import collections
import functools
import itertools
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from ..errors import BindingError, DTypeError, NonFiniteError, ShapeError
from . import debug
from .device import backend
from .dims import format_shape, resolve_shape
from .folding import folded
from .graph import DTYPES, Graph, Node, graph_method, is_gradient_output, unsupported_dtype
from .interpreter import Checking, Interpreter, out_of_range
from .tracing import UPDATE_PREFIX
from .passes import optimize
from .together import paired

@graph_method("compile")
def compile(graph: Graph, device: str = "cpu", seed: int | None = None) -> "Executable":
    """A callable running ``graph`` on ``device``: ``graph.compile()(x=...)``; ``seed`` seeds its dropout masks
    (see ``Executable``). The graph is optimized first (``core.passes``: folding, CSE, fusion, dead code), unless
    debug mode is on, which runs the graph as traced. The one place that decides: every entry point
    (``graph.compile``, ``value_and_grad``, the Trainer, gradcheck) makes its executables here."""
    return Executable(graph if debug.enabled() else optimize(graph), device, seed)


class Step(NamedTuple):
    kernel: Callable
    inputs: tuple[int, ...]
    output: int
    attrs: dict
    frees: tuple[int, ...]


class Executable:
    """``Executable(graph, "cpu")(**inputs)`` returns the graph's output, or a tuple of its outputs, as NumPy
    arrays; on "cuda" too (``run_on_device`` leaves them on the GPU).

    A graph that uses randomness (dropout) has an ``rng_seed`` input; when it is not given, call ``k`` (counted
    from 0 in ``calls``, one number per call whichever thread makes it) uses ``(h(seed) + k) mod 2**64`` as an
    int64, ``h`` the first 64-bit word of ``np.random.SeedSequence(seed mod 2**64)``: successive calls draw
    fresh masks, two seeds draw unrelated sequences, and the same seed repeats the same sequence. Without a
    ``seed``, executables take 0, 1, 2, ... in the order they are made, so that two of them (say one per
    thread, or one per input signature) do not repeat each other's masks.

    ``interpreter``: None (the fast loop), or an ``Interpreter`` (core/interpreter.py) of the executable's device
    that runs every later call's steps through its ``run_node`` hook, e.g. the profiler; debug mode runs them
    through ``Checking``.
    """

    def __init__(self, graph: Graph, device: str = "cpu", seed: int | None = None):
        self._backend = backend(device)
        self.graph, self.device, self.calls = graph, device, 0
        self.seed = _next_seed() if seed is None else seed
        self._stream = int(np.random.SeedSequence(self.seed % 2 ** 64).generate_state(1, np.uint64)[0])
        self._lock = threading.Lock()
        order, self._firsts = paired(graph.topological_order(_schedule_roots(graph.outputs)), self._backend.concurrent)
        slot = {node: i for i, node in enumerate(order)}
        self._size = len(order)
        self._inputs = [(name, node, slot.get(node)) for name, node in graph.inputs.items()]
        self._constants = [(slot[n], self._backend.put(n.value)) for n in order if n.op == "constant"]
        self._constant_owners = frozenset(id(_owner(n.value)) for n in order if n.op == "constant")
        self._parameters = [(slot[n], n) for n in order if n.op == "parameter"]
        self._outputs = tuple(slot[n.inputs[0]] for n in graph.outputs)
        self._updates = [(i, n.value) for i, n in enumerate(graph.outputs) if n.name.startswith(UPDATE_PREFIX)]
        self._returned = [i for i, n in enumerate(graph.outputs) if not n.name.startswith(UPDATE_PREFIX)]
        self._nodes = [n for n in order if n.kind == "call"]
        self._producers = {slot[n]: n for n in self._nodes}
        self._folds: set[int] = set()
        self._steps = self._schedule(order, slot)
        self._plans: dict[tuple, tuple[list[tuple], list[tuple]]] = {}
        self._helpers: set = set()
        self.interpreter: Interpreter | None = None

    def _schedule(self, order: list[Node], slot: dict[Node, int]) -> list[Step]:
        last_use, readers = {}, collections.defaultdict(list)
        for node in order:
            for x in node.inputs:
                last_use[x] = node
                readers[x].append(node)
        keep = set(self._outputs)
        steps = []
        kernels = Interpreter(self.device)

        def reads_views(node: Node) -> bool:
            """Whether every reader of ``node`` takes strided views: one of the backend's ``reads_views``, or a
            reshape (a view of a view where NumPy can make one, else a copy) whose readers all do."""
            return all(reader.op in self._backend.reads_views or reader.op == "reshape" and reads_views(reader)
                       for reader in readers[node])

        strided = set()
        for node in self._nodes:
            kernel = kernels.kernel(node)           # resolved once here rather than on every call
            plain = kernel is self._backend.kernels[node.op]     # not one specialized for float16 (core/half.py)
            view = plain and node.op in self._backend.views and reads_views(node)
            if view:
                kernel = self._backend.views[node.op]
            if view or node.op == "reshape" and node.inputs[0] in strided:
                strided.add(node)
            costless = plain and node.op in self._backend.costless and node.inputs[0] not in strided
            if (view or costless) and readers[node] and slot[node] not in keep:
                self._folds.add(slot[node])
            dead = {slot[x] for x in node.inputs if last_use[x] is node and slot[x] not in keep}
            steps.append(Step(kernel, tuple(slot[x] for x in node.inputs), slot[node], node.attrs, tuple(dead)))
        return steps

    @property
    def kernel_calls(self) -> int:
        """The kernels a call runs: one per node, but the views folded into their readers (core/folding.py)."""
        return len(self._steps) - len(self._folds)

    def __repr__(self) -> str:
        return (f"Executable({self.device!r}, {self.kernel_calls} kernel calls, "
                f"inputs {[n for n, _, _ in self._inputs]}, outputs {self.output_names})")

    @property
    def output_names(self) -> list[str]:
        """The names of the outputs a call returns: the graph's, but the buffer updates it writes back."""
        return [self.graph.output_names[i] for i in self._returned]

    def __call__(self, **feeds) -> Any:
        """The outputs for these inputs, as NumPy arrays."""
        outputs = tuple(map(self._backend.get, self._run(feeds)))
        return outputs[0] if len(outputs) == 1 else outputs

    def run_on_device(self, **feeds) -> Any:
        """The outputs left where they were computed: device arrays on "cuda" (gradients for an optimizer that
        updates the parameters there, or inputs of another executable), NumPy arrays on "cpu"."""
        outputs = self._run(feeds)
        return outputs[0] if len(outputs) == 1 else outputs

    def _run(self, feeds: dict) -> tuple:
        env: list[Any] = [None] * self._size
        with self._lock:
            number, self.calls = self.calls, self.calls + 1
        bindings, borrowed = self._bind(feeds, env, number)
        for index, value in self._constants:
            env[index] = value
        for index, node in self._parameters:
            data = node.value.data
            if data.shape != node.shape or data.dtype != node.dtype:
                raise _changed(node, data)
            env[index] = self._backend.put(data)
            borrowed.append(env[index])
        steps, fast = self._plan(bindings)
        interpreter = self.interpreter or (Checking(self.device) if debug.enabled() else None)
        if interpreter is not None:
            interpreter.run(steps, self._nodes, env, bindings)
        else:
            try:
                for call, inputs, output, frees in fast:
                    env[output] = call(*[env[i] for i in inputs])
                    for i in frees:
                        env[i] = None
            except IndexError as error:
                raise out_of_range(error, self._producers[_first_slot(output)]) from error
        if self._helpers and all(helper.finished for helper in self._helpers):
            self._helpers, self._plans = set(), {}      # plans that no longer wait for a helper
        outputs = tuple(env[i] for i in self._outputs)
        outputs = self._unshared(outputs, borrowed) if self.device == "cpu" else outputs
        for i, buffer in self._updates:         # a module's buffer updated while tracing: written back, not returned
            if buffer.device == self.device:
                buffer.data = outputs[i]
            else:
                buffer.assign(self._backend.get(outputs[i]))
        return outputs if not self._updates else tuple(outputs[i] for i in self._returned)

    def _unshared(self, outputs: tuple, borrowed: list) -> tuple:
        """The outputs, each copied if its memory belongs to a borrowed array or a constant."""
        owners = self._constant_owners.union(map(id, map(_owner, borrowed)))
        return tuple(out.copy() if id(_owner(out)) in owners else out for out in outputs)

    def _bind(self, feeds: dict, env: list, number: int) -> tuple[dict[str, int], list]:
        """Check the feeds against the inputs, bind symbolic dimensions, and put the arrays in their slots (the
        ``rng_seed`` of call ``number`` when it is not fed). Returns the bindings and the arrays put."""
        unknown = set(feeds) - {name for name, _, _ in self._inputs}
        if unknown:
            raise BindingError(f"unexpected input(s) {sorted(unknown)}; the graph's inputs are "
                               f"{[name for name, _, _ in self._inputs]}")
        bindings: dict[str, int] = {}
        borrowed = []
        for name, node, index in self._inputs:
            if name not in feeds and name == "rng_seed":
                value = np.asarray((self._stream + number) % 2 ** 64, np.uint64).view(np.int64)
            elif name not in feeds:
                raise BindingError(f"missing input {name!r} of shape {format_shape(node.shape)} {node.dtype}")
            else:
                value = _checked(name, node, feeds[name], bindings)
            if debug.enabled() and value.dtype.kind == "f" and not np.isfinite(value).all():
                raise NonFiniteError(f"input {name!r} holds NaN or Inf: {node.describe()}")
            if index is not None:
                env[index] = self._backend.put(value)
                borrowed.append(env[index])
        return bindings, borrowed

    def _plan(self, bindings: dict[str, int]) -> tuple[list[tuple], list[tuple]]:
        """The steps for these sizes as (call, inputs, output, frees), ``call`` the kernel with its attributes
        bound (shapes resolved): what the run loop needs and no more; one per node (for an interpreter), and as the
        fast loop runs them: each pair of nodes that run together (core/together.py) one step, the views folded into
        their readers (core/folding.py). Cached per binding.
        A kernel that a helper process is compiling (``_compiled_ahead``) is called through the helper, which waits
        for it first; once the helpers are done, the plans are made again without them."""
        key = tuple(sorted(bindings.items()))
        plan = self._plans.get(key)
        if plan is None:
            plan = []
            resolved = [{k: resolve_shape(v, bindings) if k == "shape" else v for k, v in step.attrs.items()}
                        for step in self._steps]
            for step, attrs, compiling in zip(self._steps, resolved, self._compiled_ahead(resolved, bindings)):
                call = functools.partial(step.kernel, **attrs) if attrs else step.kernel
                if compiling is not None:
                    helper, number = compiling
                    call = functools.partial(helper.then, number, call)
                    self._helpers.add(helper)
                plan.append((call, step.inputs, step.output, step.frees))
            if len(self._plans) >= 64:
                self._plans.clear()
            fast = self._together(plan)
            plan = self._plans[key] = plan, folded(fast, self._folds, set(self._outputs)) if self._folds else fast
        return plan

    def _together(self, plan: list[tuple]) -> list[tuple]:
        """``plan`` with each pair's two steps (adjacent, their outputs in adjacent slots) as one: the backend's
        ``together`` calls both, and its two results fill the slice of the two slots."""
        fast, pending = [], None
        for node, step in zip(self._nodes, plan):
            if node in self._firsts:
                pending = step
                continue
            if pending is not None:
                (first, inputs, output, frees), (second, more, beside, freed) = pending, step
                assert beside == output + 1, "a pair's nodes are adjacent in the order, so are their slots"
                step = (functools.partial(self._backend.together, first, second, len(inputs)), inputs + more,
                        slice(output, output + 2), frees + freed)
                pending = None
            fast.append(step)
        return fast

    def _compiled_ahead(self, attrs: list[dict], bindings: dict[str, int]) -> list:
        """For each step, the helper process compiling its kernel and the job's number there, or None
        (``ops.cpu.ahead``: on the CPU, costly kernels not in numba's cache yet)."""
        if self.device != "cpu":
            return [None] * len(attrs)
        from ops.cpu import ahead
        return ahead.start([ahead.job(node.op, node_attrs, [(resolve_shape(x.shape, bindings), x.dtype)
                                                            for x in node.inputs])
                            for node, node_attrs in zip(self._nodes, attrs)])


_seeds = itertools.count()
_seeds_lock = threading.Lock()


def _next_seed() -> int:
    """The seed of an executable made without one: 0, 1, 2, ... in the order they are made."""
    with _seeds_lock:
        return next(_seeds)


def _first_slot(output: int | slice) -> int:
    """The slot a step writes, the first of a pair's."""
    return output.start if isinstance(output, slice) else output


def _owner(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory: ``a`` itself, or the array it views, followed through NumPy's
    ``base`` and through the MemInfo of an array a Numba kernel returned (whose ``parent`` is the NumPy array it
    views, None for memory Numba allocated)."""
    base = a.base
    while base is not None:
        base = getattr(base, "parent", base)
        if not isinstance(base, np.ndarray):
            break
        a, base = base, base.base
    return a


def _changed(node: Node, data) -> Exception:
    """The error for a parameter whose shape or dtype is no longer the one the graph was traced with."""
    error = ShapeError if data.shape != node.shape else DTypeError
    return error(f"parameter {node.name!r} is now {format_shape(data.shape)} {data.dtype}, but the graph was traced "
                 f"with {format_shape(node.shape)} {node.dtype}; trace and compile again after changing a "
                 "parameter's shape or dtype")


def _schedule_roots(outputs: list[Node]) -> list[Node]:
    """The outputs in the order the schedule computes them (see the module docstring): forward values in
    order, then gradients (``grad:`` outputs, or nodes autodiff emitted) last to first."""
    gradients = [node for node in outputs if is_gradient_output(node)]
    return [node for node in outputs if node not in gradients] + gradients[::-1]


def _narrowed(name: str, array: np.ndarray, want: np.dtype) -> np.ndarray:
    """An integer feed as the input's integer dtype, refused when a value does not fit it (an int32 input fed
    2**32 + 1 would read row 1; a uint8 one fed -1, 255)."""
    if not np.can_cast(array.dtype, want) and array.size:
        info, low, high = np.iinfo(want), array.min(), array.max()
        if low < info.min or high > info.max:
            raise BindingError(f"input {name!r} is {want}, whose range [{info.min}, {info.max}] does not hold "
                               f"the value {low if low < info.min else high} fed to it")
    return array.astype(want)


def _checked(name: str, node: Node, value, bindings: dict[str, int]) -> np.ndarray:
    """The fed value as an array of the input's dtype, its symbolic dimensions bound into ``bindings``."""
    array = np.asarray(value)
    want = node.dtype
    if array.dtype != want:
        if array.dtype not in DTYPES:
            raise unsupported_dtype(array.dtype, f"the value fed to input {name!r} ({want})")
        if want.kind in "iu" and array.dtype.kind in "iu":
            array = _narrowed(name, array, want)
        else:
            raise BindingError(f"input {name!r} must be {want}, got {array.dtype}"
                               + (f"; pass it as .astype(np.{want})" if want.kind == array.dtype.kind == "f" else ""))
    if array.ndim != len(node.shape):
        raise BindingError(f"input {name!r} must have shape {format_shape(node.shape)}, got {array.shape}")
    for axis, (dim, size) in enumerate(zip(node.shape, array.shape)):
        if isinstance(dim, int):
            if dim != size:
                raise BindingError(f"input {name!r} must have shape {format_shape(node.shape)}, got {array.shape} "
                                   f"(axis {axis})")
        elif bindings.setdefault(dim, size) != size:
            raise BindingError(f"dimension {dim} is {bindings[dim]} elsewhere but {size} in input {name!r} "
                               f"(shape {array.shape} against {format_shape(node.shape)})")
    return np.require(array, requirements="C")
