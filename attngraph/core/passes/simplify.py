"""Algebraic simplification: data movement chains composed, broadcasts left to the kernels, identities dropped.

  transpose(transpose(x, p), q)  →  transpose(x, (p[q[0]], p[q[1]], ...)), or x when that is the identity
  reshape(reshape(x, s), t)      →  reshape(x, t), or x when t is x's shape
  f(broadcast_to(x), y)          →  f(x, y)   for an elementwise f whose result keeps its shape
  x · 1, 1 · x, x / 1, x + 0, 0 + x, x − 0  →  x   (a constant 1 or 0 of any shape that x's covers)
  Σᵢ scatter_slice(gᵢ, x[..., aᵢ:bᵢ])  →  concat(g₁, g₂, ...)   when the slices tile their axis, and
                                         scatter_slice(concat(g₁, g₂, ...), x[..., a₁:bₙ]) when they lie side by side
  scatter_slice(scatter_slice(g, x[i]), y[j])  →  scatter_slice(g, y[k])   (as x[i][j] → x[k])
  Σₜ scatter_slice(gₜ, x[:, t])          →  concat(g₀[:, None], g₁[:, None], ...)   (every t, any order)
  x[:, 0], scatter_slice(g, x[:, 0])     →  reshape   when the index takes all of x (an axis of size 1)
  reshape(transpose(x, p)) that inserts axes of size 1  →  transpose(reshape(x), p')
  concat(transpose(x₁, p), transpose(x₂, p), ...)      →  transpose(concat(x₁, x₂, ...), p), and
  concat(x[0:i], x[i:j], ...) or of x[k] reshaped      →  x, its sliced axis moved to the concatenation's,
                                                          when the slices tile x along the axis in order
  x[index₁][index₂]                                    →  x[index]   (slices of step 1 and integers)
  concat(…, x[…, i:j], x[…, j:k], …)                   →  concat(…, x[…, i:k], …)   (adjacent slices joined)
  a @ b contracting an axis of size 1   →  a column times a row, broadcast: an elementwise product to fuse
  Σₜ aₜᵀ gₜ   →  concat(aₜ)ᵀ concat(gₜ)      (a weight used at every time step: one product over all steps' rows)
  Σₜ Σ_rows gₜ  →  Σ_rows concat(gₜ)         (its bias)
  Σ_k a[…, k, :, 1] · b[…, k, 1, :]  →  a[…, k, :]ᵀ @ b[…, k, :]   (a sum of outer products, each operand full or 1
                                       along each axis, the reshape between them splitting axes: a product)

Autodiff makes all of these: the gradient of ``x @ kᵀ`` with respect to k transposes the transposed k
back; split and merged attention heads transpose twice in a row; the gradient of a sum is its output
gradient broadcast to the input's shape, which a loss Σ f(x) ∘ g then multiplies by g — a full-size copy
of the constant 1 and a multiplication by it, a large share of a layer norm's training step; the gradient
of a ``split`` (a GRU's three gates, an LSTM's four) is one zero-filled array per part, each written into
and added to the others, where one concatenation of the parts' gradients does; so is that of a recurrent
layer's time steps ``x[:, t]``, T arrays of x's full size each. The gradient of heads picked out of one
transposed projection (nanoGPT's ``qkv[i]`` of (3, B, H, T, d)) stacks the heads' gradients back and
transposes them: once the attention reads its heads in place, the stacking is the gradient node's own value,
and its transposes compose into one. The gradient of a time loop's batched constant (an attention's keys, read
at every step) is the outer product αₜ ⊗ ∂cₜ of every step's rows, reshaped to (B, T, …) and summed over T: a
(B, T, K, D) array written and read again, where the product of αᵀ (B, K, T) and ∂c (B, T, D) makes the sum.
Each transpose or broadcast is a copy (moved past a reshape or a concatenation only when nothing else reads it,
so that it is never made twice); a reshape is free but still a step of the schedule.
"""
import math
from functools import reduce

import numpy as np

from ..dims import broadcast, multiply
from ..graph import Graph
from ..primitive import lookup
from .rewrite import rewrite

NEUTRAL = {("mul", 0): 1, ("mul", 1): 1, ("div", 1): 1, ("add", 0): 0, ("add", 1): 0, ("sub", 1): 0}
"""(op, operand slot that may be the constant) → the constant that leaves the other operand unchanged"""


