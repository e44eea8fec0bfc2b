"""The gradient of a ``scan`` (core/prims/recurrence.py), planned on the body's own VJP, as JAX's partial evaluation
of ``scan`` plans it.

The body's VJP graph V (``Gradient.vjp``) takes a step's inputs (carry_{t−1}, x_t, c) and a_t, the cotangent of its
output row, and computes ∂carry_{t−1}, ∂x_t and ∂c of Σ out_t·a_t. Its nodes are of three kinds: the constant ones
(computed from c alone), the forward ones (from carry_{t−1} or x_t, not a_t) and the backward ones (from a_t). With
g the gradient of the scan's output (B, T, P), the gradient runs in three parts:

1. forward, extended (``wide``): the step emits, after its P columns, the forward values the backward nodes read —
   the residuals (a GRU's gates, the carry it started from; not what a cheap elementwise op makes of them, which is
   recomputed); passes/scans.py makes the user's loop this one, so the
   forward runs once;
2. a loop in the other direction (``reverse``) carries ∂carry: with a_t = g_t + [∂carry_t; 0], step t computes what
   ∂carry_{t−1} needs, reading the residuals instead of recomputing the forward, and emits the backward values that
   part 3 reads (a GRU's gate gradients); its constants are computed once, before it (but a transposed weight that
   products read, which they read in place). g is rarely dense: autodiff makes it a sum of pieces scattered into
   zeros, the gradient of what the model read of the output (``out[:, :, C:]``, a state's half; ``out[:, -1, :C]``,
   the final state a classifier or a bridge reads). Such a g is read as its pieces (``output_pieces``): each piece
   read at every step is a sequence of the loop, the final state's gradient enters as its first ∂carry, zeros fill
   the rest of a_t; g itself, (B, T, P), is neither made nor read;
3. everything else — ∂x_t, and ∂c whose sums over the steps are the weight gradients — once, for all B·T rows
   together: one large product per weight instead of T small ones, as cuDNN computes a GRU's weight gradients (the
   sums over t taken in another order than the unrolled graph's: equal up to rounding). A batched constant (B, …) is
   repeated over T only when this part reads it, and its gradient is summed back over T; but where part 2 computes
   that gradient anyway (additive attention's keys: the gradient of tanh's input, which ∂carry needs too), part 2
   sums it in its carry instead (``summed_grads``), and this part takes the sum from the loop's last carry.

A row's value computed from other rows of its step (a mean over the batch inside the step: ``mixed_rows``) is
computed by a loop, never by part 3, whose rows are all the steps at once; where it cannot pass, the gradient is
refused rather than wrong. A value passes between the parts as columns of a row, so only one of concrete size past
the batch, of the scan's dtype, and not a layout of another (a reshape, slice or transpose: its readers recompute it,
often absorbing it) passes; any other is recomputed where it is needed.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import tensor as F
from .body import ROWS, Body, packed, replay, rows_as
from ..errors import AttnGraphError
from .dims import symbols
from .graph import Graph, Node
from .primitive import lookup
from .tracing import add_node, add_output, building

LAYOUT = {"reshape", "getitem", "broadcast_to", "transpose"}    # recomputed by their readers, rather than stored
READ, COMPUTE = True, False


class Gradient:
    """The plan of a body's gradient: V, the extended forward body, the reverse body and what passes between them."""

    def __init__(self, body: Body):
        from .autodiff import gradients
        self.body, graph = body, Graph()
        dtype = body.graph.outputs[0].dtype
        with building(graph):
            self.inputs = [add_node("input", (), {}, x.shape, x.dtype, name=x.name) for x in body.inputs]
            self.a = add_node("input", (), {}, (ROWS, body.width), dtype, name="a")
            self.out = F.as_node(replay([body.graph.outputs[0].inputs[0]],
                                        dict(zip(body.inputs, map(F.Tensor, self.inputs))))[0])
            floats = [x for x in self.inputs if x.dtype.kind == "f"]
            grads = dict(zip(floats, map(F.as_node, gradients(F.sum(F.Tensor(self.out) * F.Tensor(self.a)),
                                                                   list(map(F.Tensor, floats))))))
        self.vjp, self.users = graph, graph.users()
        self.grads = [grads.get(x) for x in self.inputs]           # ∂carry, ∂x_i …, ∂c_j … (None: not a float)
        self.dtype, self.carry = dtype, self.inputs[0]
        self.xs = self.inputs[1:1 + body.sequences]
        self.consts = self.inputs[1 + body.sequences:]
        self.forward, self.backward = set(self.inputs[:1 + body.sequences]), {self.a}
        for node in graph.nodes:
            if node.kind == "call" and any(x in self.backward for x in node.inputs):
                self.backward.add(node)
            elif node.kind == "call" and any(x in self.forward for x in node.inputs):
                self.forward.add(node)
        self.mixed = mixed_rows(graph, {self.a, *self.inputs[:1 + body.sequences],
                                        *(c for c, flag in zip(self.consts, body.batched) if flag)})
        self.stored, self.frontier = [], []         # filled by the walks; this first one only finds ∂carry's nodes
        for_carry = walk([self.grads[0]], self._loop_reads).computed
        self.summed_grads = [d for d, flag in zip(self.grads[1 + body.sequences:], body.batched)
                             if flag and self._summable(d, for_carry)]
        loop_roots = [self.grads[0], *self.summed_grads]
        while True:             # the loop also computes the mixed values the pass over B·T rows reads
            self.stored, self.frontier = [], []
            in_loop = walk(loop_roots, self._loop_reads)
            self.after = walk([d for d in self.grads[1:] if d is not None and d not in self.summed_grads],
                              lambda node: self._after_reads(node, in_loop.computed))
            missing = [n for n in self.after.reads if n in self.mixed and n in self.backward and n not in self.frontier]
            if not missing:
                break
            loop_roots += missing
        self.stored, self.frontier = side_by_side(self.stored, graph), side_by_side(self.frontier, graph)
        self.loop_reads = in_loop.reads
        self.loop_constants = [n for n in graph.nodes if n in in_loop.reads and self.constant(n)]
        self.loop_xs = [i for i, x in enumerate(self.xs) if x in in_loop.reads]
        self.wide = self._wide()
        self._reverse_bodies: dict[tuple, Body] = {}

    def _summable(self, grad: Node | None, for_carry: set) -> bool:
        """Whether a batched constant's gradient at one step, ``grad``, is summed over the steps by the reverse loop
        itself, in its carry: a value the loop computes for ∂carry anyway (a decoder's additive attention keys, whose
        gradient is the query's too), of each row alone, of concrete size and the scan's dtype. It is then neither
        emitted at every step nor summed after the loop. A gradient the loop does not compute (the attention values',
        an outer product of the weights and the context's gradient) is left to the pass over B·T rows, which reads
        narrower columns than the sum would carry."""
        return (grad in for_carry and grad not in self.mixed and grad.dtype == self.dtype
                and grad.shape[:1] == (ROWS,) and all(isinstance(d, int) for d in grad.shape[1:]))

    @property
    def summed_size(self) -> int:
        """The columns of the reverse loop's carry past ∂carry: the running sums of ``summed_grads``."""
        return sum(int(np.prod(d.shape[1:])) for d in self.summed_grads)

    def constant(self, node: Node) -> bool:
        return node not in self.forward and node not in self.backward and node.op != "constant"

    def passable(self, node: Node) -> bool:
        """Whether ``node`` can pass from one part to another as columns of a row."""
        return (node.op not in LAYOUT and node.dtype == self.dtype and node.shape[:1] == (ROWS,)
                and all(isinstance(d, int) for d in node.shape[1:]))

    def _loop_reads(self, node: Node) -> bool:
        if node is self.a or node in self.xs or self.constant(node) and not self._absorbed(node):
            return READ
        return self._store(node) if node in self.forward else COMPUTE

    def _absorbed(self, node: Node) -> bool:
        """A transposed matrix (a weight) read by products alone: left in the loop's body, whose products read it in
        place (``fuse``, BLAS's transposed operand), rather than copied before the loop."""
        return node.op == "transpose" and len(node.shape) == 2 and all(u.op == "matmul" for u in self.users[node])

    def _after_reads(self, node: Node, in_loop: set) -> bool:
        if node is self.a or node in self.inputs[1:] or node in self.stored:
            return READ
        if node in self.mixed:      # computed from several rows of one step: only a loop computes it right
            if node.op in LAYOUT:
                return COMPUTE      # from the mixed value it lays out
            if not self.passable(node):
                raise AttnGraphError(f"the gradient of this scan is not supported: its step mixes the examples of "
                                     f"the batch ({node.describe()} in scope '{node.scope}' reads a value computed "
                                     f"over several rows) in a value of symbolic or non-float shape")
            if node in self.forward:
                if node not in self.stored:
                    self.stored.append(node)
                return READ
            if node in in_loop:
                self.frontier.append(node)
            return READ
        if node in in_loop and node in self.backward and self.passable(node):
            self.frontier.append(node)
            return READ
        return self._store(node) if node in self.forward else COMPUTE

    def _store(self, node: Node) -> bool:
        """A forward value read by a backward one: the forward loop emits it when it can and it costs more to compute
        than to store (a product, a tanh; not 1 − z), else it is recomputed. A slice of columns is stored itself,
        rather than the value it is cut from (a GRU's W_hn·h + b_hn, not all three gates' products: 64 columns of a
        row, not 192)."""
        if not (self.passable(node) or self._column_slice(node)) or cheap(node):
            return COMPUTE
        if node not in self.stored:
            self.stored.append(node)
        return READ

    def _column_slice(self, node: Node) -> bool:
        """Whether ``node`` is a slice of columns [:, a:b] of a 2-D value of the scan's dtype and concrete width."""
        index = node.attrs.get("index", ())
        return (node.op == "getitem" and len(node.shape) == 2 and len(index) == 2 and index[0] == slice(None)
                and isinstance(index[1], slice) and index[1].step in (None, 1) and node.dtype == self.dtype
                and node.shape[0] == ROWS and isinstance(node.shape[1], int))

    def _wide(self) -> Body:
        """The body emitting, after its own row, the stored residuals (or the body itself when none is stored)."""
        if not self.stored:
            return self.body
        graph = Graph()
        with building(graph):
            inputs = [add_node("input", (), {}, x.shape, x.dtype, name=x.name) for x in self.inputs]
            values = replay([self.out, *self.stored], dict(zip(self.inputs, map(F.Tensor, inputs))))
            add_output(F.as_node(packed(values)), "out")
        return Body(graph, self.body.sequences, self.body.batched, base=self.body)

    def reverse_body(self, columns: tuple[slice, ...]) -> Body:
        """The reverse loop's body for an output gradient read as pieces on ``columns`` (``output_pieces``): carry
        ∂carry_t and the running sums of ``summed_grads``; sequences the wide row, the pieces and the x_t it reads;
        constants ``loop_constants`` and, where a_t has columns no piece covers past the carry, zeros (rows, Z) for
        them (a constant, as the generated loops make no array of their own but a node's result). Emits
        ∂carry_{t−1}, the sums with this step's terms added, then the ``frontier``. Made once for each layout of
        pieces."""
        key = tuple((c.start, c.stop) for c in columns)
        if key not in self._reverse_bodies:
            self._reverse_bodies[key] = self._reverse(columns)
        return self._reverse_bodies[key]

    def _reverse(self, columns: tuple[slice, ...]) -> Body:
        graph, body = Graph(), self.body
        size = body.carry_size
        with building(graph):
            carry = add_node("input", (), {}, (ROWS, size + self.summed_size), self.dtype, name="carry")
            later = F.index(F.Tensor(carry), (slice(None), slice(0, size))) if self.summed_grads else F.Tensor(carry)
            sums = list(unpacked(F.Tensor(carry), self.summed_grads, size, ROWS, set(self.summed_grads)).values())
            row = add_node("input", (), {}, (ROWS, self.wide.width), self.dtype, name="x0")
            pieces = [add_node("input", (), {}, (ROWS, c.stop - c.start), self.dtype, name=f"x{1 + k}")
                      for k, c in enumerate(columns)]
            xs = [add_node("input", (), {}, self.xs[i].shape, self.xs[i].dtype, name=f"x{1 + len(pieces) + k}")
                  for k, i in enumerate(self.loop_xs)]
            consts = [add_node("input", (), {}, c.shape, c.dtype, name=f"c{j}")
                      for j, c in enumerate(self.loop_constants)]
            width = zeros_width(columns, body.carry_size, body.width)
            zeros = [add_node("input", (), {}, (ROWS, width), self.dtype, name=f"c{len(consts)}")] if width else []
            env = {**self.residuals(F.Tensor(row), ROWS, self.loop_reads),
                   **dict(zip(self.loop_constants, map(F.Tensor, consts))),
                   **{self.xs[i]: F.Tensor(x) for i, x in zip(self.loop_xs, xs)}}
            if self.a in self.loop_reads:
                env[self.a] = assembled(later, list(map(F.Tensor, pieces)), columns, body.width,
                                        lambda k: F.index(F.Tensor(zeros[0]), (slice(None), slice(0, k))))
            d_carry, *values = replay([self.grads[0], *self.summed_grads, *self.frontier], env)
            steps = values[:len(sums)]
            add_output(F.as_node(packed([d_carry, *(s + d for s, d in zip(sums, steps)), *values[len(sums):]])),
                       "out")
        return Body(graph, 1 + len(pieces) + len(xs),
                    [c.shape[:1] == (ROWS,) for c in [*self.loop_constants, *zeros]])

    def residuals(self, row, rows, read: set) -> dict:
        """The stored values in ``read``, from the wide rows ``row`` (rows, width) of a batch of ``rows``."""
        return unpacked(row, self.stored, self.body.width, rows, read)

    def emit(self, g, init, inputs: list, reverse: bool) -> tuple:
        """The gradients of Σ g ∘ scan(init, *inputs) w.r.t. init and each input (None for one not a float)."""
        body = self.body
        seqs, consts = inputs[:body.sequences], inputs[body.sequences:]
        batch, length = F.as_node(init).shape[0], F.as_node(g).shape[1]
        wide = F.emit("scan", init, *inputs, body=self.wide, reverse=reverse)
        outer = dict(zip(self.consts, consts))
        loop_constants = replay(self.loop_constants, dict(outer), rows=batch)
        size = body.carry_size
        finals, pieces = output_pieces(g, size, reverse)
        columns = tuple(c for _, c in pieces)
        at_last = [F.emit("scatter_slice", value, shape=F.as_node(init).shape, index=(slice(None), c))
                   for value, c in finals]
        first = sum(at_last[1:], at_last[0]) if at_last else F.zeros_like(init)      # ∂carry of the last step
        start = [F.concat([first, F.zeros((batch, self.summed_size), dtype=self.dtype)], axis=1)] \
            if self.summed_grads else [first]
        width = zeros_width(columns, size, body.width)
        zeros = [F.zeros((batch, width), dtype=self.dtype)] if width else []
        sent = F.emit("scan", *start, wide, *(v for v, _ in pieces), *(seqs[i] for i in self.loop_xs),
                      *loop_constants, *zeros, body=self.reverse_body(columns), reverse=not reverse)
        final = F.index(sent, (slice(None), -1 if reverse else 0))                # the reverse loop's last carry
        d_init = F.index(final, (slice(None), slice(0, size)))
        sums = unpacked(final, self.summed_grads, size, batch, set(self.summed_grads))
        flat_wide, flat_sent = flat(wide), flat(sent)
        rows = F.as_node(flat_wide).shape[0]
        env = {**self.residuals(flat_wide, rows, self.after.reads),
               **unpacked(flat_sent, self.frontier, size + self.summed_size, rows, self.after.reads),
               **{x: flat(s) for x, s in zip(self.xs, seqs) if x in self.after.reads}}
        for node, c, batched in zip(self.consts, consts, body.batched):
            if node in self.after.reads:
                env[node] = flat(repeated(c, length)) if batched else c
        if self.a in self.after.reads:
            last = F.expand_dims(first, 1)
            carries = F.index(sent, (slice(None), slice(None), slice(0, size)))
            later = F.concat([last, carries[:, :-1]] if reverse else [carries[:, 1:], last], axis=1)   # ∂carry_t
            env[self.a] = flat(assembled(later, [v for v, _ in pieces], columns, body.width,
                                         lambda k: F.zeros((batch, length, k), dtype=self.dtype)))
        wanted = [(i, d) for i, d in enumerate(self.grads[1:]) if d is not None and d not in sums]
        values = dict(zip((i for i, _ in wanted), replay([d for _, d in wanted], env, rows=rows)))
        grads = []
        for i, x in enumerate(inputs):
            d = values.get(i)
            if self.grads[1 + i] in sums:
                d = sums[self.grads[1 + i]]
            elif d is not None and (i < body.sequences or body.batched[i - body.sequences]):
                d = F.reshape(d, (batch, length, *F.as_node(x).shape[2 if i < body.sequences else 1:]))
                d = d if i < body.sequences else F.sum(d, axis=1)
            grads.append(d)
        return (d_init, *grads)


