"""The environment the test suite runs in: Numba's threading layer is the configured one.

Without GNU OpenMP, numba silently falls back to the slow `workqueue` layer (which also aborts
the process when two Python threads run parallel code). The Makefile pins the layer through
NUMBA_THREADING_LAYER; this checks that the pinned layer is the one really in use.
"""

import importlib
import os

import numba
import numpy as np
import pytest
from numba import njit, prange, threading_layer

from ops.cpu.threads import PARALLEL_MIN_SIZE, parallel_kernel
from tests.conftest import numba_threads

# NUMBA_THREADING_LAYER may also name a selection policy instead of a layer.
_POLICIES = {
    "default": {"omp", "tbb", "workqueue"},
    "safe": {"tbb"},
    "threadsafe": {"omp", "tbb"},
    "forksafe": {"omp", "tbb"},
}


@njit(parallel=True)
def _parallel_sum(a):
    total = 0.0
    for i in prange(a.shape[0]):
        total += a[i]
    return total


def test_configured_threading_layer_is_in_use():
    assert _parallel_sum(np.arange(1000, dtype=np.float64)) == 499500.0
    configured = os.environ.get("NUMBA_THREADING_LAYER", "omp")
    expected = _POLICIES.get(configured, {configured})
    assert threading_layer() in expected, (
        f"numba runs parallel code on the {threading_layer()!r} threading layer, but "
        f"NUMBA_THREADING_LAYER={configured!r} was asked for (see the Makefile's comment)"
    )


# --- ops/cpu/threads.parallel_kernel: a serial twin for small arrays and one thread ---------------------------

rng = np.random.default_rng(0)
X, G = rng.standard_normal((2, 8, 12)).astype(np.float32), rng.standard_normal((2, 8, 12)).astype(np.float32)
W, B = rng.standard_normal(12).astype(np.float32), rng.standard_normal(12).astype(np.float32)
IDX = np.array([3, 0, 3, 7, 1])
TARGETS = np.array([0, 11, 5, -1, 3, 3, 2, 9] * 2)

# every parallel kernel of ops/cpu: (module, kernel, a call of the module's functions that runs it)
KERNEL_CALLS = [
    ("softmax", "_softmax_rows", lambda m: m.softmax(X, mask=X > 0, causal=True)),
    ("softmax", "_softmax_backward_rows", lambda m: m.softmax_backward(G, m.softmax(X))),
    ("softmax", "_log_softmax_rows", lambda m: m.log_softmax(X, mask=X > -1)),
    ("softmax", "_log_softmax_backward_rows", lambda m: m.log_softmax_backward(G, X, causal=True)),
    ("layer_norm", "_layer_norm_rows", lambda m: m.layer_norm(X, W, B)),
    ("layer_norm", "_layer_norm_backward_rows", lambda m: m.layer_norm_backward(G, X, W)),
    ("layer_norm", "_layer_norm_params_backward_rows", lambda m: m.layer_norm_params_backward(G, X)),
    ("cross_entropy", "_cross_entropy_rows", lambda m: m.cross_entropy(X.reshape(16, 12), TARGETS, -1)),
    ("cross_entropy", "_cross_entropy_backward_rows",
     lambda m: m.cross_entropy_backward(np.float32(1), X.reshape(16, 12), TARGETS, -1)),
    ("gelu", "_forward", lambda m: m.gelu(X, B)),
    ("gelu", "_backward", lambda m: m.gelu_backward(G, X, B, exact=True)),
    ("embedding", "_gather_rows", lambda m: m.gather(X[0], IDX)),
    ("embedding", "_scatter_add_rows", lambda m: m.scatter_add(X[0, :5], IDX, 8)),
    ("dropout", "_dropout_flat", lambda m: m.dropout(X, 0.3, 7, 1)),
    ("reduce", "_sum_rows", lambda m: m.sum(X, (1, 2), False)),
    ("reduce", "_sum_middle", lambda m: m.sum(X, (1,), False)),
    ("reduce", "_max_rows", lambda m: m.max(X, (2,), True)),
    ("reduce", "_max_middle", lambda m: m.max(X, (0,), False)),
    ("matmul", "_matmul_batched", lambda m: m.matmul(X[..., :1], G[..., :1], transpose_b=True)),   # outer products
]


@pytest.mark.parametrize("module, name, call", KERNEL_CALLS, ids=[f"{m}.{k}" for m, k, _ in KERNEL_CALLS])
def test_serial_twin_computes_what_the_parallel_kernel_does_on_one_thread(monkeypatch, module, name, call):
    """The serial twin replaces the parallel kernel run on one thread (small arrays, one thread), to the last
    bit but where LLVM vectorizes a fastmath sum in another order (cross_entropy's backward: 1 ulp)."""
    module = importlib.import_module(f"ops.cpu.{module}")
    kernel, seen = getattr(module, name), []
    monkeypatch.setattr(module, name, lambda *args: seen.append(args) or kernel(*args))
    call(module)
    assert seen, f"the call does not run {name}"
    with numba_threads(1):
        for args in seen:
            for a, b in zip(*(np.broadcast_arrays(*np.atleast_1d(*_outputs(twin(*args))))
                              for twin in (kernel.serial, kernel.parallel))):
                np.testing.assert_allclose(a, b, rtol=2 * np.finfo(np.float32).eps, atol=0)


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


@parallel_kernel
def _thread_ids(x):
    ids = np.empty(x.size, np.int64)
    for i in prange(x.size):
        ids[i] = numba.get_thread_id()
    return ids


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread here")
@pytest.mark.parametrize("size, count, parallel", [(PARALLEL_MIN_SIZE, 2, True), (PARALLEL_MIN_SIZE - 1, 2, False),
                                                   (10 * PARALLEL_MIN_SIZE, 1, False), (10, 2, False)])
def test_parallel_kernels_use_threads_only_for_large_arrays(size, count, parallel):
    with numba_threads(count):
        ids = _thread_ids(np.zeros(size))
    assert set(ids) == ({0, 1} if parallel else {0})


