"""Einstein summation and the named products built on it: ``einsum``, ``outer``, ``bmm``, ``baddbmm``.

``einsum`` takes any subscripts NumPy accepts (implicit or explicit output, ``...``, an index repeated in one
operand for a diagonal, indices summed away) and lowers them onto existing primitives, so that its gradient and
its ONNX form are theirs: an index repeated in one operand becomes a strided slice of the flattened pair of axes
(the diagonal), an index found in one operand only and not in the output is summed at once, and the operands are
contracted pairwise from left to right, each pair as one (batched) ``matmul`` between transposes and reshapes —
batch indices (in both and kept) first, then the left's free indices as rows, the contracted ones as the inner
axis, the right's free ones as columns. Integer operands, which matmul does not take, multiply and sum instead.
"""
from __future__ import annotations

import string

from ..errors import DTypeError, ShapeError
from . import tensor as F
from .dims import format_shape, multiply
from .tracing import user_source

__all__ = ["einsum", "outer", "bmm", "baddbmm"]

LETTERS = set(string.ascii_letters)


def einsum(subscripts: str, *operands):
    """Σ over the indices missing from the output of the product of the operands, each indexed by its subscripts
    (np.einsum, torch.einsum): ``einsum("bij,bjk->bik", a, b)`` is ``a @ b``, ``einsum("ii", a)`` the trace,
    ``einsum("i,j", a, b)`` the outer product. Without ``->`` the output is ``...`` and the indices found once, in
    alphabetical order. Sizes of 1 broadcast, as NumPy's. The operands share one dtype, which the result keeps."""
    if not isinstance(subscripts, str):
        raise ShapeError(f"einsum takes its subscripts as a string first, e.g. einsum('ij,jk', a, b), got "
                         f"{type(subscripts).__name__} (at {user_source()})")
    inputs, output = _parse(subscripts, [F.as_node(x).shape for x in operands])
    dtypes = {F.as_node(x).dtype for x in operands}
    if len(dtypes) > 1:
        raise DTypeError(f"einsum: operands have different dtypes {', '.join(sorted(map(str, dtypes)))}; cast one "
                         f"with .astype(...) (at {user_source()})")
    sizes = _sizes(subscripts, inputs, operands)
    terms = [_diagonal(x, labels, subscripts) for x, labels in zip(operands, inputs)]
    x, labels = terms[0]
    for i, (y, other) in enumerate(terms[1:], 1):
        later = set(output).union(*(t[1] for t in terms[i + 1:]))
        x, labels = _contract(x, labels, y, other, later, sizes)
    x, labels = _sum_away(x, labels, set(output))
    x = F.transpose(x, [labels.index(label) for label in output]) if output else x
    return x if F.as_node(x).dtype in dtypes else F.astype(x, dtypes.pop())


def _parse(subscripts: str, shapes) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels, one per axis (the axes under ``...`` labelled ``…0``, ``…1``, ... aligned from the
    right, so that they broadcast), and the output's labels."""
    spec = subscripts.replace(" ", "")
    left, arrow, right = spec.partition("->")
    terms = left.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"einsum {subscripts!r} names {len(terms)} operand(s), given {len(shapes)} "
                         f"(at {user_source()})")
    inputs = [_labels(subscripts, term, len(shape)) for term, shape in zip(terms, shapes)]
    ellipsis = max((sum(label.startswith("…") for label in labels) for labels in inputs), default=0)
    if ellipsis:
        inputs = [[label if not label.startswith("…") else f"…{int(label[1:]) + ellipsis - _width(labels)}"
                   for label in labels] for labels in inputs]
    broadcast = [f"…{i}" for i in range(ellipsis)]
    if not arrow:
        counts = {}
        for label in (label for labels in inputs for label in labels if label in LETTERS):
            counts[label] = counts.get(label, 0) + 1
        return inputs, broadcast + sorted(label for label, n in counts.items() if n == 1)
    if "->" in right or "," in right:
        raise ShapeError(f"einsum {subscripts!r}: one '->' and one output (at {user_source()})")
    if ellipsis and "..." not in right:
        raise ShapeError(f"einsum {subscripts!r}: the operands' '...' axes need a '...' in the output, as NumPy's "
                         f"(at {user_source()})")
    output = _labels(subscripts, right, None, ellipsis)
    seen = {label for labels in inputs for label in labels}
    for label in output:
        if label not in seen:
            raise ShapeError(f"einsum {subscripts!r}: output index {label!r} is in no operand (at {user_source()})")
    if len(set(output)) != len(output):
        raise ShapeError(f"einsum {subscripts!r}: an output index is repeated (at {user_source()})")
    return inputs, output