def simplify(graph: Graph) -> Graph:
    """The rules applied over the graph twice: a rule may match what another made in the first round (the
    concatenation of transposed parts that the tiling rule makes)."""
    return _simplified(_simplified(graph))


def _simplified(graph: Graph) -> Graph:
    live = set(graph.topological_order())
    users = {node: [u for u in readers if u in live] for node, readers in graph.users().items()}

    def private(node) -> bool:
        """Whether every input of ``node`` is read by it alone: moving a copy past it makes none twice."""
        return all(users[x] == [node] for x in node.inputs)

    def chain_root(node) -> bool:
        """Whether ``node`` is an addition that no private addition reads: the top of a sum of terms."""
        return node.op == "add" and not any(u.op == "add" and private(u) for u in users[node])

    def terms(node) -> list:
        """The terms an addition sums through the additions that only it reads, left to right."""
        return [t for x in node.inputs for t in (terms(x) if x.op == "add" and users[x] == [node] else [x])]

    def visit(node, inputs, copy):
        if chain_root(node) and len(node.inputs) == 2:
            stacked = _stacked_terms(node, [env[t] for t in terms(node)], copy)
            if stacked is not None:
                return stacked
        if node.op == "transpose":
            (x,) = inputs
            perm = tuple(int(p) for p in node.attrs["perm"])
            if x.op == "transpose":
                perm, x = tuple(int(x.attrs["perm"][p]) for p in perm), x.inputs[0]
            return x if perm == tuple(range(len(perm))) else copy(node, (x,), attrs={"perm": perm})
        if node.op == "reshape":
            (x,) = inputs
            if x.op == "reshape":
                x = x.inputs[0]
            units = _inserted_units(x.shape, node.shape) if x.op == "transpose" and private(node) else None
            if units is not None:
                y = x.inputs[0]
                raised = copy(node, (y,), attrs={"shape": y.shape + (1,) * len(units)}, shape=y.shape + (1,) * len(units))
                new, old = iter(range(len(y.shape), len(raised.shape))), iter(x.attrs["perm"])
                return copy(node, (raised,), op="transpose",
                            attrs={"perm": tuple(next(new) if axis in units else next(old) for axis in range(len(node.shape)))})
            return x if x.shape == node.shape else copy(node, (x,))
        if node.op == "concat" and private(node) and all(x.op == "transpose" for x in inputs) \
                and len({tuple(x.attrs["perm"]) for x in inputs}) == 1:
            perm, axis = tuple(inputs[0].attrs["perm"]), node.attrs["axis"]
            parts = tuple(x.inputs[0] for x in inputs)
            whole = _tiled(parts, perm[axis])
            if whole is not None:                   # the parts were x's slices: x, its sliced axis moved
                x, moved = whole
                perm = tuple(moved[p] for p in perm)
                return x if perm == tuple(range(len(perm))) else copy(node, (x,), op="transpose", attrs={"perm": perm})
            joined = copy(node, parts, attrs={"axis": perm[axis]},
                          shape=tuple(node.shape[perm.index(a)] for a in range(len(perm))))
            return copy(node, (joined,), op="transpose", attrs={"perm": perm})
        if node.op == "getitem" and inputs[0].op == "getitem":
            index = _composed(inputs[0].attrs["index"], node.attrs["index"], inputs[0].inputs[0].shape)
            if index is not None:
                return copy(node, inputs[0].inputs, attrs={"index": index})
        if node.op == "concat":
            parts = _joined(node.attrs["axis"] % len(node.shape), inputs, copy)
            if len(parts) < len(inputs):
                return parts[0] if len(parts) == 1 else copy(node, parts)
        if node.op in ("getitem", "scatter_slice") and _whole(node.attrs["index"], inputs[0].shape if
                                                               node.op == "getitem" else node.shape):
            return copy(node, inputs, op="reshape", attrs={"shape": node.shape})
        if node.op == "scatter_slice" and inputs[0].op == "scatter_slice":
            index = _composed(node.attrs["index"], inputs[0].attrs["index"], node.shape)
            if index is not None:
                return copy(node, inputs[0].inputs, attrs={"shape": node.shape, "index": index})
        if node.op == "add":
            parts = _tiling(node, inputs)
            whole = parts is not None and parts[1:3] == (0, node.shape[parts[0]])
            if whole or parts is not None and chain_root(node):    # side by side: once the whole sum is seen
                axis, start, stop, grads = parts
                grads = [g if len(g.shape) == len(node.shape) else
                         copy(node, (g,), op="reshape", attrs={"shape": shape}, shape=shape)
                         for g in grads for shape in [g.shape[:axis] + (1,) + g.shape[axis:]]]
                if whole:
                    return copy(node, grads, op="concat", attrs={"axis": axis})
                joined = copy(node, grads, op="concat", attrs={"axis": axis},
                              shape=node.shape[:axis] + (stop - start,) + node.shape[axis + 1:])
                return copy(node, (joined,), op="scatter_slice", attrs={
                    "shape": node.shape, "index": (slice(None),) * axis + (slice(start, stop),)})
        if node.op == "matmul" and _contracted(node, inputs[0]) == 1:
            return _outer_product(node, inputs, copy)
        if node.op == "sum":
            product = _summed_outer_products(node, inputs[0], copy)
            if product is not None:
                return product
        if node.kind == "call" and lookup(node.op).elementwise:
            inputs = _unbroadcast(node, inputs)
            if len(inputs) == 2:
                for slot in (0, 1):
                    other = inputs[1 - slot]
                    if _is_constant(inputs[slot], NEUTRAL.get((node.op, slot))) and other.shape == node.shape \
                            and other.dtype == node.dtype:
                        return other
        return copy(node, inputs)

    env = {}
    return rewrite(graph, visit, env)


