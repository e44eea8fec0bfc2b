"""Matrix product with NumPy's batching rules, through BLAS (np.dot inside numba, needs SciPy).

op(a) is (..., M, K) and op(b) is (..., K, N), both at least 2-D, where op(x) is x or, when its
``transpose_`` flag is set, x with its last two axes swapped: BLAS reads a transposed operand in place
(as a Fortran-ordered matrix), so a graph's ``matmul(transpose(x), y)`` needs no copy of x. The batch
dims broadcast and the result is (..., M, N). When b is one matrix and a is not transposed, a's batch
folds into its rows: one large BLAS call. Otherwise the products op(a[ia[i]]) @ op(b[ib[i]]) of the
flattened batch go into out[i]; the index arrays implement broadcasting without copying a or b. np.dot always
writes into `out`: returning np.dot's result into out[i] compiles far more slowly.

Two BLAS libraries: NumPy's OpenBLAS (``np.matmul`` from Python) and SciPy's (``np.dot`` inside numba). NumPy's
runs 2-D products faster, so 2-D products go there. But its worker threads keep spinning after a product,
holding the cores that the next kernel's threads need, unless they read OPENBLAS_THREAD_TIMEOUT ≤ 16. ``ops``
sets the variable, which NumPy's OpenBLAS reads when it loads; when NumPy was imported first (most programs),
``_let_numpy_blas_sleep`` makes it read the variable again. ``NUMPY_BLAS_SLEEPS`` says whether its threads sleep:
when they spin (the environment asks for it, or another BLAS that cannot tell), only products of up to 2**24
multiply-adds go to NumPy, where its speed outweighs the spinning, and the larger ones to SciPy's.

NumPy's OpenBLAS splits a product over its threads from 2**18 multiply-adds on, but up to ``SERIAL_2D_MAX`` (2**21)
the split saves less than waking its threads costs in a step whose other kernels run on numba's threads: the
recurrent models' products (a batch of 64 rows times a 64 × 192 or 160 × 192 gate matrix) run on the calling thread
(``openblas_set_num_threads_local``, set and restored around the call; NumPy's own products elsewhere keep their
threads). Measured on seq2seq's training step: 17.4 → 12.6 ms (2**20: 17.1, 2**22: 13.3).

Threads: OpenBLAS (SciPy's, which numba calls) runs a product of M*K*N <= 2**18 on one thread and
larger ones on all cores; called from numba's threads it oversubscribes them. So numba's threads take the
batch only for small products; larger ones run one after the other, each on BLAS's threads. Batches of
products of up to 2**15 multiply-adds each (outer products, K = 1, aside) go to NumPy's matmul, whose own
loop takes them several times faster than a BLAS call each.
"""
import ctypes
import functools
import math
import os
import threading
from typing import Callable

import numpy as np
from numba import njit, prange

import ops
from ops.cpu.layout import readonly
from ops.cpu.threads import BLAS_SERIAL_MAX, parallel_kernel


def _openblas(package: str):
    """The OpenBLAS library that ``package`` (numpy or scipy) loaded (ctypes); None where there is none to find
    (another BLAS, another system: ``ops.loaded_libraries`` reads Linux's /proc)."""
    paths = {path for path in ops.loaded_libraries() if "openblas" in path and f"/{package}" in path}
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
            for name in ("openblas_thread_timeout", "openblas_read_env", "blas_thread_shutdown_"):
                getattr(library, name).restype = ctypes.c_int
            return library
        except (OSError, AttributeError):
            continue
    return None


def openblas_core(package: str) -> str | None:
    """The processor whose kernels the OpenBLAS of ``package`` (numpy or scipy) runs ("SkylakeX", "Haswell"), as
    it chose them or as OPENBLAS_CORETYPE made it; None where there is none to ask. The choice halves or doubles
    every product: Haswell's kernels ran 130 GFLOP/s on one core of an AVX-512 machine, SkylakeX's 240."""
    library = _openblas(package)
    for name in ("openblas_get_corename", "openblas_get_corename64_", "scipy_openblas_get_corename",
                 "scipy_openblas_get_corename64_"):
        corename = getattr(library, name, None)
        if corename is not None:
            corename.restype = ctypes.c_char_p
            return corename().decode()
    return None