def _width(labels) -> int:
    return sum(label.startswith("…") for label in labels)


def _labels(subscripts: str, term: str, ndim: int | None, ellipsis: int | None = None) -> list[str]:
    """The labels of one term: its letters, and ``...`` as ``ndim`` minus their number axes (an operand) or
    ``ellipsis`` axes (the output)."""
    head, dots, tail = term.partition("...")
    if "." in head + tail:
        raise ShapeError(f"einsum {subscripts!r}: '.' only as one '...' per term (at {user_source()})")
    bad = sorted(set(head + tail) - LETTERS)
    if bad:
        raise ShapeError(f"einsum {subscripts!r}: subscripts are letters, got {''.join(bad)!r} (at {user_source()})")
    letters = len(head) + len(tail)
    if ndim is None:
        width = (ellipsis or 0) if dots else 0
    else:
        width = ndim - letters
        if width < 0 or (width and not dots):
            raise ShapeError(f"einsum {subscripts!r}: term {term!r} has {letters} indices for an operand of "
                             f"{ndim} dimensions (at {user_source()})")
    return list(head) + [f"…{i}" for i in range(width)] + list(tail)


def _sizes(subscripts: str, inputs, operands) -> dict:
    """The size of each label: equal wherever it appears, or 1 there (broadcast)."""
    sizes = {}
    for labels, x in zip(inputs, operands):
        for label, size in zip(labels, F.as_node(x).shape):
            known = sizes.get(label, 1)
            if size != 1 and known != 1 and size != known:
                raise ShapeError(f"einsum {subscripts!r}: index {label.replace('…', '...')!r} has sizes {known} and "
                                 f"{size} (at {user_source()})")
            sizes[label] = size if known == 1 else known
    return sizes


def _diagonal(x, labels: list[str], subscripts: str):
    """``x`` with each label once: an axis pair (i, j) of one label becomes its diagonal, read as every (n+1)-th
    element of the two axes flattened to n² (a slice, whose gradient scatters back)."""
    labels = list(labels)
    for label in dict.fromkeys(labels):
        while labels.count(label) > 1:
            first, second = (i for i, other in enumerate(labels) if other == label)
            shape = F.as_node(x).shape
            n = shape[first]
            if shape[second] != n or isinstance(n, str):
                raise ShapeError(f"einsum {subscripts!r}: the repeated index {label!r} takes axes of one concrete "
                                 f"size, got {format_shape(shape)} (at {user_source()})")
            ndim = len(shape)
            x = F.moveaxis(x, (first, second), (ndim - 2, ndim - 1))
            x = F.reshape(x, F.as_node(x).shape[:-2] + (n * n,))[..., ::n + 1]
            labels = [other for i, other in enumerate(labels) if i not in (first, second)] + [label]
    return x, labels


def _sum_away(x, labels: list[str], keep: set):
    """``x`` summed over the labels not in ``keep``."""
    gone = [i for i, label in enumerate(labels) if label not in keep]
    if not gone:
        return x, labels
    return F.sum(x, tuple(gone)), [label for label in labels if label in keep]


