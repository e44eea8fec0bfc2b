"""Scalar math for compiled kernels: exp, tanh, sigmoid, erf, GELU and its derivative, maximum.

Call these from @njit or @vectorize code; numba inlines the variant that matches the argument:
- float64 gets libm (math.exp, math.tanh, math.erf): gradient checks run in float64 and need ~1e-15.
- float32 gets short polynomials that LLVM vectorizes. PyPI's llvmlite has no SVML, so math.exp in a
  loop is a scalar libm call; these run 5-10x faster, with relative error < 2e-7 (exp) and absolute
  error < 3e-7 (tanh, sigmoid) and < 5e-7 (erf). tests/ops/test_mathfn.py checks them on their own.
  Each polynomial is evaluated by fused multiply-adds (``_fma``), so that kernels compiled without
  fastmath's contraction, as the elementwise and fused ones are (their results must not depend on how
  ops are grouped), get them too: tanh 62-77 -> 42-49 µs for 65,536 elements, sigmoid 62-69 -> 48-50.
- maximum(a, b) is llvm.maximum: a max-reduction written with it vectorizes (5x faster), one written as
  a compare and select does not.
Called from Python, each function is its accurate definition.

The float32 code has no inf or NaN constants and no NaN-losing clamps: NaN inputs give NaN, under
``FASTMATH`` too. Numba's cache does not notice edits here from the kernels that inline these functions;
ops/cpu/__init__.py clears the cache when this file changes.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

f32 = np.float32

# The fast-math flags of the kernels that must keep IEEE NaN and Inf: fastmath=True adds nnan and ninf, under
# which LLVM may take any NaN or Inf for poison (fold isnan to False, a maximum to maxnum, x - x to 0). reassoc
# alone lets the reductions vectorize; measured on softmax, layer norm, cross-entropy and attention, these
# flags run at the speed of fastmath=True. (A set: numba takes no other collection.)
FASTMATH = {"reassoc", "contract", "arcp", "nsz", "afn"}


def exp(x):
    """e**x."""
    return math.exp(x)


def tanh(x):
    """(e**x - e**-x) / (e**x + e**-x)."""
    return math.tanh(x)


def erf(x):
    """2/sqrt(pi) * integral of e**(-t**2) from 0 to x."""
    return math.erf(x)


def sigmoid(x):
    """1 / (1 + e**-x), computed from e**-|x| so that it never overflows."""
    e = exp(-abs(x))
    s = type(x)(1) / (type(x)(1) + e)
    return s if x >= 0 else e * s


def gelu_tanh(x):
    """GELU's tanh approximation 0.5 x (1 + tanh u), u = √(2/π) (x + 0.044715 x³) (Hendrycks & Gimpel 2016),
    computed as x σ(2u) = x / (1 + e^(−2u)): one exp and one division, half the work of a tanh."""
    t = type(x)
    minus_two_u = t(-2 * _SQRT_2_OVER_PI) * (x + t(0.044715) * x * x * x)
    return t(0) if minus_two_u > _GELU_CUT else x / (t(1) + exp(minus_two_u))


def gelu_tanh_derivative(x):
    """d/dx gelu_tanh(x) = s + x u' s (1 − s) with s = σ(2u), u' = 2√(2/π) (1 + 3 · 0.044715 x²), and
    1 − s = e s for e = e^(−2u): no cancellation where s rounds to 1 (at x = 60 the x³ in u' magnified it to
    3e-3). 0 and 1 beyond the cut on either side, where x³ may overflow."""
    t = type(x)
    minus_two_u = t(-2 * _SQRT_2_OVER_PI) * (x + t(0.044715) * x * x * x)
    e = exp(min(minus_two_u, t(_GELU_CUT)))
    s = t(1) / (t(1) + e)
    grad = s + x * e * s * s * t(2 * _SQRT_2_OVER_PI) * (t(1) + t(3 * 0.044715) * x * x)
    return t(0) if minus_two_u > _GELU_CUT else (t(1) if minus_two_u < -_GELU_CUT else grad)


# Beyond −2u = 40 (x < −7.35) GELU and its derivative are below 5e-16 and taken as 0: e^(−2u) never exceeds
# e^40, so no product overflows, in whatever order fastmath multiplies, for |x| < 1e6. Beyond −2u = −40 the
# derivative is 1 to within 1e-15.
_GELU_CUT = 40.0


def gelu_erf(x):
    """The exact GELU x Φ(x) = 0.5 x (1 + erf(x / √2)), taken as 0 below −_GELU_ERF_CUT."""
    t = type(x)
    y = t(0.5) * x * (t(1) + erf(x * t(_SQRT_HALF)))
    return t(0) if x < -_GELU_ERF_CUT else y


def gelu_erf_derivative(x):
    """d/dx gelu_erf(x) = Φ(x) + x φ(x) = 0.5 (1 + erf(x / √2)) + x e^(−x²/2) / √(2π), taken as 0 below
    −_GELU_ERF_CUT and 1 above it."""
    t = type(x)
    grad = t(0.5) * (t(1) + erf(x * t(_SQRT_HALF))) + x * exp(t(-0.5) * x * x) * t(_INV_SQRT_2PI)
    return t(0) if x < -_GELU_ERF_CUT else (t(1) if x > _GELU_ERF_CUT else grad)


# Beyond |x| = 10 the exact GELU differs from 0 (x < 0) or x, and its derivative from 0 or 1, by less than
# 1e-21. Without the cut, float32 x² / 2 passed exp's clamp at −104 (|x| > 14.4) and the clamped exponential,
# a denormal, times x made garbage (a derivative of −3e-16 at x = −1e30); x² overflows from |x| = 1.8e19.
_GELU_ERF_CUT = 10.0


def softmax_shift(x):
    """The shift of a softmax row whose largest score is x: x, or NaN when x is NaN or +inf, so that every
    e^(score − shift) of the row is NaN — PyTorch's softmax of a row holding a NaN or +inf is NaN throughout."""
    return x if x < math.inf else type(x)(math.nan)