def _stacked_terms(node, terms: list, copy):
    """The sum of ``terms`` with the products aᵀg of 2-D operands stacked into one product, and the row sums
    Σ_rows g of 2-D gs into one sum; None when neither has two terms to stack."""
    products = [t for t in terms if t.op == "matmul" and t.attrs.get("transpose_a") and not t.attrs.get("transpose_b")
                and all(len(x.shape) == 2 for x in t.inputs) and t.shape == node.shape]
    row_sums = [t for t in terms if t.op == "sum" and t.attrs["axes"] == (0,) and not t.attrs["keepdims"]
                and len(t.inputs[0].shape) == 2 and t.shape == node.shape]
    stacks = [group for group in (products, row_sums) if len(group) > 1 and _stackable(group)]
    if not stacks:
        return None

    def rows(parts):
        """The 2-D parts one above the other: a concatenation, through a new leading axis where the row count is
        symbolic (a batch "B": concat takes concrete axes only)."""
        dtype, shape = parts[0].dtype, parts[0].shape
        if all(isinstance(x.shape[0], int) for x in parts):
            return copy(node, tuple(parts), op="concat", attrs={"axis": 0}, dtype=dtype,
                        shape=(sum(x.shape[0] for x in parts),) + shape[1:])
        raised = tuple(copy(node, (x,), op="reshape", attrs={"shape": (1,) + shape}, shape=(1,) + shape, dtype=dtype)
                       for x in parts)
        stacked = copy(node, raised, op="concat", attrs={"axis": 0}, shape=(len(parts),) + shape, dtype=dtype)
        flat = (multiply(len(parts), shape[0]),) + shape[1:]
        return copy(node, (stacked,), op="reshape", attrs={"shape": flat}, shape=flat, dtype=dtype)
    kept = [t for t in terms if not any(t in group for group in stacks)]
    for group in stacks:
        operands = tuple(rows([t.inputs[i] for t in group]) for i in range(len(group[0].inputs)))
        kept.append(copy(group[0], operands))
    return reduce(lambda a, b: copy(node, (a, b)), kept)


def _stackable(group) -> bool:
    """Whether the terms' operands stack by rows: concrete row counts, or the same shapes (a symbolic batch)."""
    operands = list(zip(*(t.inputs for t in group)))
    return all(isinstance(x.shape[0], int) for xs in operands for x in xs) or \
        all(len({x.shape for x in xs}) == 1 for xs in operands)


