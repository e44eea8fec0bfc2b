"""``Tensor``, the symbolic value of a traced program, and the functions over it that wrap the primitives: every op
a user (or a VJP rule) calls to build graph nodes, but for the families composed from these in modules of their own
(convolution.py, linalg.py, losses.py, norms.py); functional.py gathers them all into the functional API.

Names and semantics follow NumPy and PyTorch. Python numbers combine with tensors by weak typing (they
take the tensor's dtype); tensors of different dtypes must be cast explicitly with ``.astype``.
"""
from __future__ import annotations

import builtins
import math
from typing import Sequence

import numpy as np

from ..errors import DTypeError, ShapeError, TracingError
from .dims import broadcast, divide, format_shape, multiply
from .dims import normalize as normalize_dim     # ``normalize`` is the op
from .graph import Node, unsupported_dtype
from .tracing import add_call, add_node, current_graph, user_source


__all__ = [   # the functions of this module in the functional API (functional.py), and Tensor
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or",
    "neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "erf", "abs", "sin", "cos", "rsqrt", "silu", "softplus",
    "gelu", "clip", "where", "logical_not", "stop_gradient", "astype", "bitcast", "zeros_like",
    "floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite", "tan", "asin", "acos", "atan", "atan2",
    "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "expm1", "log1p", "logaddexp", "copysign",
    "lerp", "leaky_relu", "elu", "celu", "selu", "mish", "hardswish", "hardsigmoid", "softsign", "logsigmoid",
    "quick_gelu", "floor_divide", "remainder", "fmod", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "left_shift", "right_shift",
    "sum", "mean", "max", "min", "logsumexp", "var", "std", "argmax", "argmin", "sort", "topk", "cumsum",
    "prod", "any", "all", "cumprod", "cummax", "cummin", "logcumsumexp", "softmin", "normalize", "isclose",
    "zeros", "ones", "full", "ones_like", "full_like", "eye", "linspace", "meshgrid",
    "reshape", "transpose", "swapaxes", "broadcast_to", "expand_dims", "unsqueeze", "squeeze", "flatten", "moveaxis",
    "concat", "stack", "split", "take", "tril", "triu", "one_hot", "arange", "relative_distance", "embedding",
    "flip", "roll", "repeat", "repeat_interleave", "chunk", "unflatten", "diag", "diagonal", "gather", "scatter",
    "scatter_add", "scatter_reduce", "index_select", "masked_fill", "masked_select", "nonzero", "pad",
    "matmul",
    "softmax", "log_softmax", "layer_norm",
    "dropout", "Tensor",
]


def emit(op: str, *inputs, **attrs) -> "Tensor":
    """Apply primitive ``op`` to ``inputs`` (tensors, parameters, arrays or Python scalars)."""
    return Tensor(add_call(op, [as_node(x) for x in inputs], attrs))


def constant(value, dtype=None) -> "Tensor":
    """``value`` (an array or a number) as a constant node."""
    array = np.asarray(value, dtype=dtype)
    if array.dtype == object:
        raise TracingError(f"cannot make a constant of {type(value).__name__} {value!r:.80}: pass tensors, "
                           "arrays or numbers (a tuple of tensors is not a tensor; use ag.concat or stack them)")
    return Tensor(add_node("constant", (), {}, array.shape, array.dtype, value=array, stop_gradient=True))


def as_node(x) -> Node:
    """The graph node for ``x``: a tensor's node, a parameter's node (made on its first use) or a constant."""
    if isinstance(x, Tensor):
        return x.node
    if x is None:
        raise TracingError("None given where a tensor is expected")
    return constant(x).node


def lift_scalars(op: str, *xs) -> list:
    """Turn Python numbers into 0-d constants that take the dtype of the tensors beside them (weak typing,
    as in JAX): a float joins a float tensor's dtype, an int an integer or float tensor's; else the
    defaults float32 and int64. An int that the integer dtype cannot hold is a DTypeError naming ``op``
    (``int8 + 1000``; torch wraps it round to -24 silently)."""
    dtypes = [x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype for x in xs if not _is_python_number(x)]
    floats = [d for d in dtypes if d.kind == "f"]
    ints = [d for d in dtypes if d.kind in "iu"]
    out = []
    for x in xs:
        if not _is_python_number(x):
            out.append(x)
        elif isinstance(x, float):
            out.append(constant(x, floats[0] if floats else np.float32))
        else:
            dtype = (floats or ints or [np.dtype(np.int64)])[0]
            if dtype.kind in "iu" and not np.iinfo(dtype).min <= x <= np.iinfo(dtype).max:
                raise DTypeError(f"{op}: the Python int {x} does not fit the {dtype} tensor it meets, of range "
                                 f"[{np.iinfo(dtype).min}, {np.iinfo(dtype).max}]: cast the tensor first, e.g. "
                                 f".astype('int64') (at {user_source()})")
            out.append(constant(x, dtype))
    return out


def _is_python_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _binary(op):
    def apply(a, b):
        return emit(op, *lift_scalars(op, a, b))
    apply.__name__ = op
    return apply


add, sub, mul = _binary("add"), _binary("sub"), _binary("mul")
pow, maximum, minimum = _binary("pow"), _binary("maximum"), _binary("minimum")
equal, not_equal = _binary("equal"), _binary("not_equal")
less, less_equal, greater, greater_equal = (_binary("less"), _binary("less_equal"), _binary("greater"),
                                            _binary("greater_equal"))
logical_and, logical_or = _binary("logical_and"), _binary("logical_or")
atan2, logaddexp, copysign = _binary("atan2"), _binary("logaddexp"), _binary("copysign")
floor_divide, remainder, fmod = _binary("floor_divide"), _binary("remainder"), _binary("fmod")
left_shift, right_shift = _binary("left_shift"), _binary("right_shift")


def div(a, b, rounding_mode: str | None = None):
    """a / b, as torch.div: true division (integers divide in float32, or in the other operand's float dtype);
    ``rounding_mode="trunc"`` rounds the quotient toward 0, ``"floor"`` down (``floor_divide``, ``//``)."""
    a, b = lift_scalars("div", a, b)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if rounding_mode == "trunc":        # integers: a − fmod(a, b) is an exact multiple of b
        return floor_divide(a - fmod(a, b), b) if as_node(a).dtype.kind in "iu" else trunc(emit("div", a, b))
    if rounding_mode is not None:
        raise ValueError(f"div's rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r} "
                         f"(at {user_source()})")
    dtypes = [as_node(x).dtype for x in (a, b)]
    floating = next((d for d in dtypes if d.kind == "f"), np.dtype(np.float32))
    return emit("div", *(astype(x, floating) for x in (a, b)))


def _bitwise(op: str, boolean: str):
    """``op`` on integer tensors, ``boolean`` (a logical op) on bool ones, as PyTorch's &, |, ^."""
    def apply(a, b):
        a, b = lift_scalars(op, a, b)
        return emit(boolean if as_node(a).dtype == as_node(b).dtype == np.bool_ else op, a, b)
    apply.__name__ = op
    return apply


bitwise_and, bitwise_or = _bitwise("bitwise_and", "logical_and"), _bitwise("bitwise_or", "logical_or")
bitwise_xor = _bitwise("bitwise_xor", "not_equal")


def bitwise_not(x):
    """~x: −x − 1 on integers, logical not on bool."""
    return emit("logical_not" if as_node(x).dtype == np.bool_ else "bitwise_not", x)


def neg(x): return emit("neg", x)
def exp(x): return emit("exp", x)
def log(x): return emit("log", x)
def sqrt(x): return emit("sqrt", x)
def tanh(x): return emit("tanh", x)
def sigmoid(x): return emit("sigmoid", x)
def relu(x): return emit("relu", x)
def erf(x): return emit("erf", x)
def abs(x): return emit("abs", x)
def sin(x): return emit("sin", x)
def cos(x): return emit("cos", x)
def rsqrt(x): return emit("rsqrt", x)
def silu(x): return emit("silu", x)
def logical_not(x): return emit("logical_not", x)
def stop_gradient(x): return emit("stop_gradient", x)
def sign(x): return emit("sign", x)
def isnan(x): return emit("isnan", x)
def isinf(x): return emit("isinf", x)
def isfinite(x): return emit("isfinite", x)
def tan(x): return emit("tan", x)
def asin(x): return emit("asin", x)
def acos(x): return emit("acos", x)
def atan(x): return emit("atan", x)
def sinh(x): return emit("sinh", x)
def cosh(x): return emit("cosh", x)
def asinh(x): return emit("asinh", x)
def acosh(x): return emit("acosh", x)
def atanh(x): return emit("atanh", x)
def log2(x): return emit("log2", x)
def log10(x): return emit("log10", x)
def exp2(x): return emit("exp2", x)
def expm1(x): return emit("expm1", x)
def log1p(x): return emit("log1p", x)


def _whole(op: str):
    """floor, ceil, round or trunc: a float tensor rounded to whole numbers in its dtype (halves to even for
    round, as torch.round); an integer tensor is returned as it is, as PyTorch does. No gradient (PyTorch's is 0)."""
    def apply(x):
        return Tensor(as_node(x)) if as_node(x).dtype.kind in "iu" else emit(op, x)
    apply.__name__ = op
    return apply


floor, ceil, round, trunc = _whole("floor"), _whole("ceil"), _whole("round"), _whole("trunc")


def softplus(x, beta: float = 1.0, threshold: float = 20.0):
    """ln(1 + e^(βx)) / β, and x itself where βx > threshold (torch.nn.functional.softplus)."""
    return emit("softplus", *lift_scalars("softplus", x, float(beta), float(threshold)))


def lerp(start, end, weight):
    """start + weight·(end − start), as torch.lerp: computed from the nearer end (end − (end − start)(1 − weight)
    for weight ≥ ½), so that weight 1 gives end exactly."""
    start, end, weight = lift_scalars("lerp", start, end, weight)
    return where(less(weight, 0.5), start + weight * (end - start), end - (end - start) * (1 - weight))


def leaky_relu(x, negative_slope: float = 0.01):
    """x for x > 0, else negative_slope·x; the gradient at 0 is negative_slope, as PyTorch's (Maas et al. 2013)."""
    return where(greater(x, 0.0), x, x * negative_slope)


def elu(x, alpha: float = 1.0):
    """x for x > 0, else α(eˣ − 1) (Clevert et al. 2016); the gradient at 0 is α, as PyTorch's."""
    return _elu(x, alpha, 1.0)