def output_pieces(g, carry_size: int, reverse: bool) -> tuple[list, list]:
    """The gradient g (B, T, P) of a scan's output as (finals, pieces) where g is a sum of values scattered into
    zeros: ``finals`` the (v (B, k), columns) of the last step (T − 1, or 0 when the loop runs in ``reverse``) within
    its carry, the VJP of ``out[:, -1, :k]`` (indexed in one go or in several); ``pieces`` the (v (B, T, w), columns)
    of every step, ``out[:, :, i:j]``'s, in the order of their columns, which none shares. Else ([], [(g, all P)]):
    g read whole (``read_whole``)."""
    node = F.as_node(g)
    finals, pieces = [], []
    for term in summands(node):
        placed = scattered(term, node.shape, carry_size, reverse)
        if placed is None:
            return read_whole(g)
        kind, value, columns = placed
        (finals if kind == "final" else pieces).append((F.Tensor(value), columns))
    pieces.sort(key=lambda piece: piece[1].start)
    if any(a.stop > b.start for (_, a), (_, b) in zip(pieces, pieces[1:])):
        return read_whole(g)
    return finals, pieces


def read_whole(g) -> tuple[list, list]:
    """g (B, T, P) as one piece on all its columns, and no final."""
    node = F.as_node(g)
    return [], [(F.Tensor(node), slice(0, node.shape[2]))]


