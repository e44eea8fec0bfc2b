"""Scalar math for CUDA device functions: the names of ops/cpu/mathfn.py, on CUDA's own implementations.

The CPU module's float32 polynomials exist because PyPI's llvmlite has no vector math library, and they are
built from LLVM intrinsics and NumPy ufuncs that the CUDA target lacks. A GPU's exp, tanh and erf (libdevice)
are fast and accurate in float32 and float64, so the scalar functions written against ``mathfn``
(ops/cpu/elementwise.py) are compiled for CUDA with this module in its place:
``device_function(fn, mathfn=ops.cuda.mathfn)``. maximum and the composite functions (sigmoid, GELU and its
derivative, softmax_shift) keep their CPU definitions. ``sqrt`` stands in for NumPy's in CPU code compiled for
CUDA, whose target has no ``np.sqrt`` on scalars.
"""
import math

from ops._cuda import device_function
from ops.cpu import mathfn as cpu

exp = device_function(lambda x: math.exp(x))
tanh = device_function(lambda x: math.tanh(x))
erf = device_function(lambda x: math.erf(x))
sqrt = device_function(lambda x: math.sqrt(x))
maximum = device_function(cpu.maximum)

# The CPU's composite functions, as written there, calling the CUDA exp, tanh and erf above.
sigmoid, gelu_tanh, gelu_tanh_derivative, gelu_erf, gelu_erf_derivative, softmax_shift = (
    device_function(f, exp=exp, tanh=tanh, erf=erf)
    for f in (cpu.sigmoid, cpu.gelu_tanh, cpu.gelu_tanh_derivative, cpu.gelu_erf, cpu.gelu_erf_derivative,
              cpu.softmax_shift))