def _contract(x, x_labels, y, y_labels, later: set, sizes: dict):
    """x·y summed over the labels in both and not ``later`` needed: one batched matmul (batch, rows, inner) @
    (batch, inner, columns) for floats, a broadcast product and a sum for integers."""
    x, x_labels = _sum_away(x, x_labels, later | set(y_labels))
    y, y_labels = _sum_away(y, y_labels, later | set(x_labels))
    batch = [label for label in x_labels if label in y_labels and label in later]
    inner = [label for label in x_labels if label in y_labels and label not in later]
    rows = [label for label in x_labels if label not in y_labels]
    columns = [label for label in y_labels if label not in x_labels]
    if not inner or F.as_node(x).dtype.kind != "f":
        everything = batch + rows + columns + inner
        product = _aligned(x, x_labels, everything) * _aligned(y, y_labels, everything)
        return _sum_away(product, everything, set(batch + rows + columns))
    x = _grouped(x, x_labels, batch, rows, inner, sizes)
    y = _grouped(y, y_labels, batch, inner, columns, sizes)
    out = F.matmul(x, y)
    shape = F.as_node(out).shape[:len(batch)] + tuple(sizes[label] for label in rows + columns)
    return F.reshape(out, shape), batch + rows + columns


def _aligned(x, labels: list[str], order: list[str]):
    """``x`` with its axes in ``order`` (the labels it lacks as axes of size 1)."""
    x = F.transpose(x, [labels.index(label) for label in order if label in labels])
    shape, present = iter(F.as_node(x).shape), set(labels)
    return F.reshape(x, tuple(next(shape) if label in present else 1 for label in order))


def _grouped(x, labels: list[str], batch, first, second, sizes: dict):
    """``x`` as (batch..., Π first, Π second), ``first`` and ``second`` broadcast to their full sizes."""
    x = F.transpose(x, [labels.index(label) for label in batch + first + second])
    full = F.as_node(x).shape[:len(batch)] + tuple(sizes[label] for label in first + second)
    x = F.broadcast_to(x, full)
    return F.reshape(x, full[:len(batch)] + (multiply(*(sizes[label] for label in first)),
                                            multiply(*(sizes[label] for label in second))))


def outer(a, b):
    """a[i]·b[j] of two vectors (torch.outer, np.outer on 1-D operands)."""
    for name, x in (("a", a), ("b", b)):
        if len(F.as_node(x).shape) != 1:
            raise ShapeError(f"outer takes two vectors, got {name} of shape {format_shape(F.as_node(x).shape)} "
                             f"(at {user_source()})")
    return F.expand_dims(a, 1) * F.expand_dims(b, 0)


def bmm(a, b):
    """Batched matrix product of a (B, n, m) and b (B, m, p), as torch.bmm: three axes each and one batch size,
    no broadcasting (``matmul`` broadcasts)."""
    shapes = F.as_node(a).shape, F.as_node(b).shape
    if len(shapes[0]) != 3 or len(shapes[1]) != 3 or shapes[0][0] != shapes[1][0] or shapes[0][2] != shapes[1][1]:
        raise ShapeError(f"bmm takes (B, n, m) and (B, m, p), got {format_shape(shapes[0])} and "
                         f"{format_shape(shapes[1])} (at {user_source()})")
    return F.matmul(a, b)


def baddbmm(input, batch1, batch2, *, beta: float = 1.0, alpha: float = 1.0):
    """β·input + α·bmm(batch1, batch2), input broadcasting to the product's shape (torch.baddbmm); with β = 0 the
    input is not read, so that a NaN there does not spread (as torch)."""
    for name, value in (("beta", beta), ("alpha", alpha)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(f"baddbmm's {name} must be a number, got {value!r} (at {user_source()})")
    product = bmm(batch1, batch2)
    product = product if alpha == 1 else product * float(alpha)
    if beta == 0:
        return F.broadcast_to(product, _checked(input, product))
    shape = _checked(input, product)
    return F.broadcast_to((input if beta == 1 else input * float(beta)) + product, shape)


def _checked(input, product):
    """The product's shape, which ``input`` must broadcast to."""
    shape = F.as_node(product).shape
    try:
        F.broadcast_to(input, shape)
    except ShapeError:
        raise ShapeError(f"baddbmm's input {format_shape(F.as_node(input).shape)} does not broadcast to the "
                         f"product {format_shape(shape)} (at {user_source()})") from None
    return shape
