"""The CUDA tests: every CUDA kernel against its CPU twin, and graphs run on "cuda" against "cpu".

Where they run. Without a usable GPU they run on numba's CUDA simulator, which tests/conftest.py turns on by
setting NUMBA_ENABLE_CUDASIM=1 (kernel tests parametrized over devices elsewhere share it). numba fixes the choice between the simulator and the real CUDA target when
``numba.cuda`` is first imported, and attngraph imports it only when "cuda" is first used (ops/_cuda.py, which
also re-reads the variable for numba's built-in target, whose configuration is read when numba itself is
imported). pytest imports that file before any test is collected, so the whole session, CPU tests
included, uses one numba.cuda: the simulator here, the GPU on a machine that has one. The CPU tests never
touch numba.cuda, so they are unaffected. Running these tests in a subprocess instead would add the
interpreter's and attngraph's start-up (~1 s here, per subprocess) and hide them from pytest's reports,
selection and debugger. A value of NUMBA_ENABLE_CUDASIM set by the caller (0 or 1) is kept.

Cost. The simulator runs every thread of a block as a Python thread (~0.1 ms each) and a barrier takes a few
milliseconds per block: shapes here are tiny, ops/cuda/launch.py shrinks blocks, tiles and grids under the
simulator, and a shorter interpreter switch interval makes barriers several times faster (NUMBA.md). The
simulator checks no types and wraps NumPy arrays, so host code could use NumPy on device arrays where real
ones have no such methods: ``like_hardware`` (tests/conftest.py) makes that fail here as it would on a GPU.
"""
import importlib
import os
import sys

import numpy as np
import pytest


_cuda = importlib.import_module("ops._cuda")        # only now: it imports numba.cuda, which reads the choice

HERE = os.path.dirname(__file__)


def pytest_collection_modifyitems(items):
    """Mark these tests ``cuda`` (``-m "not cuda"`` leaves them out); skip them, saying why, where CUDA is
    unavailable (NUMBA_ENABLE_CUDASIM=0 on a machine without a GPU)."""
    reason = _cuda.unavailable()
    for item in items:
        if str(item.path).startswith(HERE):
            item.add_marker(pytest.mark.cuda)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="package", autouse=True)
def fast_thread_switches():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(interval)


@pytest.fixture(autouse=True)
def on_hardware_terms(like_hardware):
    """Every test here treats device arrays as a GPU would (tests/conftest.py's ``like_hardware``)."""


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def on_device(*arrays):
    """Copies of the arrays on the device (one array for one argument)."""
    copies = [_cuda.to_device(np.asarray(a)) for a in arrays]
    return copies[0] if len(copies) == 1 else copies


def host(a):
    """A NumPy copy of a device array, checked to be one."""
    assert _cuda.is_device_array(a), f"expected a device array, got {type(a).__name__}"
    return _cuda.to_host(a)
