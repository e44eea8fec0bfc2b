"""The one module that imports ``numba.cuda``: which CUDA there is, moving arrays, and version quirks.

CUDA kernels run in one of two ways:
- on a GPU, with NVIDIA's ``numba-cuda`` (``pip install "attngraph[cuda]"``, which brings the CUDA 12 toolkit
  as wheels) or numba's built-in CUDA target (deprecated), and NVIDIA's driver;
- in numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which runs every thread as a Python thread: no GPU
  and no CUDA install needed, slow, for testing the kernels on tiny arrays.
``unavailable()`` says what is missing when neither is possible; nothing here raises a driver traceback.

Everything in ``ops/cuda`` takes ``cuda`` from here, so that a move to another CUDA binding (numba-cuda is in
maintenance mode) stays in this file. Quirks handled here:
- numba's built-in target reads ``NUMBA_ENABLE_CUDASIM`` when *numba* is imported, which attngraph does long
  before anyone asks for CUDA: the environment is read again, so setting the variable any time before the
  first CUDA use works (numba-cuda reads it when ``numba.cuda`` is imported).
- The simulator's device has no name and reports infinite memory; ``describe()`` says "simulator" instead.
- A device function must not call ``ops.cpu.mathfn``: its float32 polynomials are built from LLVM intrinsics
  and NumPy ufuncs that the CUDA target lacks. ``device_function`` rebinds such globals (see ops/cuda/mathfn.py).
- The simulator runs device functions as Python, whose math.exp, log and sqrt raise OverflowError or
  ValueError where a GPU gives inf or NaN: ``device_function`` gives them IEEE versions there.
- numba's built-in simulator races when the threads of a block call device functions of another module that
  use ``cuda.*`` (the tree reductions of ops/cuda/reduce.py): the first thread to return puts the real
  module back while the others still run, and they fail with "module 'numba.cuda' has no attribute
  'threadIdx'" now and then. numba-cuda fixed it (NVIDIA/numba-cuda#690); the fix is backported here.
- The simulator's ``cuda.shared.array`` looks up a block's array for the calling line and stores a new one
  when there is none, without a lock: two threads of a block starting together could each make their own, so
  part of the block never saw the tile the rest loaded (a tiled product gave wrong numbers now and then). Here
  the look-up and the store are one step under a lock.
"""
from __future__ import annotations

import collections
import contextlib
import math
import os
import sys
import threading
import types
from importlib import metadata

import numba
import numpy as np
from numba.core import config


def _simulator_requested() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


if "numba.cuda" not in sys.modules and bool(config.ENABLE_CUDASIM) != _simulator_requested():
    config.reload_config()

try:
    from numba import cuda
    _IMPORT_ERROR = None
except ImportError as error:        # a numba without a CUDA target, or numba-cuda without its CUDA bindings
    cuda, _IMPORT_ERROR = None, error

SIMULATOR = cuda is not None and cuda.jit.__module__.startswith("numba.cuda.simulator")


def _backport_thread_safe_swaps():
    """Make the simulator's swap of ``cuda`` for its fake module reference-counted per module, as numba-cuda's
    is (NVIDIA/numba-cuda#690): the first thread in swaps, the last one out swaps back."""
    from numba.cuda.simulator import kernel, kernelapi
    if hasattr(kernelapi, "_swap_refcount"):          # a simulator that has the fix
        return
    lock, users, originals = threading.Lock(), collections.Counter(), {}

    @contextlib.contextmanager
    def swapped_cuda_module(fn, fake_cuda_module):
        names, key = fn.__globals__, id(fn.__globals__)
        with lock:
            if not users[key]:
                originals[key] = {name: value for name, value in names.items() if value is cuda}
                names.update(dict.fromkeys(originals[key], fake_cuda_module))
            users[key] += 1
        try:
            yield
        finally:
            with lock:
                users[key] -= 1
                if not users[key]:
                    names.update(originals.pop(key))

    kernel.swapped_cuda_module = swapped_cuda_module


def _thread_safe_shared_arrays():
    """Give ``FakeCUDAShared.array`` a lock: one array per block and calling line, whichever thread asks first.
    It keeps the simulator's contract (arrays are named by the caller's file and line; size 0 is the dynamic
    shared memory)."""
    from numba.core import types as numba_types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support
    lock, allocate = threading.Lock(), kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype):
        if shape == 0:
            return allocate(self, shape, dtype)
        caller = sys._getframe(1)
        line = (caller.f_code.co_filename, caller.f_lineno)
        if isinstance(dtype, numba_types.Type):
            dtype = numpy_support.as_dtype(dtype)
        with lock:
            if line not in self._allocations:
                self._allocations[line] = np.empty(shape, dtype)
            return self._allocations[line]

    kernelapi.FakeCUDAShared.array = array