def _let_numpy_blas_sleep(library) -> bool:
    """Whether NumPy's OpenBLAS threads sleep (OPENBLAS_THREAD_TIMEOUT ≤ 16) after making them read the variable:
    an OpenBLAS loaded before ``ops`` set it keeps the timeout it read, so it reads the environment again
    (``openblas_read_env``) and stops its threads (``blas_thread_shutdown_``), which its next product restarts
    with the new timeout. False where it cannot tell. Runs once, at import, before attngraph's kernels use
    NumPy's BLAS."""
    if library is None:
        return False
    if str(library.openblas_thread_timeout()) != os.environ.get("OPENBLAS_THREAD_TIMEOUT"):
        library.openblas_read_env()
        library.blas_thread_shutdown_()
    return 0 < library.openblas_thread_timeout() <= 16


_NUMPY_OPENBLAS = _openblas("numpy")
NUMPY_BLAS_SLEEPS = _let_numpy_blas_sleep(_NUMPY_OPENBLAS)


class OneThread:
    """``with hold:`` runs an OpenBLAS on the calling thread while any caller is inside: the first caller in sets
    its thread count to 1 (``set_threads``, its ``openblas_set_num_threads_local``), the last one out restores
    the count found. That function sets the library's one global count, despite its name, so callers on several
    threads that each set and restore it raced: one restored the count while another's products still ran, which
    then split over BLAS's threads (a time loop run as blocks of rows on two threads gave results that moved by
    an ulp from run to run) or left the count at 1 for the rest of the process."""

    def __init__(self, set_threads: Callable[[int], int]):
        self._set_threads, self._lock, self._inside, self._found = set_threads, threading.Lock(), 0, 0

    def __enter__(self):
        with self._lock:
            if self._inside == 0:
                self._found = self._set_threads(1)
            self._inside += 1

    def __exit__(self, *exc):
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                self._set_threads(self._found)


_set_numpy_blas_threads = getattr(_NUMPY_OPENBLAS, "openblas_set_num_threads_local", None)   # OpenBLAS ≥ 0.3.27
_numpy_on_one_thread = OneThread(_set_numpy_blas_threads) if _set_numpy_blas_threads is not None else None
_NUMPY_MAX = math.inf if NUMPY_BLAS_SLEEPS else 2 ** 24     # multiply-adds of the largest 2-D product for NumPy
_NUMPY_BATCHED_MAX = 2 ** 15      # multiply-adds of each of the largest batched products for NumPy
SERIAL_2D_MAX = 2 ** 21           # multiply-adds of the largest 2-D product NumPy's OpenBLAS runs on one thread


def matmul(a, b, transpose_a=False, transpose_b=False):
    """op(a) @ op(b) for op(a) (..., M, K) and op(b) (..., K, N). Where NumPy makes a 2-D product, a 2-D operand
    whose rows are strided but whose entries in a row are adjacent (a column slice) is read in place, as BLAS's
    leading dimension, and so is a batch of a's rows that folds into one such matrix (a column slice of a
    (B, T, F) array: HAN's (192, 10, 192) gate gradients read from the scan's (192, 10, 448) output took 629 µs
    copied, 258 in place); every other operand is made C-contiguous first (numba's np.dot reads C- or F-ordered
    arrays only)."""
    a, b = np.asarray(a), np.asarray(b)
    m, k = a.shape[:-3:-1] if transpose_a else a.shape[-2:]
    n = b.shape[-2] if transpose_b else b.shape[-1]
    size = math.prod(a.shape[:-2]) * m * k * n
    if max(a.ndim, b.ndim) > 2 and math.prod(a.shape[:-2]) == math.prod(b.shape[:-2]) == 1:     # one product
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return matmul(a.reshape(a.shape[-2:]), b.reshape(b.shape[-2:]), transpose_a, transpose_b).reshape(*batch, m, n)
    if b.ndim == 2 and (a.ndim == 2 or not transpose_a):
        ready = _in_place if size <= _NUMPY_MAX else np.ascontiguousarray
        a2 = ready(a).T if transpose_a else ready(a.reshape(math.prod(a.shape[:-1]), k))
        b2 = ready(b).T if transpose_b else ready(b)
        if size > _NUMPY_MAX:
            return _matmul_2d(a2, b2).reshape(*a.shape[:-2], m, n)
        if size <= SERIAL_2D_MAX and _numpy_on_one_thread is not None:
            return _on_one_thread(a2, b2).reshape(*a.shape[:-2], m, n)
        return numpy_matmul(a2, b2).reshape(*a.shape[:-2], m, n)
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if m * k * n <= _NUMPY_BATCHED_MAX and k > 1:
        return numpy_matmul(a.swapaxes(-1, -2) if transpose_a else a, b.swapaxes(-1, -2) if transpose_b else b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = _matmul_batched(a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:]),
                          b.reshape((math.prod(b.shape[:-2]),) + b.shape[-2:]),
                          _batch_index(a.shape[:-2], batch), _batch_index(b.shape[:-2], batch),
                          m * k * n <= BLAS_SERIAL_MAX, transpose_a, transpose_b)
    return out.reshape(*batch, m, n)