_SQRT_HALF, _SQRT_2_OVER_PI, _INV_SQRT_2PI = math.sqrt(0.5), math.sqrt(2 / math.pi), 1 / math.sqrt(2 * math.pi)


def maximum(a, b):
    """The larger of a and b (one float type), NaN if either is NaN (not guaranteed under fastmath)."""
    return np.maximum(a, b)


# e**x = 2**k e**r, k = round(x / ln 2), |r| <= ln(2)/2, with r = x - k ln 2 from two fused multiply-adds
# and ln 2 split into a float32 and the rest (Cody-Waite). The polynomial is a degree-6 minimax fit of
# e**r: fit error 2e-9, below float32 rounding. Below -104 e**x rounds to 0 and above 89 it overflows:
# the clamp keeps k in [-150, 128], and 2**k is applied in two halves so that the multiplications
# themselves make the denormals and the inf.
_LOG2E, _LN2_HI, _LN2_LO = f32(1.442695), f32(0.6931472), f32(-1.9046542e-09)
_EXP_P = tuple(f32(c) for c in (1.0, 0.49999994, 0.16666432, 0.041668, 0.0083741555, 0.0013843654))
_EXP_LO, _EXP_HI = f32(-104.0), f32(89.0)


def _exp_f32(x):
    x = _EXP_HI if x > _EXP_HI else x      # comparisons written so that NaN passes through
    x = _EXP_LO if x < _EXP_LO else x
    p, k = _exp_reduced(x)
    half = np.floor(k * f32(0.5))
    return p * _exp2i(half) * _exp2i(k - half)


@njit(inline="always")
def _exp_reduced(x):
    """(e**r, k) with e**x = 2**k e**r."""
    k = np.floor(x * _LOG2E + f32(0.5))
    r = _fma(k, -_LN2_LO, _fma(k, -_LN2_HI, x))
    c1, c2, c3, c4, c5, c6 = _EXP_P
    return _fma(r, _fma(r, _fma(r, _fma(r, _fma(r, _fma(r, c6, c5), c4), c3), c2), c1), f32(1)), k