def _summed_outer_products(node, x, copy):
    """``sum(x, axes)`` where x is a product a · b (through a reshape that splits axes), each operand of size 1 or
    full along each axis and both full along the summed ones, as one product: the axes where both are full and
    kept are its batch, a's others its rows, b's its columns, the summed ones contracted. Only for outer products
    (rows and columns both), whose x is larger than a and b together (a dot product along rows stays a fused
    product and a sum), where the kept axes come in that order (batch, a's, b's) and each operand reads in place
    (its contracted axes right before or after its own); None otherwise. BLAS sums in another order than the
    sum: equal up to rounding."""
    product = x.inputs[0] if x.op == "reshape" else x
    if product.op != "mul" or product.dtype.kind != "f" or any(y.dtype != product.dtype for y in product.inputs) \
            or not all(isinstance(n, int) for n in (*product.shape, *x.shape)):
        return None
    shapes = [_split(y.shape, product.shape, x.shape) for y in product.inputs]
    if None in shapes:
        return None
    summed = {axis % len(x.shape) for axis in node.attrs["axes"]}
    full = [[shape[i] == n != 1 for i, n in enumerate(x.shape)] for shape in shapes]
    kind = "".join("k" if i in summed else "n" if a and b else "a" if a else "b" if b else "1"
                   for i, (a, b) in enumerate(zip(*full)))
    kept = kind.replace("k", "").replace("1", "")
    if not summed or "a" not in kind or "b" not in kind or any(not (full[0][i] and full[1][i]) for i in summed) \
            or kept != "".join(sorted(kept, key="nab".index)):
        return None
    size = {letter: math.prod(n for n, k in zip(x.shape, kind) if k == letter) for letter in "ab"}
    size["k"] = math.prod(x.shape[i] for i in summed)
    batch = tuple(n for n, k in zip(x.shape, kind) if k == "n")

    def matrix(y, own: str):
        """y as (batch…, own, k) (first: True) or (batch…, k, own), where its axes lie so; None where they do not."""
        body = "".join(k for k in kind if k in own + "k")
        first = body == own * body.count(own) + "k" * body.count("k")
        if not first and body != "k" * body.count("k") + own * body.count(own):
            return None
        if "".join(k for k in kind if k in "n" + own + "k") != "n" * len(batch) + body:
            return None
        shape = batch + ((size[own], size["k"]) if first else (size["k"], size[own]))
        return copy(node, (y,), op="reshape", attrs={"shape": shape}, shape=shape, dtype=y.dtype), first
    a, b = matrix(product.inputs[0], "a"), matrix(product.inputs[1], "b")
    if a is None or b is None:
        return None
    (a, a_first), (b, b_first) = a, b
    shape = batch + (size["a"], size["b"])
    out = copy(node, (a, b), op="matmul", attrs={"transpose_a": not a_first, "transpose_b": b_first}, shape=shape)
    return out if out.shape == node.shape else copy(node, (out,), op="reshape", attrs={"shape": node.shape})


def _split(shape: tuple, before: tuple, after: tuple) -> tuple | None:
    """The shape of an operand ``shape`` broadcast to ``before`` once ``before`` is reshaped to ``after`` by splitting
    axes (and adding or dropping ones): an axis where it is full splits into full ones, one where it is 1 into ones.
    None where the reshape merges axes."""
    shape = (1,) * (len(before) - len(shape)) + tuple(shape)
    out, i, j = [], 0, 0
    while i < len(before) or j < len(after):
        if i < len(before) and j < len(after) and before[i] == after[j]:
            out.append(after[j] if shape[i] != 1 else 1)
            i, j = i + 1, j + 1
        elif i < len(before) and before[i] == 1:
            i += 1
        elif j < len(after) and after[j] == 1:
            out.append(1)
            j += 1
        elif i < len(before):
            run = j
            while run < len(after) and math.prod(after[j:run + 1]) < before[i]:
                run += 1
            if run == len(after) or math.prod(after[j:run + 1]) != before[i]:
                return None
            out.extend(after[j:run + 1] if shape[i] != 1 else (1,) * (run + 1 - j))
            i, j = i + 1, run + 1
        else:
            return None
    return tuple(out)


def _contracted(matmul, a):
    """The size of the axis a product contracts (a's last, or its second last when a is transposed)."""
    return a.shape[-2] if matmul.attrs.get("transpose_a") else a.shape[-1]


def _outer_product(node, inputs, copy):
    """``a @ b`` over a contracted axis of size 1 as ``a (…, m, 1) * b (…, 1, n)``: a transposed operand's
    size-1 axis moves by a reshape (no copy), and the product is exact either way (one term per element)."""
    a, b = inputs
    column = a.shape[:-2] + (a.shape[-1] if node.attrs.get("transpose_a") else a.shape[-2], 1)
    row = b.shape[:-2] + (1, b.shape[-2] if node.attrs.get("transpose_b") else b.shape[-1])
    a, b = (x if x.shape == shape else copy(node, (x,), op="reshape", attrs={"shape": shape}, shape=shape)
            for x, shape in ((a, column), (b, row)))
    return copy(node, (a, b), op="mul", attrs={})