def celu(x, alpha: float = 1.0):
    """max(0, x) + min(0, α(e^(x/α) − 1)) (Barron 2017): ELU continuously differentiable for every α > 0."""
    if not alpha:
        raise ValueError(f"celu's alpha must be non-zero, not {alpha!r} (at {user_source()})")
    return _elu(x, alpha, 1 / alpha)


def _elu(x, alpha: float, input_scale: float):
    """x for x > 0, else α(e^(x·input_scale) − 1); the exponential reads 0 where x > 0, so that a large x (or +inf)
    gives its branch, unused, no infinite derivative that would make the gradient 0·∞ = NaN."""
    negative = less_equal(x, 0.0)
    return where(negative, expm1(where(negative, x, 0.0) * input_scale) * alpha, x)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x):
    """λ·ELU(x, α) with λ ≈ 1.0507 and α ≈ 1.6733, the self-normalizing constants (Klambauer et al. 2017)."""
    return elu(x, SELU_ALPHA) * SELU_SCALE


def mish(x):
    """x·tanh(softplus(x)) (Misra 2019)."""
    return x * tanh(softplus(x))


def hardswish(x):
    """x·min(max(x + 3, 0), 6)/6 (Howard et al. 2019, MobileNetV3); the gradient at ±3 is PyTorch's (-½ and 3/2)."""
    return x * clip(x + 3.0, 0.0, 6.0) * (1 / 6)


def hardsigmoid(x):
    """min(max(x/6 + ½, 0), 1); the gradient is 1/6 strictly inside (-3, 3) and 0 at ±3, as PyTorch's."""
    return where(less_equal(x, -3.0), 0.0, where(greater_equal(x, 3.0), 1.0, x * (1 / 6) + 0.5))


def softsign(x):
    """x / (1 + |x|)."""
    return x / (abs(x) + 1.0)


def logsigmoid(x):
    """ln σ(x) = min(x, 0) − ln(1 + e^-|x|): exact for large |x| of either sign, gradient σ(−x)."""
    return minimum(x, 0.0) - log1p(exp(-abs(x)))


def quick_gelu(x):
    """x·σ(1.702x), the GELU approximation of CLIP and GPT-2's predecessors (Hendrycks & Gimpel 2016)."""
    return x * sigmoid(x * 1.702)


def name(x, label: str):
    """Give ``x``'s node a user-facing name, shown when the graph is drawn; attention modules name their
    weights ``"attention"`` so that they can be read back by scope for heatmaps."""
    as_node(x).name = label
    return x


def full(shape, fill_value, dtype=None):
    """A tensor of ``shape`` holding ``fill_value`` everywhere (torch.full): a 0-d constant broadcast, so that
    ``shape`` may hold symbolic dimensions (``x.shape[0]``, ``"B"``), bound when the graph runs. ``dtype`` by
    default follows the value, as torch: bool, int64 for an int, float32 for a float."""
    if isinstance(fill_value, Tensor) or np.ndim(fill_value) or not isinstance(fill_value, (int, float, np.generic)):
        raise DTypeError(f"full's fill_value must be a number, not {type(fill_value).__name__} (at {user_source()})")
    if dtype is None:
        dtype = np.bool_ if isinstance(fill_value, (bool, np.bool_)) else np.float32 \
            if isinstance(fill_value, (float, np.floating)) else np.int64
    dtype = _real_dtype("full", dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.asarray(fill_value).astype(dtype)
    if dtype.kind in "biu" and value.item() != fill_value:
        raise DTypeError(f"full: {fill_value!r} is not a {dtype} value (at {user_source()})")
    return broadcast_to(constant(value), _shape("full", shape))


def zeros(*shape, dtype="float32"):
    """A tensor of ``shape`` (``zeros(2, 3)`` or ``zeros((2, 3))``, symbolic dimensions allowed) of zeros."""
    return full(_varargs(shape), 0, dtype)


def ones(*shape, dtype="float32"):
    """A tensor of ``shape`` (``ones(2, 3)`` or ``ones((2, 3))``, symbolic dimensions allowed) of ones."""
    return full(_varargs(shape), 1, dtype)


def full_like(x, fill_value, dtype=None):
    """A tensor of ``x``'s shape (symbolic dimensions kept) and dtype (or ``dtype``) holding ``fill_value``."""
    return full(as_node(x).shape, fill_value, as_node(x).dtype if dtype is None else dtype)


def zeros_like(x, dtype=None):
    """Zeros of ``x``'s shape and dtype (or ``dtype``)."""
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    """Ones of ``x``'s shape and dtype (or ``dtype``)."""
    return full_like(x, 1, dtype)


def eye(n, m=None, k: int = 0, dtype="float32"):
    """The (n, m) matrix (m = n by default) with ones where column − row = ``k`` and zeros elsewhere (np.eye;
    torch.eye has no ``k``); ``n`` and ``m`` may be symbolic dimensions."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ShapeError(f"eye's diagonal k must be an int, got {k!r} (at {user_source()})")
    grid = zeros(_shape("eye", (n, n if m is None else m)), dtype=np.bool_)
    return equal(arange(grid, -1) - expand_dims(arange(grid, -2), 1), int(k)).astype(_real_dtype("eye", dtype))


def linspace(start, end, steps: int, dtype="float32"):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included (torch.linspace): start + i·step for
    the first half and end − (steps − 1 − i)·step for the second, step = (end − start) / (steps − 1), computed in
    ``dtype`` as torch does, so that the last value is ``end`` exactly."""
    _numbers("linspace", start=start, end=end)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ShapeError(f"linspace's steps must be an int >= 0, got {steps!r} (at {user_source()})")
    dtype = _real_dtype("linspace", dtype)
    compute = dtype.type if dtype.kind == "f" else np.float64
    i = np.arange(steps, dtype=compute)
    step = (compute(end) - compute(start)) / compute(builtins.max(steps - 1, 1))
    values = np.where(i < builtins.max(steps // 2, 1), compute(start) + step * i, compute(end) - step * (steps - 1 - i))
    return constant(values.astype(dtype))


def meshgrid(*tensors, indexing: str = "ij"):
    """Coordinate grids of 1-d (or 0-d) tensors of one dtype (torch.meshgrid): the i-th result holds
    ``tensors[i]`` along axis i of the shape (n₀, n₁, ...) of their lengths; ``indexing="xy"`` swaps the first two
    axes (NumPy's default, for Cartesian x, y). Each result is a broadcast, its gradient the sum over the others."""
    tensors = _varargs(tensors)
    if indexing not in ("ij", "xy"):
        raise ShapeError(f"meshgrid's indexing must be 'ij' or 'xy', not {indexing!r} (at {user_source()})")
    if not tensors:
        raise ShapeError(f"meshgrid needs at least one tensor (at {user_source()})")
    nodes = [as_node(t) for t in tensors]
    if builtins.any(len(n.shape) > 1 for n in nodes):
        raise ShapeError(f"meshgrid takes 1-d or 0-d tensors, got {', '.join(format_shape(n.shape) for n in nodes)} "
                         f"(at {user_source()})")
    if len({n.dtype for n in nodes}) > 1:
        raise DTypeError(f"meshgrid takes tensors of one dtype, got {', '.join(str(n.dtype) for n in nodes)} "
                         f"(at {user_source()})")
    lengths = [n.shape[0] if n.shape else 1 for n in nodes]
    order = list(range(len(nodes)))
    if indexing == "xy" and len(nodes) > 1:
        order[:2] = [1, 0]
    shape = [lengths[i] for i in order]
    return [broadcast_to(reshape(t, [lengths[i] if order[a] == i else 1 for a in range(len(order))]), shape)
            for i, t in enumerate(tensors)]


def _shape(op: str, shape) -> tuple:
    """``shape`` (an int or a sequence of dimensions: ints >= 0, symbol names, a tensor's ``shape``) normalized."""
    dims = (shape,) if isinstance(shape, (int, np.integer, str)) else shape
    try:
        return tuple(normalize_dim(int(d) if isinstance(d, np.integer) else d) for d in dims)
    except (TypeError, ValueError) as error:
        raise ShapeError(f"{op}'s shape {shape!r}: {error} (at {user_source()})") from None


def _real_dtype(op: str, dtype) -> np.dtype:
    """``dtype`` (``_dtype``) when it is bool, an integer or a float, which a created tensor can hold."""
    dtype = _dtype(op, dtype)
    if dtype.kind not in "biuf":
        raise DTypeError(f"{op}: a tensor holds bool, integers or floats, not {dtype} (at {user_source()})")
    return dtype


def _numbers(op: str, **values) -> None:
    """Check that each of ``values`` is a finite real number (not a bool), naming it."""
    for key, value in values.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not math.isfinite(value):
            raise ShapeError(f"{op}'s {key} must be a finite number, got {value!r} (at {user_source()})")


def gelu(x, approximate: str = "tanh"):
    """GELU(x) = x·Φ(x); ``approximate="tanh"`` uses 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))), ``"none"``
    the exact erf form (Hendrycks & Gimpel 2016)."""
    if approximate not in ("tanh", "none"):
        raise ValueError(f"approximate must be 'tanh' or 'none', not {approximate!r}")
    return emit("gelu", x, approximate=approximate)


def clip(x, lo=None, hi=None):
    """min(max(x, lo), hi), as torch.clamp: x limited to [lo, hi], every element hi when lo > hi; NaN stays NaN.
    The bounds are Python numbers (ints for an integer tensor) and at most one of them may be None, which leaves
    that side open; the gradient passes where lo ≤ x ≤ hi."""
    if lo is None and hi is None:
        raise TracingError(f"clip needs at least one bound: lo, hi or both (at {user_source()})")
    integer = as_node(x).dtype.kind in "iu"
    for bound in (lo, hi):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int if integer else (int, float))):
            raise DTypeError(f"clip's bounds must be Python {'ints' if integer else 'numbers'} or None for a "
                             f"{as_node(x).dtype} tensor, not {type(bound).__name__} (at {user_source()})")
    if integer:
        info = np.iinfo(as_node(x).dtype)
        lo, hi = (info.min if lo is None else lo), (info.max if hi is None else hi)
    else:
        lo, hi = (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))
    return emit("clip", *lift_scalars("clip", x, lo, hi))