# tanh: Cephes tanhf. |x| < 0.625: an odd polynomial; else 1 - 2 / (e**2|x| + 1) with the sign of x.
# float32 tanh rounds to +-1 beyond |x| = 9.01, so |x| is clamped at 10 (no inf under fastmath), and e**2|x|,
# at most e**20, needs exp's one scaling by 2**k (k <= 29) and none of its clamps: 20% faster than through exp.
_TANH_P = tuple(f32(c) for c in (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                 1.33314422036e-1, -3.33332819422e-1))


def _tanh_f32(x):
    a = abs(x)
    z = x * x
    p4, p3, p2, p1, p0 = _TANH_P
    small = x * _fma(z, _fma(_fma(_fma(_fma(p4, z, p3), z, p2), z, p1), z, p0), f32(1))
    p, k = _exp_reduced(f32(2) * (f32(10) if a > f32(10) else a))
    large = math.copysign(f32(1) - f32(2) / _fma(p, _exp2i(k), f32(1)), x)
    return small if a < f32(0.625) else large


# erf: Eigen's and XLA's rational approximation x P(x**2) / Q(x**2) on [-4, 4]; float32 erf is exactly
# +-1 beyond.
_ERF_P = tuple(f32(c) for c in (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                                -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                                -1.60960333262415e-02))
_ERF_Q = tuple(f32(c) for c in (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                -7.37332916720468e-03, -1.42647390514189e-02))


def _erf_f32(x):
    x = f32(4) if x > f32(4) else x
    x = f32(-4) if x < f32(-4) else x
    z = x * x
    p6, p5, p4, p3, p2, p1, p0 = _ERF_P
    q4, q3, q2, q1, q0 = _ERF_Q
    p = _fma(_fma(_fma(_fma(_fma(_fma(p6, z, p5), z, p4), z, p3), z, p2), z, p1), z, p0)
    q = _fma(_fma(_fma(_fma(q4, z, q3), z, q2), z, q1), z, q0)
    return x * p / q


def _call_llvm(builder, name, args):
    """Call the LLVM intrinsic `name` (llvm.fma, ...) on arguments of one float type."""
    ty = args[0].type
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * len(args)),
                                        f"{name}.{'f32' if ty == ir.FloatType() else 'f64'}")
    return builder.call(fn, args)


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma); fastmath does not reassociate it."""
    if not a == b == c == types.float32:
        return None
    return a(a, b, c), lambda context, builder, signature, args: _call_llvm(builder, "llvm.fma", args)


@intrinsic
def _maximum(typingctx, a, b):
    """llvm.maximum: IEEE 754-2019 maximum, NaN-propagating."""
    if not (isinstance(a, types.Float) and a == b):
        return None
    return a(a, b), lambda context, builder, signature, args: _call_llvm(builder, "llvm.maximum", args)


@intrinsic
def _exp2i(typingctx, k):
    """2**k as float32 for an integral float32 k in [-126, 127].

    k + 1.5 * 2**23 is exact and holds k in its low mantissa bits; shifted into the exponent field and
    biased by 127 they make 2**k. No float-to-int conversion: LLVM scalarizes the saturating one, and
    the plain one is undefined for NaN."""
    if k != types.float32:
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        shifted = builder.fadd(args[0], ir.Constant(ir.FloatType(), 12582912.0))
        low_bits = builder.shl(builder.bitcast(shifted, i32), ir.Constant(i32, 23))
        return builder.bitcast(builder.add(low_bits, ir.Constant(i32, 127 << 23)), ir.FloatType())

    return types.float32(types.float32), codegen


def _register(accurate, fast_f32):
    """Compile `accurate` in numba code, except for float32 arguments, which get `fast_f32`."""
    overload(accurate, inline="always")(lambda x: fast_f32 if x == types.float32 else accurate)


_register(exp, _exp_f32)
_register(tanh, _tanh_f32)
_register(erf, _erf_f32)


def _register_composite(fn):
    """Compile ``fn`` as written: one definition, whose exp, tanh and erf calls get specialized."""
    overload(fn, inline="always")(lambda x: fn)


for _composite in (sigmoid, gelu_tanh, gelu_tanh_derivative, gelu_erf, gelu_erf_derivative, softmax_shift):
    _register_composite(_composite)


@overload(maximum, inline="always")
def _maximum_overload(a, b):
    return lambda a, b: _maximum(a, b)