def summands(node: Node) -> list[Node]:
    """The terms of ``node`` as a sum (of adds of its shape), or [node]."""
    if node.op == "add" and all(x.shape == node.shape for x in node.inputs):
        return [term for x in node.inputs for term in summands(x)]
    return [node]


def scattered(node: Node, shape: tuple, carry_size: int, reverse: bool):
    """("final" or "steps", v, columns) where ``node`` of ``shape`` (B, T, P) is zeros but for v scattered into the
    last step's carry columns, or into columns of every step; else None."""
    length = shape[1]
    region = [(0, n) for n in shape]            # where the value scattered lies, per axis of g: [start, stop)
    axes = [0, 1, 2]                            # the axes of g that the value's axes stand for
    if node.op != "scatter_slice":
        return None
    while node.op == "scatter_slice":
        index = tuple(node.attrs["index"])
        if len(index) > len(axes):
            return None
        kept = []
        for axis, item in zip(axes, index + (slice(None),) * (len(axes) - len(index))):
            start, stop = region[axis]
            known = isinstance(start, int) and isinstance(stop, int)
            if item == slice(None):
                kept.append(axis)
            elif isinstance(item, slice) and known and item.step in (None, 1):
                first, end, _ = item.indices(stop - start)
                region[axis] = (start + first, start + max(first, end))
                kept.append(axis)
            elif isinstance(item, bool) or not isinstance(item, int):
                return None
            elif item == -1 and region[axis] == (0, length) and not known:
                region[axis] = ("last",) * 2
            elif known and -(stop - start) <= item < stop - start:
                region[axis] = (start + item % (stop - start),) * 2
            elif not known and isinstance(start, int) and item >= 0:      # on an axis of symbolic length
                region[axis] = (start + item,) * 2
            else:
                return None
        axes, node = kept, node.inputs[0]
    rows, steps, (start, stop) = region
    if rows != (0, shape[0]) or not isinstance(stop, int) or not 0 <= start < stop:
        return None
    if axes == [0, 1, 2] and steps == (0, length):
        return "steps", node, slice(start, stop)
    last = 0 if reverse else length - 1 if isinstance(length, int) else "last"
    if axes == [0, 2] and steps[0] == last and stop <= carry_size:
        return "final", node, slice(start, stop)
    return None