def where(cond, a, b):
    """``a`` where ``cond`` is True, else ``b`` (broadcasting all three)."""
    return emit("where", *lift_scalars("where", cond, a, b))


def astype(x, dtype):
    dtype = _dtype("astype", dtype)
    return x if as_node(x).dtype == dtype else emit("astype", x, dtype=dtype)


def bitcast(x, dtype):
    """x's bits read as ``dtype``, of the same itemsize (torch's ``Tensor.view(dtype)``, NumPy's ``view``): no
    value is converted, the shape is kept; a view on the device, without a gradient."""
    return emit("bitcast", x, dtype=_dtype("bitcast", dtype))


def _dtype(op: str, dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype, or the DTypeError that names ``op`` (a name NumPy lacks, such as "bfloat16")."""
    try:
        return np.dtype(dtype)
    except TypeError:
        raise unsupported_dtype(dtype, f"{op}'s dtype argument (at {user_source()})") from None


def _axis(x, axis: int, insert: int = 0) -> int:
    """``axis`` of ``x`` as a non-negative index, counted from the end when negative; ``insert`` = 1 counts the
    positions where a new axis can go (``expand_dims``), 1 − k those where a block of k axes can (``moveaxis``).
    As in PyTorch, a 0-d tensor takes axis 0 or -1."""
    ndim = len(as_node(x).shape) + insert
    span = builtins.max(ndim, 1)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -span <= axis < span:
        raise ShapeError(f"axis {axis!r} is out of range for a tensor of {ndim - insert} dimensions: use an int in "
                         f"[{-span}, {span - 1}] (at {user_source()})")
    return int(axis) % span


def _axes(x, axis) -> tuple[int, ...]:
    """Sorted non-negative axes; ``None`` means all of them. A 0-d tensor has none, and takes axis 0 or -1
    (as PyTorch: the reduction of a scalar is the scalar)."""
    ndim = len(as_node(x).shape)
    axes = tuple(range(ndim)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = sorted({_axis(x, a) for a in axes})
    if len(normalized) != len(axes):
        raise ShapeError(f"repeated axis in {axis} (at {user_source()})")
    return tuple(normalized) if ndim else ()


def sum(x, axis=None, keepdims: bool = False):
    """Σx over ``axis``; floats keep their dtype, bool and integers are summed in int64 (as torch.sum)."""
    return emit("sum", x, axes=_axes(x, axis), keepdims=keepdims)


def mean(x, axis=None, keepdims: bool = False):
    """Σx / n, where n is read from the shape when the graph runs (so symbolic dimensions work); NaN over an
    empty axis. Floating-point tensors only, as in PyTorch."""
    axes, dtype = _axes(x, axis), _floating("mean", x)
    return sum(x, axes, keepdims) / emit("size", x, axes=axes, dtype=dtype)


def _floating(op: str, x) -> np.dtype:
    """``x``'s dtype, which ``op`` needs to be a float (as PyTorch's mean and var)."""
    dtype = as_node(x).dtype
    if dtype.kind != "f":
        raise DTypeError(f"{op} of a {dtype} tensor: cast it first, e.g. x.astype('float32') (at {user_source()})")
    return dtype


def max(x, axis=None, keepdims: bool = False):
    """The largest element over ``axis``, of any dtype; NaN if any is NaN. Its gradient is shared evenly
    between the elements equal to it (as torch.amax)."""
    return emit("max", x, axes=_axes(x, axis), keepdims=keepdims)


def min(x, axis=None, keepdims: bool = False):
    """The smallest element over ``axis``, of any dtype; NaN if any is NaN. Its gradient is shared evenly
    between the elements equal to it (as torch.amin)."""
    return emit("min", x, axes=_axes(x, axis), keepdims=keepdims)


def logsumexp(x, axis=None, keepdims: bool = False):
    """log Σ exp(x) over ``axis``, computed as m + log Σ exp(x − m) with m the maximum, so that it neither
    overflows nor underflows; −inf over an empty axis. Its gradient is softmax(x) over ``axis``."""
    return emit("logsumexp", x, axes=_axes(x, axis), keepdims=keepdims)


def var(x, axis=None, correction: int = 1, keepdims: bool = False):
    """Σ(x − mean x)² / max(0, n − ``correction``) over ``axis``, n the number of elements reduced: the unbiased
    variance by default, the biased one with ``correction=0`` (as torch.var); inf when n ≤ correction (NaN
    where the squares sum to 0, and over an empty axis). Floating-point tensors only."""
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise DTypeError(f"correction must be a number, not {type(correction).__name__} (at {user_source()})")
    _floating("var", x)
    return emit("var", x, axes=_axes(x, axis), correction=correction, keepdims=keepdims)


def std(x, axis=None, correction: int = 1, keepdims: bool = False):
    """√var(x, axis, correction) (as torch.std). Where the variance is 0 (a constant row) the gradient is 0, not
    the 0 · ∞ = NaN of √'s derivative there (as torch's std_backward): √ is taken of 1 in its place."""
    variance = var(x, axis, correction, keepdims)
    constant = equal(variance, 0)
    return where(constant, 0.0, sqrt(where(constant, 1.0, variance)))


def prod(x, axis=None, keepdims: bool = False):
    """Πx over ``axis``; 1 over an empty axis. Floats keep their dtype, bool and integers are multiplied in int64
    (as torch.prod). The gradient at xᵢ is the product of the others, exact where the reduction holds zeros."""
    return emit("prod", x, axes=_axes(x, axis), keepdims=keepdims)


def any(x, axis=None, keepdims: bool = False):
    """Whether some element over ``axis`` is non-zero (NaN is), as bool for any dtype; False over an empty axis
    (torch.any, whose result for uint8 is uint8)."""
    return greater(sum(_nonzero(x), axis, keepdims), 0)


def all(x, axis=None, keepdims: bool = False):
    """Whether every element over ``axis`` is non-zero (NaN is), as bool for any dtype; True over an empty axis
    (torch.all)."""
    return equal(sum(logical_not(_nonzero(x)), axis, keepdims), 0)


def _nonzero(x):
    return x if as_node(x).dtype == np.bool_ else not_equal(x, 0)


def argmax(x, axis=None, keepdims: bool = False):
    """The int64 index of the first largest element along ``axis`` (of the flattened tensor when None), NaN
    counting as the largest (as torch.argmax); no value over an axis of size 0."""
    return _along_last("argmax", x, axis, keepdims)


def argmin(x, axis=None, keepdims: bool = False):
    """The int64 index of the first smallest element along ``axis`` (of the flattened tensor when None), NaN
    counting as the smallest (as torch.argmin); no value over an axis of size 0."""
    return _along_last("argmin", x, axis, keepdims)


def _along_last(op, x, axis, keepdims):
    """``op``, a reduction over the last axis, over ``axis`` (over every element when None; the size-1 axes
    kept with ``keepdims``)."""
    ndim = len(as_node(x).shape)
    axis = None if axis is None else _axis(x, axis)
    if axis is None or not ndim:
        out = emit(op, reshape(x, (-1,)))
        return reshape(out, (1,) * ndim) if keepdims else out
    out = emit(op, moveaxis(x, axis, ndim - 1))
    return expand_dims(out, axis) if keepdims else out


def cumsum(x, axis: int):
    """Running sums along ``axis``: out[..., j, ...] = Σ_{i ≤ j} x[..., i, ...] (as torch.cumsum). Floats keep
    their dtype, bool and integers give int64. The gradient is the running sum of the gradient taken from the
    end."""
    return _running("cumsum", x, axis, reverse=False)


def cumprod(x, axis: int):
    """Running products along ``axis``: out[..., j, ...] = Π_{i ≤ j} x[..., i, ...] (as torch.cumprod). Floats
    keep their dtype, bool and integers give int64. The gradient is exact at zeros, as torch's."""
    return _running("cumprod", x, axis)


def logcumsumexp(x, axis: int):
    """log Σ_{i ≤ j} exp x[..., i, ...] along ``axis`` of a float tensor (torch.logcumsumexp), accumulated one
    term at a time as log(eᵃ + eᵇ) = max + log1p(e^-|a − b|): no overflow at large values, −inf terms add
    nothing. Its gradient is torch's (NaN where the running value is −inf)."""
    _floating("logcumsumexp", x)
    return _running("logcumsumexp", x, axis, reverse=False)


def cummax(x, axis: int):
    """(values, int64 indices) of the running maximum along ``axis`` (torch.cummax): the index is the latest
    among ties, and a NaN is the maximum from where it stands (the index moving to each later NaN). The values'
    gradient goes to the position each came from."""
    return _running_extremum(x, axis, largest=True)


def cummin(x, axis: int):
    """(values, int64 indices) of the running minimum along ``axis`` (torch.cummin), as ``cummax``."""
    return _running_extremum(x, axis, largest=False)


def _running_extremum(x, axis, largest: bool):
    indices = _running("cumarg", x, axis, largest=largest)
    if not as_node(x).shape:
        return x, indices
    last = len(as_node(x).shape) - 1
    axis = _axis(x, axis)
    return moveaxis(_take_along_last(moveaxis(x, axis, last), moveaxis(indices, axis, last)), last, axis), indices


def _running(op: str, x, axis: int, **attrs):
    """``op``, a running reduction along the last axis, along ``axis``; a 0-d tensor as a row of one."""
    ndim, axis = len(as_node(x).shape), _axis(x, axis)
    if not ndim:
        return reshape(_running(op, reshape(x, (1,)), 0, **attrs), ())
    return moveaxis(emit(op, moveaxis(x, axis, ndim - 1), **attrs), ndim - 1, axis)


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """|a − b| ≤ atol + rtol·|b| elementwise, broadcasting (torch.isclose): equal values (infinities too) are
    close, an infinity is close to nothing else, NaN to nothing unless ``equal_nan``. Integers are compared in
    float64; bool tensors by equality. ``a`` and ``b`` have one dtype (a Python number takes the other's)."""
    _numbers("isclose", rtol=rtol, atol=atol)
    if rtol < 0 or atol < 0:
        raise ShapeError(f"isclose's rtol and atol must be >= 0, got {rtol!r} and {atol!r} (at {user_source()})")
    a, b = lift_scalars("isclose", a, b)
    dtypes = {as_node(a).dtype, as_node(b).dtype}
    if len(dtypes) > 1:
        raise DTypeError(f"isclose compares tensors of one dtype, got {' and '.join(map(str, dtypes))}: cast one "
                         f"(at {user_source()})")
    kind = dtypes.pop().kind
    close = equal(a, b)
    if kind == "b":
        return close
    if kind in "iu":
        a, b = astype(a, np.float64), astype(b, np.float64)
    error = abs(a - b)
    close = logical_or(close, logical_and(isfinite(error), less_equal(error, abs(b) * float(rtol) + float(atol))))
    return logical_or(close, logical_and(isnan(a), isnan(b))) if equal_nan else close