def _in_place(x: np.ndarray) -> np.ndarray:
    """x as it is when BLAS reads it in place: C-contiguous, or a matrix (no row or column alone) with adjacent
    entries along its rows; else a C-contiguous copy. A strided row or column is copied: NumPy hands a product
    with one to BLAS's matrix-vector kernels, whose strided path can round otherwise than their contiguous one
    (a (320, 64)ᵀ product with a column read at a stride of 810 differed by an ulp from the copy's)."""
    in_place = x.flags.c_contiguous or (x.ndim == 2 and min(x.shape) > 1 and x.strides[1] == x.itemsize
                                        and x.strides[0] % x.itemsize == 0 and x.strides[0] >= x.shape[1] * x.itemsize)
    return x if in_place else np.ascontiguousarray(x)


def numpy_matmul(a, b):
    """NumPy's a @ b, NaN and Inf propagating without warnings; BLAS reads a strided operand in place."""
    with np.errstate(invalid="ignore", over="ignore"):      # NaN and Inf propagate, as in every kernel
        return np.matmul(a, b)


def _on_one_thread(a, b):
    """NumPy's a @ b with its OpenBLAS held to the calling thread for the call."""
    with _numpy_on_one_thread:
        return numpy_matmul(a, b)


def with_serial_blas(kernel):
    """``kernel`` run with SciPy's OpenBLAS, which numba's ``np.dot`` calls, held to the calling thread: for kernels
    making many small products in a row (a time loop's), where waking BLAS's threads for each costs more than it saves
    (a (192, 64) @ (64, 192) product in a loop: 3.3 ms a call on BLAS's threads with the machine busy, 0.12 ms on one).
    ``kernel`` itself where SciPy's OpenBLAS cannot be found or held."""
    one_thread = _scipy_on_one_thread()
    if one_thread is None:
        return kernel

    def run(*args):
        with one_thread:
            return kernel(*args)
    return run


def _scipy_on_one_thread() -> OneThread | None:
    """The hold on SciPy's OpenBLAS (``openblas_set_num_threads_local``: OpenBLAS ≥ 0.3.27), or None: one for the
    process, made under a lock, since two loops compiled at once on two threads (a bidirectional encoder's
    directions, run together) each asked for it, and two holds on one library race as callers without one did."""
    with _MAKING_HOLD:
        return _scipy_hold()


_MAKING_HOLD = threading.Lock()


@functools.cache
def _scipy_hold() -> OneThread | None:
    import scipy.linalg.cython_blas  # noqa: F401  (numba's np.dot calls SciPy's BLAS through it)
    set_threads = getattr(_openblas("scipy"), "openblas_set_num_threads_local", None)
    return OneThread(set_threads) if set_threads is not None else None


def _batch_index(shape, batch):
    """For every position of the broadcast batch, the flat index of the matrix taken from `shape`."""
    return readonly(np.broadcast_to(np.arange(math.prod(shape)).reshape(shape), batch).ravel())


@njit(cache=True)
def _matmul_2d(a, b):
    """a @ b for 2-D a and b, either of them C- or Fortran-ordered; BLAS uses its own threads"""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    np.dot(a, b, out)
    return out


@parallel_kernel
def _matmul_batched(a, b, ia, ib, threaded, transpose_a, transpose_b):
    """out[i] = op(a[ia[i]]) @ op(b[ib[i]]), on numba's threads if `threaded`, else on BLAS's"""
    m = a.shape[2] if transpose_a else a.shape[1]
    n = b.shape[1] if transpose_b else b.shape[2]
    out = np.empty((ia.size, m, n), a.dtype)
    if threaded:
        for i in prange(ia.size):
            dot_into(a[ia[i]], b[ib[i]], out[i], transpose_a, transpose_b)
    else:
        for i in range(ia.size):
            dot_into(a[ia[i]], b[ib[i]], out[i], transpose_a, transpose_b)
    return out


@njit(cache=True)
def dot_into(a, b, out, transpose_a, transpose_b):
    """out = op(a) @ op(b); each branch passes BLAS a C- or a Fortran-ordered matrix, never a copy"""
    if transpose_a and transpose_b:
        np.dot(a.T, b.T, out)
    elif transpose_a:
        np.dot(a.T, b, out)
    elif transpose_b:
        np.dot(a, b.T, out)
    else:
        np.dot(a, b, out)


KERNELS = {"matmul": matmul}