def segments(columns: tuple[slice, ...], carry_size: int, width: int) -> list[tuple[int, int, int | None]]:
    """The columns [0, width) of a_t cut where the carry or a piece on ``columns`` starts or ends: (lo, hi, the
    piece's number or None)."""
    cuts = sorted({0, carry_size, width, *(c.start for c in columns), *(c.stop for c in columns)})
    return [(lo, hi, next((k for k, c in enumerate(columns) if c.start <= lo and hi <= c.stop), None))
            for lo, hi in zip(cuts, cuts[1:])]


def zeros_width(columns: tuple[slice, ...], carry_size: int, width: int) -> int:
    """The widest run of a_t's columns past the carry that no piece covers (0: none)."""
    return max([hi - lo for lo, hi, k in segments(columns, carry_size, width) if k is None and lo >= carry_size],
               default=0)


def assembled(later, pieces: list, columns: tuple[slice, ...], width: int, zeros: Callable):
    """a_t (…, P): ∂carry_t (``later``, …, C) on the first C columns plus each piece on its ``columns``, and
    ``zeros(k)`` (…, k) on a run of k columns that neither covers."""
    size = F.as_node(later).shape[-1]
    parts = []
    for lo, hi, k in segments(columns, size, width):
        terms = [columns_of(later, lo, hi)] if hi <= size else []
        if k is not None:
            terms.append(columns_of(pieces[k], lo - columns[k].start, hi - columns[k].start))
        parts.append(terms[0] + terms[1] if len(terms) == 2 else terms[0] if terms else zeros(hi - lo))
    return parts[0] if len(parts) == 1 else F.concat(parts, axis=-1)