def sort(x, axis: int = -1, descending: bool = False):
    """(values, int64 indices) of ``x`` sorted along ``axis``, stably: equal elements keep their order, in
    both directions (as torch.sort(stable=True)); NaN sorts as the largest; a 0-d tensor gives itself and index
    0. Only the values have a gradient, sent back to the positions they came from."""
    return _sorted(x, axis, None, bool(descending))


def topk(x, k: int, axis: int = -1, largest: bool = True):
    """(values, int64 indices) of the ``k`` largest (``largest=False``: smallest) elements along ``axis``, in
    sorted order, NaN as the largest; equal elements come in index order (as ONNX's TopK; torch.topk leaves the
    order of ties unspecified); a 0-d tensor takes k = 1 and gives itself and index 0, as torch. The values'
    gradient goes back to the chosen positions, 0 elsewhere."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise ShapeError(f"k must be an int >= 0, got {k!r} (at {user_source()})")
    return _sorted(x, axis, int(k), bool(largest))


def _sorted(x, axis, k, descending):
    """The first ``k`` (None: all) of the stably sorted values along ``axis`` and their indices: ``argsort``
    on the last axis, and the values gathered through its indices (see core/prims/sort.py). A 0-d tensor is
    sorted as a row of one (as PyTorch)."""
    ndim = len(as_node(x).shape)
    if not ndim:
        if k not in (None, 1):
            raise ShapeError(f"the top {k} of a 0-d tensor: k must be 1 (at {user_source()})")
        _axis(x, axis)
        return tuple(reshape(out, ()) for out in _sorted(reshape(x, (1,)), 0, k, descending))
    axis, last = _axis(x, axis), ndim - 1
    x = moveaxis(x, axis, last)
    indices = emit("argsort", x, k=k, descending=descending)
    return moveaxis(_take_along_last(x, indices), last, axis), moveaxis(indices, last, axis)


def _take_along_last(x, indices):
    """out[..., j] = x[..., indices[..., j]] for ``indices`` (..., k) in range and ``x`` (..., n) of the same
    leading axes (np.take_along_axis on the last axis): a gather from x's elements taken as one column, at
    each index plus its row's offset (row · n). Its gradient scatter-adds back to the gathered elements."""
    shape, k = as_node(x).shape, as_node(indices).shape[-1]
    flat = reshape(indices, (multiply(*shape[:-1]), k))
    offsets = arange(flat, 0) * emit("size", x, axes=(len(shape) - 1,), dtype=as_node(indices).dtype)
    picked = emit("gather", reshape(x, (-1, 1)), flat + expand_dims(offsets, 1))
    return reshape(picked, as_node(indices).shape)


def reshape(x, shape: Sequence):
    """Reshape; one entry may be -1. Symbolic shapes flatten to products (``("B", "T", 8) -> ("B*T", 8)``)."""
    shape = tuple(shape)
    source = as_node(x).shape
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape to {shape}: only one dimension may be -1")
    if -1 in shape:
        known = multiply(*(d for d in shape if d != -1))
        missing = divide(multiply(*source), known)
        if missing is None:
            raise ShapeError(f"cannot reshape {format_shape(source)} to {format_shape(shape)} at {user_source()}")
        shape = tuple(missing if d == -1 else d for d in shape)
    shape = tuple(normalize_dim(d) for d in shape)
    return x if shape == source and type(x) is Tensor else emit("reshape", x, shape=shape)


def transpose(x, axes: Sequence[int] | None = None):
    ndim = len(as_node(x).shape)
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(_axis(x, a) for a in axes)
    return x if perm == tuple(range(ndim)) and type(x) is Tensor else emit("transpose", x, perm=perm)


def swapaxes(x, a: int, b: int):
    perm = list(range(len(as_node(x).shape)))
    a, b = _axis(x, a), _axis(x, b)
    if perm:                    # a 0-d tensor takes axis 0 or -1 and is itself, as in torch
        perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def broadcast_to(x, shape: Sequence):
    shape = tuple(normalize_dim(d) for d in shape)
    return x if as_node(x).shape == shape and type(x) is Tensor else emit("broadcast_to", x, shape=shape)


def expand_dims(x, axis: int):
    shape = list(as_node(x).shape)
    shape.insert(_axis(x, axis, insert=1), 1)
    return reshape(x, shape)


unsqueeze = expand_dims     # torch's name


def _not_scalar(op: str, x) -> None:
    if not as_node(x).shape:
        raise ShapeError(f"{op} takes tensors of at least one dimension, not a 0-d one: reshape it to (1,) first "
                         f"(at {user_source()})")


def concat(xs: Sequence, axis: int = 0):
    """Join tensors along an existing ``axis`` (``torch.cat``); 0-d tensors cannot be joined."""
    xs = list(xs)
    if not xs:
        raise ShapeError("concat needs at least one tensor")
    for x in xs:
        _not_scalar("concat", x)
    axis = _axis(xs[0], axis)
    return xs[0] if len(xs) == 1 else emit("concat", *xs, axis=axis)