if SIMULATOR:
    _backport_thread_safe_swaps()
    _thread_safe_shared_arrays()

INSTALL = ('pip install "attngraph[cuda]" (NVIDIA\'s numba-cuda with the CUDA 12 toolkit; for CUDA 13: '
           'pip install "numba-cuda[cu13]")')


def unavailable() -> str | None:
    """None when CUDA kernels can run (a GPU, or the simulator); otherwise what is missing and how to get it."""
    if cuda is None:
        return f"numba's CUDA target cannot be imported ({_IMPORT_ERROR}); install it with {INSTALL}"
    if SIMULATOR or cuda.is_available():
        return None
    reason = " ".join(str(cuda.cuda_error() or "no CUDA device was found").split()).rstrip(".")
    return (f"no usable CUDA GPU: {reason}. A GPU needs NVIDIA's driver and {INSTALL}. To run the CUDA kernels "
            "without a GPU (slowly, for tests), set NUMBA_ENABLE_CUDASIM=1 before the first CUDA use.")


def backend() -> str:
    """Which numba.cuda this is: NVIDIA's numba-cuda or numba's built-in target."""
    if cuda is not None and getattr(cuda, "implementation", "") == "NVIDIA":
        return f"numba-cuda {metadata.version('numba-cuda')}"
    return f"numba {numba.__version__} built-in CUDA target (deprecated)"


def describe() -> dict:
    """What ``attngraph info`` reports: the backend, then the device's name, compute capability and memory in
    bytes; or ``simulator: True``; or ``unavailable`` with the reason."""
    info = {"backend": backend(), "simulator": SIMULATOR}
    reason = unavailable()
    if reason is not None:
        return {**info, "unavailable": reason}
    if SIMULATOR:
        return info
    device = cuda.get_current_device()
    free, total = cuda.current_context().get_memory_info()
    name = device.name.decode() if isinstance(device.name, bytes) else device.name
    return {**info, "name": name, "compute_capability": tuple(device.compute_capability),
            "memory": int(total), "free_memory": int(free)}


def is_device_array(a) -> bool:
    return bool(getattr(a, "__cuda_ndarray__", False))


def to_device(a):
    """``a`` as a device array: a device array is returned as it is, anything else is copied (C-contiguous;
    not np.ascontiguousarray, which makes 0-d arrays 1-d)."""
    return a if is_device_array(a) else cuda.to_device(np.asarray(a, order="C"))


def to_host(a) -> np.ndarray:
    """``a`` as a NumPy array: a device array is copied back, a NumPy array returned as it is."""
    return a.copy_to_host() if is_device_array(a) else np.asarray(a)


def empty(shape, dtype):
    """An uninitialized C-contiguous device array."""
    return cuda.device_array(tuple(shape), np.dtype(dtype))


def _quiet(f):
    def call(x):
        with np.errstate(all="ignore"):
            return f(x)
    return call


# The math module as device functions see it in the simulator: inf and NaN instead of exceptions, as on a GPU.
_IEEE_MATH = types.SimpleNamespace(**{**vars(math), **{name: _quiet(getattr(np, ufunc)) for name, ufunc in [
    ("exp", "exp"), ("log", "log"), ("sqrt", "sqrt"), ("log1p", "log1p"), ("expm1", "expm1"), ("log2", "log2"),
    ("log10", "log10"), ("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"), ("sinh", "sinh"),
    ("cosh", "cosh"), ("acosh", "arccosh"), ("atanh", "arctanh"), ("trunc", "trunc")]}})


def device_function(fn, **rebind):
    """``fn`` (a Python function, or the ``py_func`` of a numba dispatcher) compiled as a CUDA device function,
    with the global names in ``rebind`` replaced: one definition of the math, compiled for each device."""
    fn = getattr(fn, "py_func", fn)
    if SIMULATOR:
        rebind = {"math": _IEEE_MATH, **rebind}
    fn = types.FunctionType(fn.__code__, {**fn.__globals__, **rebind}, fn.__name__, fn.__defaults__, fn.__closure__)
    return cuda.jit(device=True)(fn)