def columns_of(x, lo: int, hi: int):
    """x's columns [lo, hi) (x itself when they are all of them)."""
    return x if (lo, hi) == (0, F.as_node(x).shape[-1]) else F.index(x, (Ellipsis, slice(lo, hi)))


def mixed_rows(graph: Graph, per_row: set) -> set:
    """The per-row nodes (rows, …) computed from a value that reduces over the rows of ``per_row`` values (a mean
    over the batch: a value of no ``rows`` dimension): for a row, they read the other rows of its step."""
    varying, reduced, mixed = set(per_row), set(), set()
    for node in graph.nodes:
        if node.kind != "call" or lookup(node.op).shape_only or not any(x in varying for x in node.inputs):
            continue            # a size read from a shape is no value of the rows
        varying.add(node)
        if not any(isinstance(d, str) and ROWS in symbols(d) for d in node.shape):
            reduced.add(node)
        elif any(x in reduced or x in mixed for x in node.inputs):
            mixed.add(node)
    return mixed


class Walk:
    """What a part computes (``computed``) and what it reads from elsewhere (``reads``), from its outputs back."""

    def __init__(self):
        self.computed: set[Node] = set()
        self.reads: set[Node] = set()


def walk(roots: list[Node], reads: Callable[[Node], bool]) -> Walk:
    """The nodes the ``roots`` need, back to those ``reads`` says are read rather than computed."""
    seen, stack = Walk(), list(roots)
    while stack:
        node = stack.pop()
        if node in seen.computed or node in seen.reads:
            continue
        if reads(node):
            seen.reads.add(node)
        else:
            seen.computed.add(node)
            stack.extend(node.inputs)
    return seen