def split(x, split_size_or_sections, axis: int = -1) -> list:
    """Split along ``axis`` like ``torch.split``: an int is the size of every part (the last one smaller when
    it does not divide the length), a list gives the parts' sizes, which must add up to the length."""
    _not_scalar("split", x)
    axis = _axis(x, axis)
    dim = as_node(x).shape[axis]
    if isinstance(dim, str):
        raise ShapeError(f"cannot split symbolic dimension {dim} (at {user_source()})")
    given = split_size_or_sections
    if not builtins.all(isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
               for n in (given if isinstance(given, (list, tuple, np.ndarray)) else [given])):
        raise ShapeError(f"split takes an int size or a list of int sizes, got {given!r} "
                         f"(at {user_source()})")
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0 and dim:
            raise ShapeError(f"split size must be positive, got {size} (at {user_source()})")
        parts = builtins.max(-(-dim // size), 1) if size > 0 else 1
        sizes = [size] * (parts - 1) + [dim - size * (parts - 1)]
    else:
        sizes = [int(n) for n in split_size_or_sections]
        if builtins.min(sizes, default=0) < 0 or builtins.sum(sizes) != dim:
            raise ShapeError(f"split sizes {sizes} must be non-negative and add up to {dim} (at {user_source()})")
    starts = np.cumsum([0] + sizes)
    return [index(x, (slice(None),) * axis + (slice(int(a), int(b)),)) for a, b in zip(starts, starts[1:])]


def stack(xs: Sequence, axis: int = 0):
    """Join tensors of one shape along a new ``axis`` (``torch.stack``)."""
    xs = list(xs)
    if not xs:
        raise ShapeError(f"stack needs at least one tensor (at {user_source()})")
    shapes = {as_node(x).shape for x in xs}
    if len(shapes) > 1:
        raise ShapeError(f"stack takes tensors of one shape, got {', '.join(map(format_shape, shapes))} "
                         f"(at {user_source()})")
    axis = _axis(xs[0], axis, insert=1)
    return concat([expand_dims(x, axis) for x in xs], axis)


def squeeze(x, axis=None):
    """``x`` without its axes of size 1: all of them when ``axis`` is None, else those among ``axis`` (an int or
    a tuple); a named axis of another size stays, as in torch.squeeze."""
    shape = as_node(x).shape
    axes = _axes(x, axis)
    return reshape(x, [d for i, d in enumerate(shape) if not (i in axes and d == 1)])


def flatten(x, start: int = 0, end: int = -1):
    """``x`` with axes ``start`` to ``end`` (both included) merged into one (``torch.flatten``); a 0-d tensor
    becomes one element."""
    shape = as_node(x).shape
    if not shape:
        return reshape(x, (1,))
    start, end = _axis(x, start), _axis(x, end)
    if start > end:
        raise ShapeError(f"flatten's start axis {start} comes after its end axis {end} (at {user_source()})")
    return reshape(x, shape[:start] + (multiply(*shape[start:end + 1]),) + shape[end + 1:])


def one_hot(indices, classes: int):
    """int64 (..., classes): 1 at each index, 0 elsewhere (``torch.nn.functional.one_hot``). An index outside
    [0, classes) raises BindingError when the graph runs, as torch raises."""
    if isinstance(classes, bool) or not isinstance(classes, (int, np.integer)) or classes < 1:
        raise ShapeError(f"classes must be a positive int, got {classes!r} (at {user_source()})")
    return _one_hot(indices, int(classes), np.int64)


def _one_hot(indices, classes: int, dtype):
    """The rows of the ``classes`` × ``classes`` identity of ``dtype`` at ``indices``: the gather checks them."""
    if as_node(indices).dtype.kind not in "iu":
        raise DTypeError(f"one-hot indices must be integers, not {as_node(indices).dtype} (at {user_source()})")
    return emit("gather", np.eye(classes, dtype=dtype), indices)


def tril(x, k: int = 0):
    """``x`` with the elements above the ``k``-th diagonal of its last two axes zeroed: kept where
    column − row ≤ k (``torch.tril``)."""
    return _triangle(x, k, lower=True)


def triu(x, k: int = 0):
    """``x`` with the elements below the ``k``-th diagonal of its last two axes zeroed: kept where
    column − row ≥ k (``torch.triu``)."""
    return _triangle(x, k, lower=False)


def _triangle(x, k, lower: bool):
    if len(as_node(x).shape) < 2:
        raise ShapeError(f"{'tril' if lower else 'triu'} takes a tensor of at least two axes, got "
                         f"{format_shape(as_node(x).shape)} (at {user_source()})")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ShapeError(f"the diagonal k must be an int, got {k!r} (at {user_source()})")
    offset = arange(x, -1) - expand_dims(arange(x, -2), 1)
    return where(offset <= int(k) if lower else offset >= int(k), x, zeros_like(x))


def index(x, key):
    """``x[key]`` as in NumPy: basic indexing by ints (negative ones count from the end), slices (any step,
    negative too), ``None`` and ``...``; and advanced indexing by integer index arrays (tensors, arrays or lists)
    on one or several axes. The index arrays, and the ints beside them, broadcast to one shape, which takes the
    place of the axes they index where those are adjacent, and comes first where they are not (NumPy's rule;
    PyTorch applies the ints first, so ``x[0, :, idx]`` is (3, 2) there and (2, 3) here for x (2, 3, 4)).
    Negative indices count from the end; one out of range is a ShapeError naming the axis while tracing (an
    array) or a BindingError naming it when the graph runs (a tensor). The gradient scatter-adds back, repeated
    indices accumulating."""
    key = key if isinstance(key, tuple) else (key,)
    if builtins.all(_basic(item) for item in key):
        return emit("getitem", x, index=_normalize_index(as_node(x).shape, key))
    shape = as_node(x).shape
    ellipses = [i for i, item in enumerate(key) if item is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(f"an index can only have a single ellipsis ('...') (at {user_source()})")
    if ellipses:
        used = builtins.sum(1 for item in key if item is not None and item is not Ellipsis)
        key = key[:ellipses[0]] + (slice(None),) * builtins.max(len(shape) - used, 0) + key[ellipses[0] + 1:]
    advanced = [i for i, item in enumerate(key) if not isinstance(item, (slice, type(None)))]
    basic = tuple(slice(None) if i in advanced else item for i, item in enumerate(key))
    y = index(x, basic)        # one axis per entry of the key now: None's new ones, and those still to index
    axes = [builtins.sum(1 for item in key[:i] if item is not None) for i in advanced]    # x's axis of each
    arrays = [_index_array(key[i], as_node(y).shape[i], axis) for i, axis in zip(advanced, axes)]
    if len(arrays) == 1:
        return take(y, arrays[0], advanced[0])
    dims = [_concrete("indexing", y, i) for i in advanced]
    strides = [multiply(*dims[k + 1:]) for k in range(len(dims))]
    flat = _flat_position(arrays, dims, strides, axes)
    rest = tuple(d for i, d in enumerate(as_node(y).shape) if i not in advanced)
    rows = reshape(moveaxis(y, advanced, range(len(advanced))), (multiply(*dims),) + rest)
    out = take(rows, flat, 0)
    width = len(as_node(flat).shape)
    if advanced == list(range(advanced[0], advanced[0] + len(advanced))):
        out = moveaxis(out, range(width), range(advanced[0], advanced[0] + width))
    return out


def _index_array(item, dim, axis):
    """An advanced index as an integer tensor, or a NumPy array already checked against ``dim`` and made
    non-negative (a constant); a boolean one is refused."""
    if not isinstance(item, Tensor):
        item = np.asarray(item)
        if item.size == 0 and item.dtype.kind == "f":        # [] indexes nothing, as in NumPy
            item = item.astype(np.int64)
    dtype = item.dtype
    if dtype.kind not in "iu":
        raise DTypeError(f"index arrays must be integers, not {dtype}" + (
            ": a boolean mask selects a number of entries known only when the graph runs; use "
            "ag.where(mask, x, 0) or ag.masked_fill instead" if dtype == np.bool_ else "") + f" (at {user_source()})")
    if isinstance(item, Tensor):
        return item
    if isinstance(dim, int):
        bad = (item < -dim) | (item >= dim)
        if bad.any():
            raise ShapeError(f"index {item[bad].flat[0]} is out of bounds for axis {axis} with size {dim} "
                             f"(at {user_source()})")
        item = np.where(item < 0, item + dim, item)
    return item


def _flat_position(arrays, dims, strides, axes):
    """Σ index_k · stride_k, the position in the indexed axes flattened, broadcast over the index arrays. A
    tensor's term is read from a table of its axis's multiples of its stride, whose gather checks the index at
    run time (the node named after the axis); the arrays' terms are summed while tracing."""
    constant_part = builtins.sum((a.astype(np.int64) * s for a, s in zip(arrays, strides)
                                  if isinstance(a, np.ndarray)), np.zeros((), np.int64))
    flat = constant(constant_part)
    for a, dim, stride, axis in zip(arrays, dims, strides, axes):
        if isinstance(a, Tensor):
            if a.dtype.kind == "i":
                a = where(less(a, 0), a + dim, a)
            table = (np.arange(dim, dtype=np.int64) * stride).reshape(dim, 1)
            term = name(emit("gather", table, a), f"index of axis {axis}")
            flat = flat + reshape(term, as_node(a).shape)
    return flat


def _basic(item) -> bool:
    return isinstance(item, (int, np.integer, slice, type(None), type(Ellipsis))) and not isinstance(item, bool)


def _normalize_index(shape, key) -> tuple:
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > len(shape):
        raise ShapeError(f"too many indices for a tensor of shape {format_shape(shape)}")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - used) + key[at + 1:]
    out, axis = [], 0
    for item in key:
        if item is None:
            out.append(None)
            continue
        dim = shape[axis]
        axis += 1
        if isinstance(item, (int, np.integer)):
            if isinstance(dim, int) and not -dim <= item < dim:
                raise ShapeError(f"index {item} is out of bounds for axis {axis - 1} with size {dim}")
            out.append(int(item))
        else:
            if isinstance(dim, str) and item != slice(None):
                raise ShapeError(f"cannot slice symbolic dimension {dim} with {item.start}:{item.stop}:"
                                 f"{item.step}; trace with a concrete size (at {user_source()})")
            out.append(item)
    return tuple(out)


def take(x, indices, axis: int = 0):
    """The entries of ``x`` along ``axis`` at an integer tensor's indices (``np.take``; ``x[indices]`` for
    axis 0): the result has the indices' axes in place of ``axis``. Negative indices count from the end;
    one out of range raises ShapeError while tracing when the indices are a constant, BindingError when the
    graph runs. The gradient scatter-adds the picked entries back."""
    _not_scalar("take", x)
    axis, shape, idx = _axis(x, axis), as_node(x).shape, as_node(indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"index arrays must be integers, not {idx.dtype}" + (
            ": a boolean mask selects a number of entries known only when the graph runs; use "
            "ag.where(mask, x, 0) instead" if idx.dtype == np.bool_ else "") + f" (at {user_source()})")
    dim = shape[axis]
    if idx.op == "constant" and isinstance(dim, int):
        bad = (idx.value < -dim) | (idx.value >= dim)
        if bad.any():
            raise ShapeError(f"index {idx.value[bad].flat[0]} is out of bounds for axis {axis} with size {dim} "
                             f"(at {user_source()})")
        indices = np.where(idx.value < 0, idx.value + dim, idx.value).astype(idx.dtype)
    elif idx.dtype.kind == "i":
        indices = where(less(indices, 0), indices + emit("size", x, axes=(axis,), dtype=idx.dtype), indices)
    rest = shape[:axis] + shape[axis + 1:]
    rows = emit("gather", reshape(moveaxis(x, axis, 0), (dim, multiply(*rest))), indices)   # (dim, 0) when empty
    at = range(len(idx.shape))          # the indices' axes, moved in place of ``axis`` (none for a 0-d index)
    return moveaxis(reshape(rows, idx.shape + rest), tuple(at), tuple(a + axis for a in at))


def moveaxis(x, source, destination):
    """Move the axes ``source`` (an int or a sequence) to the positions ``destination`` (as many), the other axes
    keeping their order; negative axes count from the end (np.moveaxis, torch.movedim). An int ``destination``
    for several sources is where the first of them lands, the rest following it (-1: they end the shape)."""
    ndim = len(as_node(x).shape)
    source = _distinct_axes(x, source)
    if isinstance(destination, (int, np.integer)) and not isinstance(destination, bool) and len(source) > 1:
        start = _axis(x, destination, insert=1 - len(source))
        destination = range(start, start + len(source))
    destination = _distinct_axes(x, destination)
    if len(source) != len(destination):
        raise ShapeError(f"moveaxis takes as many destinations as sources, got {source} and {destination} "
                         f"(at {user_source()})")
    if not ndim:                # a 0-d tensor takes axis 0 or -1 and is itself, as in torch
        return x
    order = [a for a in range(ndim) if a not in source]
    for to, axis in sorted(zip(destination, source)):
        order.insert(to, axis)
    return transpose(x, order)


def _distinct_axes(x, axes) -> tuple[int, ...]:
    """``axes`` (an int or a sequence) of ``x`` as non-negative indices, in their order; none repeated."""
    axes = tuple(_axis(x, a) for a in ((axes,) if isinstance(axes, (int, np.integer)) else axes))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"repeated axis in {axes} (at {user_source()})")
    return axes


def _int_tuple(op: str, argument: str, value, minimum=None) -> tuple[int, ...]:
    """``value``, an int or a sequence of ints (each at least ``minimum``), as a tuple; else a ShapeError naming
    ``op`` and ``argument``."""
    values = (value,) if isinstance(value, (int, np.integer)) else tuple(value) \
        if isinstance(value, (tuple, list)) else None
    if values is None or not builtins.all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and (
            minimum is None or v >= minimum) for v in values):
        raise ShapeError(f"{op}'s {argument} must be an int{'' if minimum is None else f' >= {minimum}'} or a "
                         f"sequence of them, got {value!r} (at {user_source()})")
    return tuple(int(v) for v in values)


def _concrete(op: str, x, axis: int) -> int:
    dim = as_node(x).shape[axis]
    if isinstance(dim, str):
        raise ShapeError(f"{op} needs a concrete length on axis {axis}, not the symbolic {dim}: trace with a concrete "
                         f"size (at {user_source()})")
    return dim


def flip(x, dims):
    """``x`` with the entries along each axis of ``dims`` in reverse order (torch.flip): one slice of step −1 on
    each of them, which fused kernels read in place (symbolic sizes too)."""
    axes = set(_distinct_axes(x, dims))
    if not as_node(x).shape:       # nothing to reverse
        return x
    return x[tuple(slice(None, None, -1) if axis in axes else slice(None) for axis in range(len(as_node(x).shape)))]


