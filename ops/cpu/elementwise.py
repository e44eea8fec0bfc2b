"""Elementwise ops: one scalar definition each, compiled by numba.vectorize into a NumPy ufunc.

Each op broadcasts like NumPy and returns a new C-contiguous array (0-d for 0-d inputs) of the inputs'
common dtype (NumPy's result_type), or of bool for predicates. Its loop is compiled lazily, and cached on
disk, for the exact dtypes of the inputs and that result dtype, and always used for them: a bare DUFunc
would let NumPy run float32 inputs through an already compiled float64 loop, since NumPy takes the first
loop its inputs cast to safely, and Numba's own typing would widen int32 or bool arithmetic to int64
(integer results wrap around in their dtype, as in NumPy and PyTorch). Constants are built as type(x)(c)
so that float32 stays float32.
"""
import builtins
import functools
import math

import numba
import numpy as np

from ops.cpu import mathfn


class Elementwise:
    """A lazily compiled ufunc that runs the loop compiled for its inputs' exact dtypes."""

    def __init__(self, scalar_fn, boolean: bool = False):
        functools.update_wrapper(self, scalar_fn)
        self.boolean = boolean      # a predicate: the result is bool whatever the inputs
        self._loops = {}            # input dtypes -> the ufunc with the `signature` that selects their loop

    @functools.cached_property
    def dufunc(self):
        """Numba's ufunc of the scalar function, made at first use: making all forty at import, each looking up its
        disk cache, took about a quarter of a second."""
        return numba.vectorize(cache=True)(self.__wrapped__)

    def __call__(self, *args):
        arrays = [np.asarray(a) for a in args]
        return self.for_dtypes(*(a.dtype for a in arrays))(*arrays)

    def for_dtypes(self, *dtypes):
        """The op for inputs of exactly these dtypes, its loop compiled if new: the plain NumPy ufunc with the
        loop's ``signature`` bound, which skips the type dispatch of ``__call__`` on every call (the executor
        asks once per node). ``out=...`` makes 0-d results arrays, not NumPy scalars."""
        loop = self._loops.get(dtypes)
        if loop is None:
            result = np.dtype(np.bool_) if self.boolean else np.result_type(*dtypes)
            self.dufunc.add(numba.from_dtype(result)(*map(numba.from_dtype, dtypes)))
            loop = self._loops[dtypes] = self._bind(dtypes + (result,))
        return loop

    def _bind(self, signature):
        return functools.partial(self.dufunc.ufunc, signature=signature, order="C", out=...)


class NanQuiet(Elementwise):
    """An Elementwise op whose exact results raise no floating-point warning, as NumPy's do not: NaN inputs no
    'invalid value', huge ones no 'overflow' (``ignore`` names the warnings kept quiet: exp keeps its overflow
    warning, as NumPy's exp does).

    Compiled ordered comparisons set the CPU's invalid flag on NaN, which NumPy reports after the loop (maximum,
    relu, the predicates, and the vectorized float32 exp), and mathfn's tanh, sigmoid and GELU compute both sides
    of their branches, one of which may overflow where the result taken (±1, 0 or x) is exact."""

    def __init__(self, scalar_fn, boolean: bool = False, ignore: tuple[str, ...] = ("invalid", "over")):
        super().__init__(scalar_fn, boolean)
        self.ignore = dict.fromkeys(ignore, "ignore")

    def _bind(self, signature):
        loop = super()._bind(signature)

        def quiet(*arrays):
            with np.errstate(**self.ignore):
                return loop(*arrays)
        return quiet


predicate = functools.partial(Elementwise, boolean=True)
nan_quiet_predicate = functools.partial(NanQuiet, boolean=True)


@Elementwise
def add(a, b):
    """a + b"""
    return a + b


@Elementwise
def sub(a, b):
    """a - b"""
    return a - b


@Elementwise
def mul(a, b):
    """a * b"""
    return a * b


@Elementwise
def div(a, b):
    """a / b (IEEE: x/0 is +-inf or NaN)"""
    return a / b


@Elementwise
def neg(a):
    """-a"""
    return -a


@Elementwise
def pow(a, b):
    """a ** b"""
    return a ** b


@functools.partial(NanQuiet, ignore=("invalid",))
def exp(x):
    """e**x"""
    return mathfn.exp(x)


@Elementwise
def log(x):
    """ln x (-inf at 0, NaN below)"""
    return math.log(x)


@Elementwise
def sqrt(x):
    """sqrt(x) (NaN below 0)"""
    return math.sqrt(x)


@NanQuiet
def tanh(x):
    """tanh x"""
    return mathfn.tanh(x)