def cheap(node: Node) -> bool:
    """An elementwise op of at most 2 FLOPs an element (x + y, a·x, where): recomputed rather than stored."""
    if node.kind != "call":
        return False
    prim = lookup(node.op)
    return prim.elementwise and prim.flops((1,), *((1,) for _ in node.inputs), **node.attrs) <= 2


def side_by_side(values: list[Node], graph: Graph) -> list[Node]:
    """``values`` (passed as columns of a row, in this order) reordered so that those scattered into the column slices
    of rows of one width (a GRU's gate gradients, into the gradient of its input projection) lie side by side in the
    order of their slices, where the first of them was: their columns are then one slice, which ``simplify`` takes in
    place of the concatenation the scatters become (copied before: 0.5 ms for each of HAN's word-level loops)."""
    starts: dict = {}
    for node in graph.nodes:
        index = node.attrs.get("index")
        if node.op == "scatter_slice" and node.inputs[0] in values and len(node.shape) == 2 \
                and index[0] == slice(None) and isinstance(index[1], slice) and index[1].step in (None, 1) \
                and (index[1].start or 0) >= 0:
            starts.setdefault(node.shape[1], {}).setdefault(node.inputs[0], index[1].start or 0)
    order = list(values)
    for placed in starts.values():
        if len(placed) > 1 and len(set(placed.values())) == len(placed):
            joined = sorted(placed, key=placed.get)
            at = min(map(order.index, joined))
            order = [*order[:at], *joined, *(n for n in order[at:] if n not in joined)]
    return order


def unpacked(row, nodes: list[Node], start: int, rows, read: set) -> dict:
    """Of ``nodes``, laid out in this order in the columns of ``row`` from ``start`` on, the values of those in
    ``read``, for a batch of ``rows``."""
    values = {}
    for node in nodes:
        size = int(np.prod(node.shape[1:]))
        if node in read:
            values[node] = F.reshape(F.index(row, (slice(None), slice(start, start + size))),
                                     rows_as(node.shape, rows))
        start += size
    return values


def flat(x):
    """(B, T, …) → (B·T, …): every time step a row of one batch."""
    return F.reshape(x, (-1, *F.as_node(x).shape[2:]))


def repeated(c, length):
    """A batched constant (B, …) as (B, T, …), the same at every step."""
    return F.broadcast_to(F.expand_dims(c, 1), (F.as_node(c).shape[0], length, *F.as_node(c).shape[1:]))


def gradient(body: Body) -> Gradient:
    """``body``'s gradient plan, made on first use and kept with it."""
    if body.gradient is None:
        body.gradient = Gradient(body)
    return body.gradient