def roll(x, shifts, dims=None):
    """out[..., (i + s) mod n, ...] = x[..., i, ...] along each axis of ``dims`` by its shift s (torch.roll): two
    slices joined; without ``dims`` the flattened tensor is rolled and given its shape back."""
    shifts = _int_tuple("roll", "shifts", shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll without dims takes one shift, got {shifts} (at {user_source()})")
        return reshape(roll(reshape(x, (-1,)), shifts, 0), as_node(x).shape)
    dims = tuple(_axis(x, d) for d in _int_tuple("roll", "dims", dims))
    if len(dims) != len(shifts):
        raise ShapeError(f"roll takes one shift per axis, got shifts {shifts} and dims {dims} (at {user_source()})")
    if not as_node(x).shape:
        return x
    for shift, axis in zip(shifts, dims):
        n = _concrete("roll", x, axis)
        k = shift % n if n else 0
        if k:
            before = (slice(None),) * axis
            x = concat([index(x, before + (slice(n - k, None),)), index(x, before + (slice(0, n - k),))], axis)
    return x


def repeat(x, *sizes):
    """``x`` tiled ``sizes[i]`` times along axis i (torch.Tensor.repeat, np.tile): more sizes than axes prepend axes
    of length 1; a broadcast of (1, n) blocks to (r, n) reshaped to r·n, whose gradient sums the copies."""
    sizes = _int_tuple("repeat", "sizes", _varargs(sizes), 0)
    shape = as_node(x).shape
    if len(sizes) < len(shape):
        raise ShapeError(f"repeat takes at least one size per axis of {format_shape(shape)}, got {sizes} "
                         f"(at {user_source()})")
    shape = (1,) * (len(sizes) - len(shape)) + shape
    blocks = reshape(x, [d for n in shape for d in (1, n)])
    tiled = broadcast_to(blocks, [d for r, n in zip(sizes, shape) for d in (r, n)])
    return reshape(tiled, [multiply(r, n) for r, n in zip(sizes, shape)])


def repeat_interleave(x, repeats, dim=None):
    """Each entry of ``x`` along ``dim`` repeated ``repeats`` times in place (torch.repeat_interleave): an int, or
    one count per entry (a concrete array, list or tuple; one count serves all). ``dim`` None flattens ``x`` first.
    Counts held by a traced tensor are refused: the result's length would depend on the data."""
    if isinstance(repeats, Tensor):
        raise TracingError(f"repeat_interleave's repeats is a traced tensor, so the result's length would depend on "
                           f"the data: pass the counts as a NumPy array or a list (at {user_source()})")
    if dim is None:
        x, dim = reshape(x, (-1,)), 0
    _not_scalar("repeat_interleave", x)
    axis = _axis(x, dim)
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts < 0).any():
        raise ShapeError(f"repeat_interleave's repeats must be ints >= 0 (one, or one per entry), got {repeats!r} "
                         f"(at {user_source()})")
    shape = as_node(x).shape
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(()))
        copies = broadcast_to(expand_dims(x, axis + 1), shape[:axis + 1] + (r,) + shape[axis + 1:])
        return reshape(copies, shape[:axis] + (multiply(shape[axis], r),) + shape[axis + 1:])
    n = _concrete("repeat_interleave", x, axis)
    if counts.size != n:
        raise ShapeError(f"repeat_interleave takes one count per entry of axis {axis} ({n}), got {counts.size} "
                         f"(at {user_source()})")
    return take(x, np.repeat(np.arange(n), counts), axis)


def chunk(x, chunks: int, dim: int = 0) -> list:
    """``x`` split along ``dim`` into parts of ⌈n / chunks⌉ (torch.chunk): the last one shorter, and fewer than
    ``chunks`` parts when that size covers n sooner; an empty axis gives ``chunks`` empty parts."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ShapeError(f"chunk's chunks must be an int >= 1, got {chunks!r} (at {user_source()})")
    _not_scalar("chunk", x)
    n = _concrete("chunk", x, _axis(x, dim))
    return split(x, -(-n // int(chunks)) if n else [0] * int(chunks), dim)


def unflatten(x, dim: int, sizes):
    """``x`` with axis ``dim`` split into axes of ``sizes``, whose product is its length; one size may be −1,
    inferred (torch.unflatten)."""
    sizes = _int_tuple("unflatten", "sizes", sizes, -1)
    if not sizes or sizes.count(-1) > 1:
        raise ShapeError(f"unflatten's sizes must be non-empty with at most one -1, got {sizes} (at {user_source()})")
    _not_scalar("unflatten", x)
    shape, axis = as_node(x).shape, _axis(x, dim)
    known = multiply(*(s for s in sizes if s != -1))
    length = divide(shape[axis], known) if -1 in sizes else shape[axis] if known == shape[axis] else None
    if length is None:
        raise ShapeError(f"unflatten cannot split axis {axis} of length {shape[axis]} into {sizes} "
                         f"(at {user_source()})")
    sizes = tuple(length if s == -1 else s for s in sizes)
    return reshape(x, shape[:axis] + sizes + shape[axis + 1:])


def diagonal(x, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The entries x[..., i, i + offset, ...] of axes ``dim1`` and ``dim2`` (torch.diagonal): those two axes go and
    the diagonal becomes the last one. Read as one strided slice of the two axes flattened: the gradient is 0 off
    the diagonal."""
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise ShapeError(f"diagonal's offset must be an int, got {offset!r} (at {user_source()})")
    axes = _distinct_axes(x, (dim1, dim2))
    if len(as_node(x).shape) < 2:
        raise ShapeError(f"diagonal takes a tensor of at least two axes, got {format_shape(as_node(x).shape)} "
                         f"(at {user_source()})")
    rows, cols = (_concrete("diagonal", x, a) for a in axes)
    x = moveaxis(x, axes, (-2, -1))
    length = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0 else builtins.min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    flat = reshape(x, as_node(x).shape[:-2] + (rows * cols,))
    return index(flat, (Ellipsis, slice(start, start + length * (cols + 1) - cols, cols + 1) if length else
                        slice(0, 0)))


_diagonal = diagonal        # diag's argument ``diagonal`` (torch's name) hides the function


def diag(x, diagonal: int = 0):
    """torch.diag: a 1-D ``x`` of n entries as the (n + |k|)² matrix holding it on diagonal k (zeros elsewhere);
    a 2-D one's diagonal k. The matrix is x with m zeros after each entry, flattened, so that entry i lands at
    i·(m + 1) plus the diagonal's start."""
    shape = as_node(x).shape
    if len(shape) == 2:
        return _diagonal(x, diagonal)
    if len(shape) != 1 or isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise ShapeError(f"diag takes a 1-D or 2-D tensor and an int diagonal, got {format_shape(shape)} and "
                         f"{diagonal!r} (at {user_source()})")
    n, k, dtype = _concrete("diag", x, 0), int(diagonal), as_node(x).dtype
    m = n + builtins.abs(k)
    spaced = reshape(concat([reshape(x, (n, 1)), zeros((n, m), dtype=dtype)], 1), (-1,))
    start = k if k >= 0 else -k * m
    filled = concat([zeros((start,), dtype=dtype), spaced, zeros((m * m,), dtype=dtype)], 0)
    return reshape(index(filled, slice(0, m * m)), (m, m))


def _along(op: str, x, dim, index_):
    """x and index made at least 1-D (a 0-d pair as torch's: one entry on axis 0), and ``dim`` normalized."""
    scalar = not as_node(x).shape
    axis = _axis(x, dim)
    if scalar and not as_node(index_).shape:
        return reshape(x, (1,)), reshape(index_, (1,)), 0, True
    return x, index_, axis, False


PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x, pad, mode: str = "constant", value=None):
    """torch.nn.functional.pad: ``pad`` holds (before, after) widths for the last axis, then the one before it, and
    so on; a negative width crops. ``"constant"`` fills with ``value`` (0 by default); ``"reflect"`` mirrors
    about the edge entry (width < n), ``"replicate"`` repeats it, ``"circular"`` wraps round (width ≤ n). These
    three take any number of axes (torch: the last one to three, with batch axes before) and are a take of
    source positions, whose gradient accumulates into the positions read more than once."""
    widths = _int_tuple("pad", "pad", pad)
    shape = as_node(x).shape
    if len(widths) % 2 or len(widths) // 2 > len(shape):
        raise ShapeError(f"pad takes (before, after) pairs for at most the {len(shape)} axes of "
                         f"{format_shape(shape)}, got {widths} (at {user_source()})")
    if mode not in PAD_MODES:
        raise ShapeError(f"pad's mode must be one of {', '.join(PAD_MODES)}, not {mode!r} (at {user_source()})")
    if mode != "constant" and value is not None:
        raise ShapeError(f"pad's {mode} mode takes no value (at {user_source()})")
    for k in range(len(widths) // 2):
        axis, before, after = len(shape) - 1 - k, widths[2 * k], widths[2 * k + 1]
        if before or after:
            x = _pad_axis(x, axis, before, after, mode, 0 if value is None else value)
    return x


def _pad_axis(x, axis, before, after, mode, value):
    n = _concrete("pad", x, axis)
    if n + before + after < 0:
        raise ShapeError(f"pad crops more than the {n} entries of axis {axis}: widths {before}, {after} "
                         f"(at {user_source()})")
    limit = {"reflect": n - 1, "circular": n, "replicate": n and math.inf}.get(mode, math.inf)
    if builtins.max(before, after) > limit:
        raise ShapeError(f"pad's {mode} mode takes widths of at most {limit} on axis {axis} of length {n}, got "
                         f"{before}, {after} (at {user_source()})")
    if mode != "constant":
        source = np.arange(-before, n + after)
        source = {"reflect": lambda p: np.where(p < 0, -p, np.where(p >= n, 2 * (n - 1) - p, p)),
                  "replicate": lambda p: np.clip(p, 0, n - 1), "circular": lambda p: p % n}[mode](source)
        return take(x, source, axis)
    shape, dtype = as_node(x).shape, as_node(x).dtype
    x = index(x, (slice(None),) * axis + (slice(builtins.max(-before, 0), n + builtins.min(after, 0)),))
    fill = [full(shape[:axis] + (builtins.max(w, 0),) + shape[axis + 1:], value, dtype) for w in (before, after)]
    return concat([fill[0]] * (before > 0) + [x] + [fill[1]] * (after > 0), axis)


def gather(x, dim: int, index):
    """out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (torch.gather): ``index`` has x's rank and is no longer
    than x on the other axes; the result has its shape. An index outside [0, n) raises ShapeError while tracing
    (a constant index) or BindingError when the graph runs, naming the axis. The gradient scatter-adds back."""
    x, index_, axis, scalar = _along("gather", x, dim, index)
    _check_constant_index("gather", index_, as_node(x).shape, axis)
    out = emit("take_along_axis", x, index_, axis=axis)
    return reshape(out, ()) if scalar else out


def _check_constant_index(op, index_, shape, axis):
    node = as_node(index_)
    n = shape[axis]
    if node.op == "constant" and node.value.dtype.kind in "iu" and isinstance(n, int):
        bad = (node.value < 0) | (node.value >= n)
        if bad.any():
            raise ShapeError(f"{op}: index {node.value[bad].flat[0]} is out of bounds for axis {axis} with size {n} "
                             f"(at {user_source()})")


def scatter(x, dim: int, index, src=None, value=None, reduce: str | None = None):
    """A copy of ``x`` with out[i][index[i][j][k]][k] = src[i][j][k] for dim 1 (torch.scatter): ``src`` a tensor
    at least as large as ``index`` (its leading block used) or ``value`` a number; which of repeated positions
    wins is the last (torch leaves it unspecified). ``reduce`` "add" or "multiply" combines instead, as torch's.
    Gradients: x's where not overwritten, src's gathered from the output's."""
    if reduce is not None:
        modes = {"add": "sum", "multiply": "prod"}
        if reduce not in modes:
            raise ShapeError(f"scatter's reduce must be None, 'add' or 'multiply', not {reduce!r} (at {user_source()})")
        return scatter_reduce(x, dim, index, _source("scatter", x, index, src, value), modes[reduce])
    return _put("scatter", x, dim, index, _source("scatter", x, index, src, value), "assign")


def scatter_add(x, dim: int, index, src):
    """A copy of ``x`` with src[i][j][k] added to out[i][index[i][j][k]][k] for dim 1, repeated positions
    accumulating (torch.scatter_add)."""
    return _put("scatter_add", x, dim, index, src, "sum")


def scatter_reduce(x, dim: int, index, src, reduce: str, include_self: bool = True):
    """torch.scatter_reduce: each out[i][index[i][j][k]][k] for dim 1 is the ``reduce`` ("sum", "prod", "mean",
    "amax", "amin") of the src entries sent there and, with ``include_self``, x's own entry; positions nothing is
    sent to keep x's. "mean" of integers rounds down, as torch's. Gradients are torch's: a product's is the
    product of the others, amax's and amin's are shared evenly between the entries equal to the result."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ShapeError(f"scatter_reduce's reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', not {reduce!r} "
                         f"(at {user_source()})")
    if not include_self:
        identity = {"sum": 0, "mean": 0, "prod": 1}.get(reduce)
        dtype = as_node(x).dtype
        if identity is None:
            limits = (-np.inf, np.inf) if dtype.kind == "f" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
            identity = limits[reduce == "amin"]
        x = _put("scatter_reduce", x, dim, index, full_like(index, identity, dtype), "assign")
    if reduce != "mean":
        return _put("scatter_reduce", x, dim, index, src, reduce)
    total = _put("scatter_reduce", x, dim, index, src, "sum")
    dtype = as_node(x).dtype
    count = _put("scatter_reduce", full_like(x, int(include_self), dtype), dim, index, full_like(index, 1, dtype),
                 "sum")
    count = maximum(count, 1)
    return floor_divide(total, count) if dtype.kind in "iu" else total / count


def _source(op, x, index, src, value):
    if (src is None) == (value is None):
        raise ShapeError(f"{op} takes either src (a tensor) or value (a number) (at {user_source()})")
    return full_like(index, value, as_node(x).dtype) if src is None else src


def _put(op: str, x, dim, positions, src, reduce: str):
    """put_along_axis of ``src`` cut to the shape of the index ``positions`` (torch lets src be larger)."""
    x, index_, axis, scalar = _along(op, x, dim, positions)
    if scalar:
        src = reshape(src, (1,))
    shape, source = as_node(index_).shape, as_node(src).shape
    if len(source) != len(shape) or not builtins.all(isinstance(s, int) and isinstance(n, int) and s >= n or s == n
                                                      for s, n in zip(source, shape)):
        raise ShapeError(f"{op}'s src {format_shape(source)} must have the rank of its index and be at least as "
                         f"long on every axis, index {format_shape(shape)} (at {user_source()})")
    if source != shape:
        src = index(src, tuple(slice(0, n) for n in shape))
    _check_constant_index(op, index_, as_node(x).shape, axis)
    out = emit("put_along_axis", x, index_, src, axis=axis, reduce=reduce)
    return reshape(out, ()) if scalar else out


def index_select(x, dim: int, index):
    """The entries of ``x`` along ``dim`` at a 1-D (or 0-d) integer ``index``, in its order (torch.index_select):
    the axis keeps its place with the index's length. Negative indices count from the end (torch refuses them)."""
    if len(as_node(index).shape) > 1:
        raise ShapeError(f"index_select takes a 1-D index, got {format_shape(as_node(index).shape)} "
                         f"(at {user_source()})")
    if not as_node(x).shape:
        _axis(x, dim)
        return take(reshape(x, (1,)), index)
    return take(x, reshape(index, (-1,)), dim)


def masked_fill(x, mask, value):
    """``value`` (a number, or a 0-d tensor whose gradient sums over the filled entries) where the boolean
    ``mask``, broadcast to x's shape, is True; x elsewhere (torch.masked_fill)."""
    node, mask_node = as_node(x), as_node(mask)
    if mask_node.dtype != np.bool_:
        raise DTypeError(f"masked_fill's mask must be bool, not {mask_node.dtype} (at {user_source()})")
    if _broadcast_shape(mask_node.shape, node.shape) != node.shape:
        raise ShapeError(f"masked_fill's mask {format_shape(mask_node.shape)} does not broadcast to the tensor's "
                         f"shape {format_shape(node.shape)} (at {user_source()})")
    if isinstance(value, (Tensor, np.ndarray)):
        if as_node(value).shape:
            raise ShapeError(f"masked_fill's value must be a number or a 0-d tensor, got shape "
                             f"{format_shape(as_node(value).shape)} (at {user_source()})")
        value = astype(value, node.dtype)
    elif not isinstance(value, (int, float)):
        raise DTypeError(f"masked_fill's value must be a number or a 0-d tensor, not {type(value).__name__} "
                         f"(at {user_source()})")
    elif _is_python_number(value) and isinstance(value, int) and node.dtype.kind in "iu":
        value = lift_scalars("masked_fill", x, value)[1]
    else:
        value = constant(value, node.dtype)
    return where(mask, value, x)


def _broadcast_shape(a, b):
    try:
        return broadcast(a, b)
    except ValueError:
        return None


def masked_select(x, mask) -> np.ndarray:
    """The entries of ``x`` where the boolean ``mask`` (broadcast with x) is True, in order, as a 1-D array
    (torch.masked_select), on NumPy arrays only: inside a graph the result's length would depend on the data."""
    _eager("masked_select", "ag.where(mask, x, 0) or ag.masked_fill(x, ~mask, 0), which keep the shape", x, mask)
    x, mask = np.asarray(x), np.asarray(mask)
    if mask.dtype != np.bool_:
        raise DTypeError(f"masked_select's mask must be bool, not {mask.dtype}")
    x, mask = np.broadcast_arrays(x, mask)
    return x[mask]


def nonzero(x, as_tuple: bool = False):
    """The int64 indices of the non-zero entries of ``x``, one row (i, j, ...) each in C order (torch.nonzero),
    or with ``as_tuple`` one array per axis (a 0-d x counts as 1-d); on NumPy arrays only: inside a graph the
    number of rows would depend on the data."""
    _eager("nonzero", "ag.where(x != 0, ...) or a mask multiplied in, which keep the shape", x)
    x = np.asarray(x)
    if as_tuple:
        return tuple(i.astype(np.int64) for i in np.nonzero(np.atleast_1d(x)))
    return np.argwhere(x).astype(np.int64)


def _eager(op: str, alternative: str, *arrays):
    if builtins.any(isinstance(a, Tensor) for a in arrays):
        raise TracingError(f"{op} of a traced tensor: the result's shape depends on the data, which a graph does not "
                           f"know until it runs. Use {alternative}; or call {op} on NumPy arrays "
                           f"(at {user_source()})")


def arange(start, end=None, step=1, *, dtype=None, axis=None):
    """Two forms, told apart by the first argument:

    - numbers, as torch.arange: ``arange(end)``, ``arange(start, end)``, ``arange(start, end, step)`` are
      start + i·step for i = 0, 1, ... while below ``end`` (above it for a negative step), ⌈(end − start)/step⌉
      values computed in float64; int64 when every argument is an int, else float32 (or ``dtype``).
      ``arange(n)`` with a symbolic dimension n (``x.shape[0]``, ``"T"``) is 0, ..., n − 1, n bound at run time.
    - a tensor ``x``: ``arange(x, axis=-1)`` (the axis may come second) is 0, 1, ..., n − 1 (int64), n the
      length of ``x`` along ``axis``, read when the graph runs: positions, as models use them."""
    if _is_number(start) or isinstance(start, str):
        if axis is not None:
            raise TracingError(f"arange of numbers takes no axis (at {user_source()})")
        return _arange_numbers(*((0, start) if end is None else (start, end)), step, dtype)
    if end is not None and axis is not None or step != 1 or dtype is not None:
        raise TracingError(f"arange of a tensor takes an axis only, as arange(x, axis) (at {user_source()})")
    _not_scalar("arange", start)
    axis = -1 if end is None and axis is None else end if axis is None else axis
    return emit("arange", start, axis=_axis(start, axis))


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _arange_numbers(start, end, step, dtype):
    """torch.arange(start, end, step); a symbolic ``end`` from 0 by 1 gives the positions of a tensor that long."""
    if isinstance(end, str):
        if start != 0 or step != 1:
            raise ShapeError(f"arange to a symbolic end {end!r} starts at 0 with step 1 (at {user_source()})")
        positions = arange(zeros((end,), dtype=np.bool_), 0)
        return positions if dtype is None else astype(positions, _real_dtype("arange", dtype))
    _numbers("arange", start=start, end=end, step=step)
    if step == 0:
        raise ShapeError(f"arange's step must be non-zero (at {user_source()})")
    if (end - start) * step < 0:
        raise ShapeError(f"arange from {start} to {end} never gets there by step {step}: the step's sign must be "
                         f"the sign of end - start (at {user_source()})")
    integers = builtins.all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    count = -(-(int(end) - int(start)) // int(step)) if integers else math.ceil((end - start) / step)
    dtype = _real_dtype("arange", (np.int64 if integers else np.float32) if dtype is None else dtype)
    values = int(start) + np.arange(count, dtype=np.int64) * int(step) if integers \
        else float(start) + np.arange(count, dtype=np.float64) * float(step)
    return constant(values.astype(dtype))


def relative_distance(q, k, max_distance: int):
    """(Tq, Tk) int64 indices clip(j − i, −k, k) + k of query i and key j (Shaw et al. 2018); the lengths
    are the second-to-last axes of ``q`` and ``k``; ``max_distance`` k is an int ≥ 0."""
    if isinstance(max_distance, bool) or not isinstance(max_distance, (int, np.integer)) or max_distance < 0:
        raise ShapeError(f"max_distance must be an int >= 0, got {max_distance!r} (at {user_source()})")
    return emit("relative_distance", q, k, max_distance=int(max_distance))


def embedding(table, indices, padding_idx: int | None = None):
    """``table[indices]``: one row of a (vocabulary, features) table per integer index (torch's F.embedding, the
    table first). The rows looked up at ``padding_idx`` (negative: counted from the end) get no gradient, so a
    padding token's row is never trained: where(indices = p, stop_gradient(rows), rows)."""
    rows = emit("gather", table, indices)
    if padding_idx is None:
        return rows
    n, dtype = _concrete("embedding", table, 0), as_node(indices).dtype
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) or not -n <= padding_idx < n:
        raise ShapeError(f"embedding's padding_idx must be an int in [{-n}, {n - 1}] (a row of the table), got "
                         f"{padding_idx!r} (at {user_source()})")
    padding_idx = int(padding_idx) % n
    if padding_idx > np.iinfo(dtype).max:                   # no index of this dtype reaches it
        return rows
    return where(expand_dims(equal(indices, padding_idx), -1), stop_gradient(rows), rows)


def matmul(a, b):
    """Matrix product with NumPy semantics: batch axes broadcast; a 1-D operand is a vector."""
    a_vec, b_vec = len(as_node(a).shape) == 1, len(as_node(b).shape) == 1
    if a_vec:
        a = reshape(a, (1,) + as_node(a).shape)
    if b_vec:
        b = reshape(b, as_node(b).shape + (1,))
    out = emit("matmul", a, b)
    if a_vec or b_vec:
        shape = out.shape[:-2] + (() if a_vec else out.shape[-2:-1]) + (() if b_vec else out.shape[-1:])
        out = reshape(out, shape)
    return out


def _last_axis(op, x, axis, mask, causal):
    """Run a last-axis kernel on any axis by moving that axis last and back; a 0-d tensor as a row of one
    (axis 0 or -1, as PyTorch: the softmax of a scalar is 1, its log-softmax 0)."""
    ndim = len(as_node(x).shape)
    axis = _axis(x, axis)
    if not ndim:
        mask = None if mask is None else reshape(mask, (1,))
        return reshape(_last_axis(op, reshape(x, (1,)), -1, mask, causal), ())
    if causal and axis != ndim - 1:
        raise ShapeError("causal masking applies to the last axis (keys)")
    if axis != ndim - 1:
        if mask is not None:
            mask = moveaxis(broadcast_to(mask, as_node(x).shape), axis, ndim - 1)
        return moveaxis(_last_axis(op, moveaxis(x, axis, ndim - 1), -1, mask, causal), ndim - 1, axis)
    return emit(op, x, *([] if mask is None else [mask]), causal=causal)


def softmax(x, axis: int = -1, mask=None, causal: bool = False):
    """exp(xᵢ − max x) / Σⱼ exp(xⱼ − max x) over the entries ``mask`` allows (True = may attend).
    Masked entries, and whole rows with nothing allowed, are 0 — never NaN — and get zero gradient.
    ``causal=True`` also forbids key j for query i unless j ≤ i + (Tk − Tq) (bottom-right aligned)."""
    return _last_axis("softmax", x, axis, mask, causal)


def softmin(x, axis: int = -1, mask=None, causal: bool = False):
    """softmax(−x): exp(−xᵢ) / Σⱼ exp(−xⱼ) over the entries ``mask`` allows (torch.nn.functional.softmin)."""
    return softmax(-x, axis, mask, causal)


def normalize(x, p: float = 2.0, axis=1, eps: float = 1e-12):
    """x / max(‖x‖_p, eps) over ``axis`` (an int or a tuple; 1 by default, as torch.nn.functional.normalize's dim),
    ‖x‖_p = (Σ|x|ᵖ)^(1/p), the largest |x| for p = inf; p > 0. A zero vector stays zero, with the gradient
    1/eps of torch (the norm's own gradient there is 0, not 0·∞ = NaN: the root is taken of 1 in its place)."""
    _numbers("normalize", eps=eps)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p > 0:
        raise ShapeError(f"normalize's p must be a number > 0 (inf for the largest |x|), got {p!r} "
                         f"(at {user_source()})")
    if eps < 0:
        raise ShapeError(f"normalize's eps must be >= 0, got {eps!r} (at {user_source()})")
    _floating("normalize", x)
    axes = _axes(x, axis)
    if p == math.inf:
        norm = max(abs(x), axes, keepdims=True)
    else:
        total = sum(abs(x) ** float(p), axes, keepdims=True)
        vanished = equal(total, 0)
        norm = where(vanished, 0.0, where(vanished, 1.0, total) ** (1 / p))
    return x / maximum(norm, float(eps))


def log_softmax(x, axis: int = -1, mask=None, causal: bool = False):
    """x − logsumexp(x) over the allowed entries; masked entries are 0 (not −inf) with zero gradient."""
    return _last_axis("log_softmax", x, axis, mask, causal)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    """(x − mean) / √(var + ε) · γ + β over the last axis, biased variance with ε inside the root
    (Ba et al. 2016; as PyTorch). Missing γ / β mean 1 / 0."""
    node = as_node(x)
    d = node.shape[-1]
    weight = np.ones(d, node.dtype) if weight is None else weight
    bias = np.zeros(d, node.dtype) if bias is None else bias
    return emit("layer_norm", x, weight, bias, eps=float(eps))


def dropout(x, p: float, training: bool = True):
    """Zero each element with probability ``p`` and scale the rest by 1/(1−p) while training; identity
    otherwise. Masks come from a counter-based generator keyed by the graph's ``rng_seed`` input and the
    node, so the backward pass recomputes the same mask instead of storing it."""
    if not training or p == 0:
        return x
    graph = current_graph()
    key = builtins.sum(1 for n in graph.nodes if n.op == "dropout")
    return emit("dropout", x, rng_seed(graph), p=float(p), key=key)


def rng_seed(graph):
    """The graph's ``rng_seed`` input (int64 scalar), added the first time an op needs randomness."""
    seed = graph.inputs.get("rng_seed")
    if seed is None:
        seed = add_node("input", (), {}, (), np.int64, name="rng_seed", scope="", stop_gradient=True)
    return Tensor(seed)


def _varargs(args: tuple) -> tuple:
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


def _reflected(f):
    return lambda self, other: f(other, self)


class Tensor:
    """A symbolic value of the graph being traced: ``node`` is its node. Its operators and methods are the
    functions above; ``==`` stays identity (use ``ag.equal``), and ``bool(tensor)`` raises, because a Python
    branch cannot depend on a value that exists only when the graph runs."""

    __array_priority__ = 100
    __array_ufunc__ = None      # NumPy defers to our operators: ``array @ tensor`` builds a node
    __slots__ = ("node",)
    __hash__ = object.__hash__

    def __init__(self, node: Node):
        self.node = node

    shape = property(lambda self: self.node.shape)
    dtype = property(lambda self: self.node.dtype)
    ndim = property(lambda self: len(self.shape))
    name = property(lambda self: self.node.name)

    __add__, __sub__, __mul__, __truediv__, __pow__, __matmul__ = add, sub, mul, div, pow, matmul
    __radd__, __rsub__, __rmul__ = _reflected(add), _reflected(sub), _reflected(mul)
    __rtruediv__, __rpow__, __rmatmul__ = _reflected(div), _reflected(pow), _reflected(matmul)
    __lt__, __le__, __gt__, __ge__ = less, less_equal, greater, greater_equal
    __floordiv__, __mod__, __rfloordiv__, __rmod__ = floor_divide, remainder, _reflected(floor_divide), \
        _reflected(remainder)
    __and__, __or__, __xor__, __invert__, __neg__ = bitwise_and, bitwise_or, bitwise_xor, bitwise_not, neg
    __rand__, __ror__, __rxor__ = _reflected(bitwise_and), _reflected(bitwise_or), _reflected(bitwise_xor)
    __lshift__, __rshift__, __rlshift__, __rrshift__ = left_shift, right_shift, _reflected(left_shift), \
        _reflected(right_shift)
    __getitem__ = index
    T = property(transpose)
    mT = property(lambda self: swapaxes(self, -1, -2))
    sum, mean, max, min, logsumexp, astype, clip = sum, mean, max, min, logsumexp, astype, clip
    prod, any, all, cumsum, cumprod, cummax, cummin = prod, any, all, cumsum, cumprod, cummax, cummin
    exp, log, sqrt, tanh, sigmoid, relu, abs = exp, log, sqrt, tanh, sigmoid, relu, abs
    flip, roll, repeat, repeat_interleave, chunk, unflatten, diagonal = (flip, roll, repeat, repeat_interleave, chunk,
                                                                         unflatten, diagonal)
    gather, scatter, scatter_add, scatter_reduce, index_select, masked_fill = (gather, scatter, scatter_add,
                                                                               scatter_reduce, index_select, masked_fill)

    def reshape(self, *shape):
        return reshape(self, _varargs(shape))

    def transpose(self, *axes):
        return transpose(self, _varargs(axes) or None)

    def __repr__(self):
        return f"Tensor({format_shape(self.shape)}, {self.dtype}, op={self.node.op}, {self.node.label})"

    def __bool__(self):
        raise TracingError(
            f"cannot branch on a traced value ({self.node.describe()}): its value exists only when the "
            "graph runs. Use ag.where(cond, a, b) to select between values, or a Python value for control "
            "flow.")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        if isinstance(self.shape[0], str):
            raise TracingError(f"len() of a tensor whose first dimension is symbolic ({self.shape[0]})")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))
