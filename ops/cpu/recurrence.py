"""``scan`` on the CPU: the body and its time loop generated as one Numba function (attngraph/core/prims/recurrence.py).

The body graph (optimized: its elementwise chains already ``fused``) becomes straight-line code inside the loop over
time, each node one statement on arrays named after it, so that a step costs its arithmetic and no dispatch::

    def loop(out, carry0, x0, c0, c1, k0, sizes, reverse):
        rows, steps = carry0.shape[0], x0.shape[1]
        d0, d1, d2, = sizes
        carry = carry0
        for step in range(steps):
            t = steps - 1 - step if reverse else step
            v5 = np.dot(np.ascontiguousarray(carry), np.ascontiguousarray(c0))
            v6 = np.empty((rows, d1, ), np.float32)
            for i0 in range(v6.shape[0]):
                v6_0 = x0[i0, t, d1:]
                v6_1 = v5[i0, 0:]
                for i1 in range(v6.shape[1]):
                    v6[i0, i1] = f6(v6_0[i1], v6_1[i1])
            ...
            put(out, t, 0, v34)
            carry = step_columns(out, t, 0, d1)

Each op is written by one emitter of ``EMITTERS``, from the same definitions its kernel uses: a fused node's scalar
function (ops/cpu/fused.py) in a loop nest over its output, the serial kernels of softmax, the sums and the additive
scores (ops/cpu/additive.py), BLAS through ``np.dot`` for products. A slice of columns (of a sequence's step, of a row) is read where it lies (``Window``).
A body with an op no emitter writes (or a form one does not handle) is not generated: the
body's executable then runs once per step (``Body.run``). Sizes are arguments (``Sizes``), so that bodies differing only
in their sizes share one compiled function. The caller allocates ``out`` (the module's ``width`` gives its columns),
so that blocks of rows can each run their steps into their own rows. The source is kept in a file named by its hash
and numba caches the compiled code beside it, as for fused kernels.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ops.cpu import additive, reduce, softmax
from ops.cpu.fused import conversions, load_source, ops_of, scalar_source
from ops.cpu.matmul import dot_into, with_serial_blas
from ops.cpu.threads import beside_another, in_threads

ROWS = "rows"
ROWS_PER_PART = 32     # a block of fewer rows ran slower per row (BLAS on short products)
SPLIT_MIN_SIZE = 2 ** 16    # elements a loop writes: a GRU over 64 rows, 12 steps, ran 0.85-0.9x as long in blocks


class Unsupported(Exception):
    """A body node that the generator does not write."""


def scan(init, *inputs, body, reverse):
    return body.run("cpu", generate, init, *inputs, reverse=reverse)


def generate(graph):
    """The body ``graph`` and its time loop as a function ``loop(init, *sequences, *constants, reverse)``, or None
    when an op of the body has no emitter. Where each row of the batch is computed from its own rows alone
    (``_rows_apart``) and the loop writes SPLIT_MIN_SIZE elements or more, it runs as blocks of ROWS_PER_PART rows
    (the last one shorter), each block all its steps, the blocks shared out over Numba's threads; a loop run beside
    another (``beside_another``: the two directions of an encoder, each on its own core) runs as one block. The
    blocks are the same on any number of threads, so the results are too: a product's rows are computed by BLAS in
    tiles, and a row's tile, which its block decides, can change its last bit."""
    try:
        source, constants, sizes = _source(graph)
    except Unsupported:
        return None
    loop, width = _compiled(source)
    loop, dtype = with_serial_blas(loop), graph.outputs[0].dtype
    carry, sequences, consts = _arguments(graph)
    apart = _rows_apart(graph)
    sliced = [apart and n.shape[:1] == (ROWS,) for n in (carry, *sequences, *consts)]

    def run(init, *inputs, reverse):
        arrays = [np.ascontiguousarray(a) for a in (init, *inputs)]
        out = np.empty((init.shape[0], inputs[0].shape[1], width(*arrays, *constants, sizes)), dtype)

        rows = init.shape[0]
        block = ROWS_PER_PART if apart and out.size >= SPLIT_MIN_SIZE and not beside_another() else max(rows, 1)

        def blocks(first, end):
            for lo in range(first * block, min(end * block, rows), block):
                hi = min(lo + block, rows)
                loop(out[lo:hi], *(a[lo:hi] if cut else a for a, cut in zip(arrays, sliced)), *constants, sizes,
                     reverse)
        in_threads(blocks, -(-rows // block), work=out.size if block < rows else 0)
        return out
    return run


@functools.cache
def _compiled(source: str):
    """The generated module's loop, compiled, and its ``width`` (plain Python: the output's columns)."""
    module = load_source(source)
    return njit(cache=True, nogil=True, error_model="numpy")(module.loop), module.width


def _rows_apart(graph) -> bool:
    """Whether each row of the batch is computed from its own rows alone, so that a block of rows can run its steps
    without the others: every value computed from the batch holds the rows on its first axis only and every op keeps
    them there, none reducing, reordering or mixing them (a mean over the batch, a transpose, a slice of rows)."""
    varying = {n for n in graph.inputs.values() if any(map(_mentions_rows, n.shape))}
    for node in graph.nodes:
        if node.kind == "call" and any(x in varying for x in node.inputs):
            varying.add(node)
        if node not in varying:
            continue
        axes = node.attrs.get("axes", ())
        if (node.shape[:1] != (ROWS,) or any(map(_mentions_rows, node.shape[1:]))
                or node.op == "fused" and any(r[:1] != (0,) for x, r in zip(node.inputs, node.attrs["reads"])
                                              if x in varying)
                or node.op == "getitem" and node.attrs["index"][:1] != (slice(None),)
                or node.op in ("softmax", "softmax_grad") and len(node.shape) < 2
                or node.op == "sum" and any(a % len(node.inputs[0].shape) == 0 for a in axes)):
            return False
    return True


def _joins_columns(node) -> bool:
    return node.op == "concat" and node.attrs["axis"] in (1, -1) and len(node.shape) == 2


def _written(join, users) -> tuple[list, set]:
    """The values the output row's columns are written from, in order, and the concatenations that are not made:
    the pieces of ``join``, the output's, and of every concatenation among them that nothing else reads, each piece
    written into its columns of ``out`` rather than into a row of its own first (LSTMN's carry, 2,572 of its row's
    6,296 columns, was copied twice a step)."""
    pieces, joins = [], {join}
    for piece in join.inputs:
        if _joins_columns(piece) and all(u is join for u in users[piece]):
            inner, inner_joins = _written(piece, users)
            pieces, joins = pieces + inner, joins | inner_joins
        else:
            pieces.append(piece)
    return pieces, joins


def _arguments(graph) -> tuple:
    """The body's inputs in the order the scan passes them: the carry, the sequences x0, x1, …, the constants c0, …"""
    numbered = sorted((n for n in graph.inputs.values() if n.name != "carry"), key=lambda n: int(n.name[1:]))
    return graph.inputs["carry"], [n for n in numbered if n.name[0] == "x"], [n for n in numbered if n.name[0] == "c"]


def _mentions_rows(dim) -> bool:
    return isinstance(dim, str) and ROWS in dim.split("*")


def _source(graph) -> tuple[str, list, tuple]:
    """The module's source, the values of the body's constants, and the sizes (``Sizes``) the loop takes."""
    inputs = list(graph.inputs.values())
    carry, sequences, consts = _arguments(graph)
    constants = [n for n in graph.nodes if n.op == "constant"]
    sizes = Sizes()
    values = Values(sizes)
    values.arrays.update({carry: "carry", **{c: c.name for c in consts}})
    values.arrays.update((n, f"k{j}") for j, n in enumerate(constants))
    for x in sequences:
        if len(x.shape) == 2:
            values.windows[x] = Window(x.name, "t, ", "0")
        else:
            values.arrays[x] = f"v{x.id}"
            values.lines.append(f"v{x.id} = np.ascontiguousarray({x.name}[:, t])")
    arguments = ["carry0", *(n.name for n in sequences), *(c.name for c in consts),
                 *(f"k{j}" for j in range(len(constants)))]
    helpers = []
    out, users = graph.outputs[0].inputs[0], graph.users()
    direct = _joins_columns(out) and all(u.kind == "output" for u in users[out])
    pieces, joins = _written(out, users) if direct else ([out], set())     # each written into its columns of out
    for node in graph.nodes:
        if node.kind != "call" or node in joins:
            continue
        emitter = EMITTERS.get(node.op)
        if emitter is None:
            raise Unsupported(node.op)
        helpers += emitter(node, values, sizes) or []
    store, start = [], "0"
    for piece in pieces:
        store.append(f"put(out, t, {start}, {values.array(piece)})")
        start = f"{start} + {sizes(piece.shape[1])}"
    step = [*values.lines, *store, f"carry = step_columns(out, t, 0, {sizes(carry.shape[1])})"]
    bindings = _bindings(inputs)
    conversions = _conversions(graph)
    header = [
        "# Generated by ops/cpu/recurrence.py.",
        "import numpy as np",
        "from numba import njit",
        *(["from numpy import " + ", ".join(sorted(conversions))] if conversions else []),
        "from ops.cpu.fused import SCALAR",
        "from ops.cpu.recurrence import (additive_scores_rows, additive_scores_backward_rows, bmm, columns, put, "
        "softmax_rows, softmax_backward_rows, step_columns, sum_rows, sum_middle)",
        *(f"{op} = SCALAR['{op}']" for op in _scalar_ops(graph)),
    ]
    output_width = sizes(out.shape[1])
    unpack = [f"    {', '.join(sizes.names)}, = sizes"] if sizes.names else []
    width = [
        f"def width({', '.join(arguments)}, sizes):",
        *unpack,
        *(f"    {line}" for line in bindings),
        f"    return {output_width}",
    ]
    loop = [
        f"def loop(out, {', '.join(arguments)}, sizes, reverse):",
        "    rows, steps = carry0.shape[0], x0.shape[1]",
        *unpack,
        *(f"    {line}" for line in bindings),
        "    carry = carry0",
        "    for step in range(steps):",
        "        t = steps - 1 - step if reverse else step",
        *(f"        {line}" for line in step),
    ]
    return "\n".join([*header, "", "", *helpers, *width, "", "", *loop, ""]), [n.value for n in constants], \
        tuple(sizes.values)


class Window:
    """Columns of the rows of a C-contiguous array, read where they are: element [i, j] is
    ``base[i, <prefix>lo + j]`` (a sequence's step: prefix ``t, ``). Numba's loops over strided views, and its copies of
    them, do not vectorize; indexing the contiguous base does (a (64, 2616) step of a (64, 13, 2616) sequence copied
    in 21 µs this way, in 68 µs by ``np.ascontiguousarray``)."""

    def __init__(self, base: str, prefix: str, lo: str):
        self.base, self.prefix, self.lo = base, prefix, lo

    def shifted(self, by: str) -> "Window":
        return Window(self.base, self.prefix, by if self.lo == "0" else f"{self.lo} + {by}")

    def row(self, row: str) -> str:
        """Row ``row`` of the window as a 1-D view starting at its first column: indexed by a loop variable alone,
        which numba knows is not negative, its loop vectorizes (``base[i, t, lo + j]`` is wrapped for negative
        indices at each element, and ran 2-7x slower: a GRU gate on (192, 64), 22 µs against 10)."""
        return f"{self.base}[{row}, {self.prefix}{self.lo}:]"


class Values:
    """Where the generated code holds each body node: an array name (``arrays``) or a ``Window`` (``windows``),
    made an array (a fast copy) the first time an op needs one; ``lines`` is the code written so far."""

    def __init__(self, sizes: Sizes):
        self.sizes, self.arrays, self.windows, self.lines = sizes, {}, {}, []

    def array(self, node) -> str:
        """An expression for ``node`` as an array."""
        if node not in self.arrays:
            window, width = self.windows[node], self.sizes(node.shape[1])
            copy = f"step_columns({window.base}, t, {window.lo}, {width})" if window.prefix else \
                f"columns({window.base}, {window.lo}, {width})"
            self.lines.append(f"v{node.id} = {copy}")
            self.arrays[node] = f"v{node.id}"
        return self.arrays[node]

    def window(self, node, view) -> "Window | None":
        """``node`` read through the basic index ``view`` (None: whole) as a window, where it is one: 2-D, and the
        view (if any) takes whole rows and a slice of columns."""
        if len(node.shape) != 2 or not (view is None or _column_slice(view)):
            return None
        window = self.windows.get(node) or (Window(self.arrays[node], "", "0") if node in self.arrays else None)
        return window if window is None or view is None or view[1].start is None else \
            window.shifted(self.sizes(view[1].start))


def _column_slice(index) -> bool:
    """Whether a basic index is ``[:, a:b]`` (whole rows, a slice of columns with no step)."""
    return (len(index) == 2 and index[0] == slice(None) and isinstance(index[1], slice) and index[1].step is None
            and (index[1].start or 0) >= 0 and (index[1].stop is None or index[1].stop >= 0))


def _bindings(inputs) -> list[str]:
    """``S = c0.shape[1]`` for each symbol of the inputs' shapes other than ``rows`` (read from the arrays passed:
    a sequence's axes past the batch are one further, past time)."""
    seen, lines = {ROWS}, []
    for node in inputs:
        argument = "carry0" if node.name == "carry" else node.name
        for axis, dim in enumerate(node.shape):
            if isinstance(dim, str) and dim.isidentifier() and dim not in seen:
                seen.add(dim)
                axis_passed = axis + 1 if node.name.startswith("x") and axis else axis
                lines.append(f"{symbol(dim)} = {argument}.shape[{axis_passed}]")
    return lines


class Sizes:
    """The concrete sizes the source names, each an argument (``d0``, ``d1``, …) rather than a literal: bodies that
    differ only in their sizes (a GRU of 64 or of 128 units) are one source, compiled once."""

    def __init__(self):
        self.values: list[int] = []

    def __call__(self, size) -> str:
        """``size`` (an int, or a product of symbols and an int) as source."""
        if isinstance(size, str):
            return "*".join(self(int(part)) if part.isdigit() else symbol(part) for part in size.split("*"))
        if size not in self.values:
            self.values.append(int(size))
        return f"d{self.values.index(size)}"

    @property
    def names(self) -> list[str]:
        return [f"d{k}" for k in range(len(self.values))]


def symbol(name: str) -> str:
    """A symbolic dimension's name in the source: ``rows``, or prefixed, so that a dimension called ``t`` or ``out``
    cannot overwrite the loop's own names."""
    return name if name == ROWS else f"symbol_{name}"


def _dims(shape, sizes: Sizes) -> str:
    """A shape as Python source: sizes and symbols (and their products) are names bound in the loop."""
    return "(" + "".join(f"{sizes(d)}, " for d in shape) + ")"


def _conversions(graph) -> set[str]:
    return {name for n in graph.nodes if n.op == "fused" for name in conversions(n.attrs["program"])}


def _scalar_ops(graph) -> list[str]:
    return list(dict.fromkeys(op for n in graph.nodes if n.op == "fused" for op in ops_of(n.attrs["program"])))


def _fused(node, values, sizes):
    """The fused node's scalar function (``f<id>``) in a loop nest over its output (as ops/cpu/fused.py's kernel). Each
    input is read C-contiguous: a window in place, anything else copied (numba's loops over strided views do not
    vectorize: a GRU's gates on (192, 64) 206 µs from views, 18 µs from copies)."""
    program, reads, views = node.attrs["program"], node.attrs["reads"], node.attrs["views"]
    name, rank = f"v{node.id}", len(node.shape)
    function = scalar_source(program, len(node.inputs)).replace("def fused(", f"def f{node.id}(", 1)
    index = [f"i{axis}" for axis in range(rank)]
    loads, per_row = [], [[] for _ in range(rank)]
    for i, (x, r, view) in enumerate(zip(node.inputs, reads, views)):
        at = [index[a] if a >= 0 else "0" for a in r]
        window = values.window(x, view) if r else None
        if window is not None:      # its row's view, taken once a row (inside the loop over the row's axis)
            (per_row[r[0]] if r[0] >= 0 else values.lines).append(f"{name}_{i} = {window.row(at[0])}")
            loads.append(f"{name}_{i}[{at[1]}]")
            continue
        source, array = f"{name}_{i}", values.array(x)
        viewed = array if view is None else f"{array}[{_index(view, sizes)}]"
        values.lines.append(f"{source} = {array}[()]" if not r else f"{source} = np.ascontiguousarray({viewed})")
        loads.append(f"{source}[{', '.join(at)}]" if r else source)
    values.lines.append(f"{name} = np.empty({_dims(node.shape, sizes)}, "
                        f"np.{program[-1][2] if program[-1][2] != 'bool' else 'bool_'})")
    for a in range(rank):
        values.lines.append(f"{'    ' * a}for i{a} in range({name}.shape[{a}]):")
        values.lines += [f"{'    ' * (a + 1)}{line}" for line in per_row[a]]
    values.lines.append(f"{'    ' * rank}{name}[{', '.join(index) or '()'}] = f{node.id}({', '.join(loads)})")
    values.arrays[node] = name
    return ['@njit(cache=True, error_model="numpy", inline="always")', function, ""]


def _index(index: tuple, sizes: Sizes) -> str:
    """A basic index as source: slices and integers (a new axis or an ellipsis is not written)."""
    parts = []
    for item in index:
        if isinstance(item, slice):
            parts.append(":".join("" if v is None else _signed(v, sizes) for v in (item.start, item.stop, item.step))
                         .rstrip(":") or ":")
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            parts.append(_signed(int(item), sizes))
        else:
            raise Unsupported(f"index {item!r}")
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def _signed(value: int, sizes: Sizes) -> str:
    return f"-{sizes(-value)}" if value < 0 else sizes(value)


def _matmul(node, values, sizes):
    a, b = node.inputs
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    x, y = (f"np.ascontiguousarray({values.array(v)})" for v in node.inputs)
    if len(b.shape) == 2 and (len(a.shape) == 2 or not ta):
        left = f"{x}.T" if ta else (x if len(a.shape) == 2 else f"{x}.reshape((-1, {sizes(a.shape[-1])}))")
        product = f"np.dot({left}, {y}.T)" if tb else f"np.dot({left}, {y})"
        return _assign(node, values, product + ("" if len(a.shape) == 2 else f".reshape({_dims(node.shape, sizes)})"))
    if len(a.shape) == len(b.shape) >= 3 and a.shape[:-2] == b.shape[:-2]:
        return _assign(node, values, f"bmm({x}.reshape((-1, {sizes(a.shape[-2])}, {sizes(a.shape[-1])})), "
                                     f"{y}.reshape((-1, {sizes(b.shape[-2])}, {sizes(b.shape[-1])})), {ta}, {tb})"
                                     f".reshape({_dims(node.shape, sizes)})")
    raise Unsupported("matmul of these shapes")


def _assign(node, values, expression: str) -> list:
    """``v<id> = expression``: the node held as that array."""
    values.lines.append(f"v{node.id} = {expression}")
    values.arrays[node] = f"v{node.id}"
    return []


def _reshape(node, values, sizes):
    return _assign(node, values, f"np.ascontiguousarray({values.array(node.inputs[0])})"
                                 f".reshape({_dims(node.attrs['shape'], sizes)})")


def _getitem(node, values, sizes):
    """A slice of columns is a window (nothing copied); any other index a NumPy view."""
    window = values.window(node.inputs[0], node.attrs["index"])
    if window is not None:
        values.windows[node] = window
        return []
    return _assign(node, values, f"{values.array(node.inputs[0])}[{_index(node.attrs['index'], sizes)}]")


def _concat(node, values, sizes):
    if len(node.shape) == 2 and node.attrs["axis"] in (1, -1):
        name, start = f"v{node.id}", "0"
        values.lines.append(f"{name} = np.empty({_dims(node.shape, sizes)}, np.{node.dtype.name})")
        for piece in node.inputs:
            values.lines.append(f"put({name}.reshape((rows, 1, -1)), 0, {start}, {values.array(piece)})")
            start = f"{start} + {sizes(piece.shape[1])}"
        values.arrays[node] = name
        return []
    return _assign(node, values, f"np.concatenate(({', '.join(values.array(x) for x in node.inputs)},), "
                                 f"axis={node.attrs['axis']})")


def _softmax(node, values, sizes):
    x = node.inputs[0]
    if node.inputs[1:] and node.inputs[1].shape != x.shape:
        raise Unsupported("softmax with a broadcast mask")
    mask = f"np.ascontiguousarray({values.array(node.inputs[1])})" if len(node.inputs) > 1 else "None"
    causal = node.attrs.get("causal", False)
    lowest = f"np.{x.dtype.name}({float(np.finfo(x.dtype).min)!r})"
    return _assign(node, values, f"softmax_rows(np.ascontiguousarray({values.array(x)}), {mask}, {causal}, "
                                 f"{sizes(x.shape[-2]) if causal else 1}, {lowest}).reshape({_dims(x.shape, sizes)})")


def _softmax_grad(node, values, sizes):
    g, y = (values.array(x) for x in node.inputs)
    return _assign(node, values, f"softmax_backward_rows(np.ascontiguousarray({g}), np.ascontiguousarray({y}))"
                                 f".reshape({_dims(node.shape, sizes)})")


def _sum(node, values, sizes):
    x, axes = node.inputs[0], sorted(node.attrs["axes"])
    if not axes or axes != list(range(axes[0], axes[-1] + 1)) or x.dtype.kind != "f":
        raise Unsupported("sum over these axes")
    before, over, after = (_product(x.shape[:axes[0]], sizes), _product(x.shape[axes[0]:axes[-1] + 1], sizes),
                           _product(x.shape[axes[-1] + 1:], sizes))
    flat = f"np.ascontiguousarray({values.array(x)})"
    total = (f"sum_rows({flat}.reshape(({before}, {over})))" if axes[-1] == len(x.shape) - 1 else
             f"sum_middle({flat}.ravel(), {before}, {over}, {after}, ({over})*({after}), {after})")
    return _assign(node, values, f"{total}.reshape({_dims(node.shape, sizes)})")


def _additive_scores(node, values, sizes):
    a, b, v = (f"np.ascontiguousarray({values.array(x)})" for x in node.inputs)
    return _assign(node, values, f"additive_scores_rows({a}, {b}, {v}).reshape({_dims(node.shape, sizes)})")


def _additive_scores_grad(node, values, sizes):
    g, a, b, v = (f"np.ascontiguousarray({values.array(x)})" for x in node.inputs)
    return _assign(node, values, f"additive_scores_backward_rows({g}, {a}, {b}, {v})"
                                 f".reshape({_dims(node.shape, sizes)})")


def _product(dims, sizes: Sizes) -> str:
    return "*".join(sizes(d) for d in dims) or "1"


EMITTERS = {"fused": _fused, "matmul": _matmul, "reshape": _reshape, "getitem": _getitem, "concat": _concat,
            "softmax": _softmax, "softmax_grad": _softmax_grad, "sum": _sum,
            "additive_scores": _additive_scores, "additive_scores_grad": _additive_scores_grad}


_softmax_serial, _softmax_backward_serial = softmax._softmax_rows.serial, softmax._softmax_backward_rows.serial
sum_rows, sum_middle = reduce._sum_rows.serial, reduce._sum_middle.serial
_additive_scores_serial, _additive_scores_backward_serial = additive._scores.serial, additive._backward.serial


@njit(cache=True)
def step_columns(x, t, lo, width):
    """x[:, t, lo:lo + width] of a C-contiguous (rows, T, W) x, copied row by row (contiguous, vectorized)."""
    out = np.empty((x.shape[0], width), x.dtype)
    for i in range(x.shape[0]):
        source, target = x[i, t, lo:lo + width], out[i]
        for j in range(width):
            target[j] = source[j]
    return out


@njit(cache=True)
def columns(x, lo, width):
    """x[:, lo:lo + width] of a C-contiguous (rows, W) x, copied row by row."""
    return step_columns(x.reshape((x.shape[0], 1, x.shape[1])), 0, lo, width)


@njit(cache=True)
def put(out, t, lo, piece):
    """out[:, t, lo:lo + w] = piece (rows, w), both C-contiguous, row by row."""
    width = piece.shape[1]
    for i in range(piece.shape[0]):
        source, target = piece[i], out[i, t, lo:lo + width]
        for j in range(width):
            target[j] = source[j]


@njit(cache=True)
def bmm(a, b, transpose_a, transpose_b):
    """a[i] @ b[i] (each transposed if asked) for the (N, ·, ·) stacks a and b: BLAS writing each product into its
    place and reading a transposed matrix where it lies (ops/cpu/matmul.py ``dot_into``, as the batched products outside
    the loops), no copy of either."""
    m = a.shape[2] if transpose_a else a.shape[1]
    n = b.shape[1] if transpose_b else b.shape[2]
    out = np.empty((a.shape[0], m, n), a.dtype)
    for i in range(a.shape[0]):
        dot_into(a[i], b[i], out[i], transpose_a, transpose_b)
    return out


@njit(cache=True)
def softmax_rows(x, mask, causal, tq, lowest):
    """Softmax over the last axis of x (…, T), masked where ``mask`` (x's shape, or None) is False: ops/cpu/softmax.py's
    row kernel, serial."""
    rows = x.reshape((-1, x.shape[-1]))
    index = np.arange(rows.shape[0])
    if mask is None:
        return _softmax_serial(rows, np.ones((1, rows.shape[1]), np.bool_), index * 0, causal, tq,
                                            lowest)
    return _softmax_serial(rows, mask.reshape(rows.shape), index, causal, tq, lowest)


@njit(cache=True)
def softmax_backward_rows(g, y):
    return _softmax_backward_serial(g.reshape((-1, g.shape[-1])), y.reshape((-1, y.shape[-1])))


@njit(cache=True)
def additive_scores_rows(a, b, v):
    """ops/cpu/additive.py's scores of a (…, Tq, H) against b (…, Tk, H), serial, as (N, Tq, Tk)."""
    return _additive_scores_serial(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]), v)


@njit(cache=True)
def additive_scores_backward_rows(g, a, b, v):
    """ops/cpu/additive.py's stacked gradient, serial, as (N, 3, max(Tq, Tk), H)."""
    a3, b3 = a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:])
    return _additive_scores_backward_serial(g.reshape((a3.shape[0], a3.shape[1], b3.shape[1])), a3, b3, v)


KERNELS = {"scan": scan}