def _inserted_units(before: tuple, after: tuple) -> list[int] | None:
    """The axes of ``after`` that are axes of size 1 inserted into ``before`` when ``after`` is ``before`` with some
    inserted (a reshape that moves no data past a transpose), else None."""
    if len(after) <= len(before):
        return None
    units, matched = [], 0
    for axis, size in enumerate(after):
        if matched < len(before) and size == before[matched]:
            matched += 1
        elif size == 1:
            units.append(axis)
        else:
            return None
    return units if matched == len(before) else None


def _tiled(parts: tuple, axis: int) -> tuple | None:
    """(x, the permutation moving x's sliced axis to ``axis``) when the parts, in order, are x's slices along one
    axis covering it: each ``x[..., i:j, ...]`` (that axis is ``axis``), or ``x[..., i, ...]`` reshaped to have an
    axis of size 1 at ``axis``; else None."""
    sources, start = set(), 0
    for part in parts:
        sliced = part.inputs[0] if part.op == "reshape" and part.inputs[0].op == "getitem" else part
        if sliced.op != "getitem" or None in sliced.attrs["index"]:
            return None
        x, index = sliced.inputs[0], sliced.attrs["index"]
        cut = [i for i, item in enumerate(index) if item != slice(None)]
        if len(cut) != 1 or isinstance(x.shape[cut[0]], str):
            return None
        item = index[cut[0]]
        begin, end, step = item.indices(x.shape[cut[0]]) if isinstance(item, slice) else (item, item + 1, 1)
        kept = x.shape[:cut[0]] + x.shape[cut[0] + 1:]
        shape = x.shape[:cut[0]] + (end - begin,) + x.shape[cut[0] + 1:] if isinstance(item, slice) else \
            kept[:axis] + (1,) + kept[axis:]
        if begin != start or step != 1 or part.shape != shape or isinstance(item, slice) and cut[0] != axis:
            return None
        sources.add((x, cut[0]))
        start = end
    if len(sources) != 1:
        return None
    ((x, sliced),) = sources
    moved = [a for a in range(len(x.shape)) if a != sliced]
    return (x, tuple(moved[:axis] + [sliced] + moved[axis:])) if start == x.shape[sliced] else None


def _composed(inner: tuple, outer: tuple, shape: tuple) -> tuple | None:
    """The index of ``x[inner][outer]`` taken at once, x of ``shape``, when both hold only slices of step 1 and
    integers (a cut of a symbolic axis only whole); None otherwise."""
    if any(item is None or item is Ellipsis for item in (*inner, *outer)):
        return None
    composed, rest = [], list(outer)
    for axis, dim in enumerate(shape):
        first = inner[axis] if axis < len(inner) else slice(None)
        if not isinstance(first, slice):
            composed.append(first)          # an integer: the axis is gone before ``outer``
            continue
        then = rest.pop(0) if rest else slice(None)
        if first == slice(None) or then == slice(None):
            composed.append(then if first == slice(None) else first)
            continue
        if isinstance(dim, str):
            return None
        begin, end, step = first.indices(dim)
        length = max(end - begin, 0)
        if step != 1:
            return None
        if isinstance(then, slice):
            start, stop, step = then.indices(length)
            if step != 1:
                return None
            composed.append(slice(begin + start, begin + max(stop, start)))
        elif -length <= then < length:
            composed.append(begin + then % length)
        else:
            return None
    return tuple(composed)


def _joined(axis: int, parts: tuple, copy) -> list:
    """The parts of a concatenation along ``axis`` with each run of adjacent slices of one x (``x[…, i:j]``,
    ``x[…, j:k]``, alike on every other axis) made one slice ``x[…, i:k]``."""
    joined = []
    for part in parts:
        last = joined[-1] if joined else None
        if last is not None and part.op == last.op == "getitem" and part.inputs[0] is last.inputs[0]:
            a, b = (_sliced(x.attrs["index"], x.inputs[0].shape, axis) for x in (last, part))
            if a is not None and b is not None and a[0] == b[0] and a[2] == b[1]:
                index = a[0][:axis] + (slice(a[1], b[2]),) + a[0][axis + 1:]
                shape = last.shape[:axis] + (last.shape[axis] + part.shape[axis],) + last.shape[axis + 1:]
                joined[-1] = copy(last, last.inputs, attrs={"index": index}, shape=shape)
                continue
        joined.append(part)
    return joined