@NanQuiet
def sigmoid(x):
    """1 / (1 + e**-x)"""
    return mathfn.sigmoid(x)


@Elementwise
def erf(x):
    """erf x"""
    return mathfn.erf(x)


@Elementwise
def sin(x):
    """sin x (NaN at +-inf)"""
    return math.sin(x)


@Elementwise
def cos(x):
    """cos x (NaN at +-inf)"""
    return math.cos(x)


@Elementwise
def rsqrt(x):
    """1 / sqrt(x) (+inf at 0, NaN below)"""
    return type(x)(1) / math.sqrt(x)


@NanQuiet
def silu(x):
    """x * sigmoid(x), the SiLU or swish (Elfwing et al. 2018)"""
    return x * mathfn.sigmoid(x)


@NanQuiet
def softplus(x, beta, threshold):
    """ln(1 + e^(βx)) / β, and x itself where βx > threshold, as PyTorch's softplus (β = 1 and threshold 20 by
    default, where the two agree to the last bit of float64)"""
    return x if x * beta > threshold else math.log1p(mathfn.exp(x * beta)) / beta


WHOLE = 4503599627370496.0      # 2⁵²: every float at least this large (and ±inf, NaN) is a whole number already


@NanQuiet
def floor(x):
    """⌊x⌋ (-0.5 gives -1, -0 stays -0; ±inf and NaN stay)"""
    return math.copysign(type(x)(math.floor(x)), x) if builtins.abs(x) < WHOLE else x


@NanQuiet
def ceil(x):
    """⌈x⌉ (-0.5 gives -0)"""
    return math.copysign(type(x)(math.ceil(x)), x) if builtins.abs(x) < WHOLE else x


@NanQuiet
def trunc(x):
    """x rounded toward 0 (-2.5 gives -2, -0.5 gives -0)"""
    return math.copysign(type(x)(math.trunc(x)), x) if builtins.abs(x) < WHOLE else x


@NanQuiet
def round(x):
    """x rounded to the nearest whole number, halves to the even one (torch.round, np.rint: 2.5 gives 2)"""
    if not builtins.abs(x) < WHOLE:
        return x
    whole = math.floor(x)
    rest = x - whole
    whole += 1 if rest > 0.5 or (rest == 0.5 and whole % 2 == 1) else 0
    return math.copysign(type(x)(whole), x)


@NanQuiet
def sign(x):
    """-1, 0 or 1 as x is negative, zero or positive (-0 gives +0, as NumPy and PyTorch), NaN stays NaN"""
    return type(x)(1) if x > 0 else type(x)(-1) if x < 0 else x - x


@predicate
def isnan(x):
    """x is NaN"""
    return x != x


@predicate
def isinf(x):
    """x is +inf or -inf"""
    return x == math.inf or x == -math.inf


@predicate
def isfinite(x):
    """x is neither NaN nor ±inf"""
    return x == x and x != math.inf and x != -math.inf


@Elementwise
def tan(x):
    """tan x (NaN at ±inf)"""
    return math.tan(x)


@Elementwise
def asin(x):
    """arcsin x (NaN beyond [-1, 1])"""
    return math.asin(x)


@Elementwise
def acos(x):
    """arccos x (NaN beyond [-1, 1])"""
    return math.acos(x)


@Elementwise
def atan(x):
    """arctan x (±π/2 at ±inf)"""
    return math.atan(x)


@Elementwise
def atan2(a, b):
    """the angle of the point (b, a): arctan(a/b) in the right quadrant, in [-π, π] (C's atan2 at ±0 and ±inf)"""
    return math.atan2(a, b)


@Elementwise
def sinh(x):
    """sinh x"""
    return math.sinh(x)


@Elementwise
def cosh(x):
    """cosh x"""
    return math.cosh(x)


@Elementwise
def asinh(x):
    """arsinh x = ln(x + √(x² + 1))"""
    return math.asinh(x)


@Elementwise
def acosh(x):
    """arcosh x (NaN below 1)"""
    return math.acosh(x)


@Elementwise
def atanh(x):
    """artanh x (±inf at ±1, NaN beyond)"""
    return math.atanh(x)


@Elementwise
def log2(x):
    """log₂ x (exact at powers of 2)"""
    return math.log2(x)


@Elementwise
def log10(x):
    """log₁₀ x (exact at powers of 10)"""
    return math.log10(x)


@Elementwise
def exp2(x):
    """2ˣ (exact at integers)"""
    return type(x)(2) ** x


@Elementwise
def expm1(x):
    """eˣ - 1, accurate near 0 where exp(x) - 1 cancels"""
    return math.expm1(x)


