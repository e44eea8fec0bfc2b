"""Scalar math for compiled kernels: exp, tanh, sigmoid, erf, GELU and its derivative, maximum.

Call these from @njit or @vectorize code; numba inlines the variant that matches the argument:
- float32 gets short polynomials that LLVM vectorizes. PyPI's llvmlite has no SVML, so math.exp in a
  loop is a scalar libm call; these run 5-10x faster, with relative error < 2e-7 (exp) and absolute
  error < 3e-7 (tanh, sigmoid) and < 5e-7 (erf). tests/ops/test_mathfn.py checks them on their own.
- float64 gets the same algorithms at double precision, within 1 ulp of libm's exp and 2 ulps of its tanh
  (gradient checks run in float64 and need ~1e-15): exp 6.4 -> 1.9 ns an element, tanh 22 -> 2.2 (a
  loop over 10^6 floats). erf stays libm's (math.erf).
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
# themselves make the denormals and the inf; k = 128 is taken as 2 e**r 2**127, as fastmath's reassociation
# may multiply the two halves first.
_LOG2E, _LN2_HI, _LN2_LO = f32(1.442695), f32(0.6931472), f32(-1.9046542e-09)
_EXP_P = tuple(f32(c) for c in (1.0, 0.49999994, 0.16666432, 0.041668, 0.0083741555, 0.0013843654))
_EXP_LO, _EXP_HI = f32(-104.0), f32(89.0)


def _exp_f32(x):
    x = _EXP_HI if x > _EXP_HI else x      # comparisons written so that NaN passes through
    x = _EXP_LO if x < _EXP_LO else x
    p, k = _exp_reduced(x)
    return _scaled(p, k, f32(127))


@njit(inline="always")
def _scaled(p, k, largest):
    """p · 2**k for an integral k up to largest + 1 (the largest exponent of p's type), in two halves so that the
    multiplications make the denormals and the inf; at k = largest + 1, 2p · 2**largest, so that no order of the
    products (fastmath reassociates them) makes 2**(largest + 1), which overflows where p · 2**k may not."""
    one = type(p)(1)
    p, k = (p * (one + one), k - one) if k > largest else (p, k)
    half = np.floor(k * type(p)(0.5))
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


# float64: e**x as for float32, with ln 2 split as in Cephes' exp and e**r, |r| <= ln(2)/2, its Taylor
# polynomial of degree 13 (the remainder below 4e-18); the clamps at -746 and 710 keep k in [-1076, 1024],
# and k = 1024 is taken as 2 e**r 2**1023: fastmath's reassociation may multiply the two powers of 2 first.
# tanh: Cephes' tanh, x + x z P(z) / Q(z) (z = x**2) below 0.625, else as for float32; it rounds to +-1
# beyond |x| = 19.1, hence the clamp at 22 (e**44 needs one scaling by 2**k, k <= 64).
_LOG2E_64, _LN2_HI_64, _LN2_LO_64 = 1.4426950408889634, 6.93145751953125e-1, 1.42860682030941723212e-6
_EXP_P_64 = tuple(1 / math.factorial(n) for n in range(13, 1, -1))       # 1/13!, ..., 1/2!
_TANH_P_64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH_Q_64 = (1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


def _exp_f64(x):
    x = 710.0 if x > 710.0 else x          # comparisons written so that NaN passes through
    x = -746.0 if x < -746.0 else x
    p, k = _exp_reduced_f64(x)
    return _scaled(p, k, 1023.0)


@njit(inline="always")
def _exp_reduced_f64(x):
    """(e**r, k) with e**x = 2**k e**r, for float64 x."""
    k = np.floor(x * _LOG2E_64 + 0.5)
    r = _fma(k, -_LN2_LO_64, _fma(k, -_LN2_HI_64, x))
    p = 0.0
    for c in _EXP_P_64:
        p = _fma(r, p, c)
    return _fma(r, _fma(r, p, 1.0), 1.0), k


def _tanh_f64(x):
    a = abs(x)
    z = a * a
    p0, p1, p2 = _TANH_P_64
    q0, q1, q2 = _TANH_Q_64
    small = _fma(a * z, _fma(_fma(p0, z, p1), z, p2) / _fma(_fma(z + q0, z, q1), z, q2), a)
    p, k = _exp_reduced_f64(2.0 * (22.0 if a > 22.0 else a))
    large = 1.0 - 2.0 / _fma(p, _exp2i(k), 1.0)
    return math.copysign(small if a < 0.625 else large, x)


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
    if not (a == b == c and a in (types.float32, types.float64)):
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
    """2**k for an integral k in [-126, 127] (float32) or [-1022, 1023] (float64), of k's type.

    k + 1.5 * 2**m (m = 23 or 52, the mantissa's bits) is exact and holds k in its low mantissa bits; shifted
    into the exponent field and biased by 127 or 1023 they make 2**k. No float-to-int conversion: LLVM
    scalarizes the saturating one, and the plain one is undefined for NaN."""
    if k not in (types.float32, types.float64):
        return None
    bits, mantissa, bias = (32, 23, 127) if k == types.float32 else (64, 52, 1023)
    float_type = ir.FloatType() if k == types.float32 else ir.DoubleType()

    def codegen(context, builder, signature, args):
        integer = ir.IntType(bits)
        shifted = builder.fadd(args[0], ir.Constant(float_type, 1.5 * 2.0 ** mantissa))
        low_bits = builder.shl(builder.bitcast(shifted, integer), ir.Constant(integer, mantissa))
        return builder.bitcast(builder.add(low_bits, ir.Constant(integer, bias << mantissa)), float_type)

    return k(k), codegen


def _register(accurate, fast_f32, fast_f64=None):
    """Compile `accurate` in numba code, except for float32 arguments, which get `fast_f32`, and float64 ones,
    which get `fast_f64` where there is one."""
    fast = {types.float32: fast_f32, types.float64: fast_f64 or accurate}
    overload(accurate, inline="always")(lambda x: fast.get(x, accurate))


_register(exp, _exp_f32, _exp_f64)
_register(tanh, _tanh_f32, _tanh_f64)
_register(erf, _erf_f32)


def _register_composite(fn):
    """Compile ``fn`` as written: one definition, whose exp, tanh and erf calls get specialized."""
    overload(fn, inline="always")(lambda x: fn)


for _composite in (sigmoid, gelu_tanh, gelu_tanh_derivative, gelu_erf, gelu_erf_derivative, softmax_shift):
    _register_composite(_composite)


@overload(maximum, inline="always")
def _maximum_overload(a, b):
    return lambda a, b: _maximum(a, b)