def _sliced(index: tuple, shape: tuple, axis: int):
    """(the index with its item on ``axis`` made a whole slice, start, stop) when ``index`` holds slices only and a
    slice of step 1 of a concrete size on ``axis``; else None."""
    index = index + (slice(None),) * (len(shape) - len(index))
    if len(index) != len(shape) or not all(isinstance(item, slice) for item in index) or isinstance(shape[axis], str):
        return None
    start, stop, step = index[axis].indices(shape[axis])
    if step != 1 or stop < start:
        return None
    return index[:axis] + (slice(None),) + index[axis + 1:], start, stop


def _whole(index: tuple, shape: tuple) -> bool:
    """Whether ``x[index]``, x of ``shape``, holds every element of x: full slices, ints on axes of size 1 and
    new axes (None) only, so that it is x reshaped."""
    axes = iter(shape)
    for item in index:
        if item is None:
            continue
        dim = next(axes)
        if isinstance(item, slice):
            if item not in (slice(None), slice(None, None, 1)) and (
                    isinstance(dim, str) or item.indices(dim) != (0, dim, 1)):
                return False
        elif dim != 1:
            return False
    return True


def _tiling(node, inputs: tuple) -> tuple[int, int, int, tuple] | None:
    """(axis, start, stop, the parts' gradients in order) when ``node`` adds up scatter_slices (directly or through
    adds) of slices along one axis that lie side by side, each once, covering [start, stop); else None."""
    slices = _added_slices(node, inputs)
    if slices is None or len({axis for axis, *_ in slices}) != 1 or any(g.dtype != node.dtype for *_, g in slices):
        return None
    slices.sort(key=lambda piece: piece[1])
    axis = slices[0][0]
    bounds = [slices[0][1]] + [b for _, a, b, _ in slices]
    if [a for _, a, _, _ in slices] != bounds[:-1]:
        return None
    return axis, bounds[0], bounds[-1], tuple(g for *_, g in slices)


def _added_slices(add, terms) -> list | None:
    """The ``_slices`` of the terms that ``add`` sums without broadcasting, together; None if one has none."""
    if any(x.shape != add.shape for x in terms):
        return None
    pieces = [_slices(x) for x in terms]
    return None if None in pieces else [piece for part in pieces for piece in part]


def _slices(node) -> list | None:
    """[(axis, start, stop, g)] of the scatter_slices ``node`` adds up, each of a slice along one axis (or of one
    index along it: g lacks the axis), or None."""
    if node.op == "add":
        return _added_slices(node, node.inputs)
    if node.op != "scatter_slice":
        return None
    index = node.attrs["index"]
    cut = [i for i, item in enumerate(index) if item != slice(None)]
    if len(cut) != 1 or None in index or (isinstance(index[cut[0]], slice) and index[cut[0]].step not in (None, 1)):
        return None
    axis, item = cut[0], index[cut[0]]
    if isinstance(node.shape[axis], str) and (isinstance(item, slice) or item < 0):
        return None                             # bounds counted on an axis of symbolic size
    if isinstance(item, slice):
        start, stop, _ = item.indices(node.shape[axis])
    else:
        start = item % node.shape[axis] if item < 0 else item       # x[:, -1] is x[:, n - 1]
        stop = start + 1
    return [(axis, start, stop, node.inputs[0])]


def _unbroadcast(node, inputs: tuple) -> tuple:
    """The inputs with each broadcast_to bypassed where the others still broadcast to the node's shape."""
    inputs = list(inputs)
    for i, x in enumerate(inputs):
        if x.op == "broadcast_to":
            trial = inputs[:i] + [x.inputs[0]] + inputs[i + 1:]
            if reduce(lambda shape, y: broadcast(shape, y.shape), trial, ()) == node.shape:
                inputs = trial
    return tuple(inputs)


def _is_constant(node, value) -> bool:
    return value is not None and node.op == "constant" and bool(np.all(node.value == value))