@Elementwise
def log1p(x):
    """ln(1 + x), accurate near 0 where log(1 + x) loses x's low bits"""
    return math.log1p(x)


@NanQuiet
def logaddexp(a, b):
    """ln(eᵃ + eᵇ) = max + ln(1 + e^-|a - b|), without overflow; a + ln 2 where a = b (±inf too)"""
    if a == b:
        return a + type(a)(0.6931471805599453)
    return (a if a > b else b) + math.log1p(mathfn.exp(-builtins.abs(a - b)))


@Elementwise
def copysign(a, b):
    """|a| with the sign of b (-0 and NaN's sign bit count)"""
    return math.copysign(a, b)


@NanQuiet
def floor_divide(a, b):
    """⌊a / b⌋, as Python's // and torch.floor_divide: floats from fmod, exact (7.5 // 0 is inf, 0 // 0 NaN); an
    integer divided by 0 gives 0 (PyTorch raises ZeroDivisionError)"""
    return a // b


@NanQuiet
def remainder(a, b):
    """a − b⌊a / b⌋, with the sign of b, as Python's % and torch.remainder (NaN at b = 0 for floats, 0 for
    integers)"""
    return a % b


@NanQuiet
def fmod(a, b):
    """a − b·trunc(a / b), with the sign of a, as C's fmod and torch.fmod (NaN at b = 0 for floats, 0 for
    integers)"""
    if type(a)(0.5) != 0:       # a float type: numba compiles both branches for each type and drops the other
        return type(a)(np.fmod(a, b))
    r = a % b
    return r - b if r != 0 and (r < 0) != (a < 0) else r


@Elementwise
def bitwise_and(a, b):
    """a & b on integers"""
    return a & b


@Elementwise
def bitwise_or(a, b):
    """a | b on integers"""
    return a | b


@Elementwise
def bitwise_xor(a, b):
    """a ^ b on integers"""
    return a ^ b


@Elementwise
def bitwise_not(a):
    """~a on integers (−a − 1 for signed ones)"""
    return ~a


@Elementwise
def left_shift(a, b):
    """a << b wrapping round a's dtype, 0 where b < 0 or b ≥ the dtype's width, as torch's <<"""
    return type(a)(np.int64(a) << np.int64(b)) if 0 <= b < 64 else a - a


@Elementwise
def right_shift(a, b):
    """a >> b (arithmetic: the sign fills in), the sign alone (0 or −1) where b < 0 or b ≥ the dtype's width, as
    torch's >>"""
    return type(a)(np.int64(a) >> np.int64(b if 0 <= b < 64 else 63))


@Elementwise
def abs(x):
    """|x| (|-0| = 0), NaN stays NaN"""
    return builtins.abs(x)


@NanQuiet
def clip(x, lo, hi):
    """min(max(x, lo), hi), as torch.clamp: hi everywhere when lo > hi; NaN stays NaN"""
    y = lo if x < lo else x
    return hi if y > hi else y


@NanQuiet
def relu(x):
    """max(x, 0), NaN stays NaN"""
    return x if not x <= 0 else type(x)(0)


@NanQuiet
def maximum(a, b):
    """the larger of a and b, NaN if either is NaN"""
    return np.maximum(a, b)


@NanQuiet
def minimum(a, b):
    """the smaller of a and b, NaN if either is NaN"""
    return np.minimum(a, b)


@Elementwise
def where(cond, a, b):
    """a where cond is True, else b"""
    return a if cond else b


@predicate
def equal(a, b):
    """a == b"""
    return a == b


@predicate
def not_equal(a, b):
    """a != b"""
    return a != b


@nan_quiet_predicate
def less(a, b):
    """a < b"""
    return a < b


@nan_quiet_predicate
def less_equal(a, b):
    """a <= b"""
    return a <= b


@nan_quiet_predicate
def greater(a, b):
    """a > b"""
    return a > b


@nan_quiet_predicate
def greater_equal(a, b):
    """a >= b"""
    return a >= b


@predicate
def logical_and(a, b):
    """a and b, as bool"""
    return bool(a) and bool(b)


@predicate
def logical_or(a, b):
    """a or b, as bool"""
    return bool(a) or bool(b)


@predicate
def logical_not(a):
    """not a, as bool"""
    return not a


def astype(x, dtype):
    """x converted to ``dtype`` (a new array)."""
    return np.asarray(x).astype(dtype)


def bitcast(x, dtype):
    """x's bits read as ``dtype`` of the same itemsize: a view."""
    return np.asarray(x).view(dtype)


KERNELS = {**{name: op for name, op in globals().items() if isinstance(op, Elementwise)}, "astype": astype,
           "bitcast": bitcast}
