"""Shared fixtures: a seeded generator, the shared data folder, a helper to run a traced function, and the devices
a kernel test runs on. Every test starts from the same default generator (parameters' initialization), whichever
tests ran before it. Without a usable GPU the "cuda" tests run on numba's CUDA simulator, chosen here, before
anything imports numba.cuda (tests/cuda/conftest.py says why and what it costs)."""
import contextlib
import ctypes.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import numba
import numpy as np
import pytest


def _gpu_usable() -> bool:
    """Whether a real GPU can run kernels: asked in a subprocess, because importing numba.cuda here would fix
    this process on the real target. Without a driver library there is nothing to ask."""
    if ctypes.util.find_library("cuda") is None:
        return False
    probe = "from numba import cuda; raise SystemExit(0 if cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=300, check=False).returncode == 0


if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _gpu_usable():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

import attngraph as ag  # noqa: E402  (after the choice of CUDA target)
import ops  # noqa: E402


@pytest.fixture(autouse=True)
def seeded_initialization():
    ag.nn.init.manual_seed(0)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data():
    """A file of the corpora beside the project (``$ATTNGRAPH_SHARED_DATA``, default ../shared/data);
    the test is skipped when it is absent."""
    folder = Path(os.environ.get("ATTNGRAPH_SHARED_DATA", Path(__file__).parents[2] / "shared" / "data"))

    def path(name: str) -> Path:
        if not (folder / name).exists():
            pytest.skip(f"{name} not found in {folder} (set ATTNGRAPH_SHARED_DATA)")
        return folder / name
    return path


def run(fn, *arrays, device="cpu"):
    """Trace ``fn`` on inputs shaped like ``arrays`` and run it on them on ``device`` (a name or a Backend)."""
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    return ag.trace(lambda **xs: fn(*xs.values()), **feeds).compile(getattr(device, "name", device))(**feeds)


def value_and_grad_on(device, fn, *arrays):
    """(fn(*arrays), its gradient with respect to each array) from ``fn``'s traced gradient graph run on
    ``device``: ``fn`` returns a scalar."""
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    graph = ag.trace(lambda **xs: fn(*xs.values()), **feeds).grad(wrt=list(feeds))
    value, *grads = graph.compile(device.name)(**feeds)
    return value, grads


@contextlib.contextmanager
def numba_threads(count: int):
    """Numba's thread count set to ``count`` (at most the threads it has) inside, put back after."""
    before = numba.get_num_threads()
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


@contextlib.contextmanager
def busy_pool():
    """Every thread of attngraph's pool (ops/cpu/threads.py) held by a job until the block ends, as a core that wakes
    late holds its thread; yields ``still_busy()``: whether none of them has been let go yet."""
    from ops.cpu import threads
    release = threading.Event()
    jobs = [threads._pool().submit(release.wait, 30) for _ in range(threads._pool()._max_workers)]
    try:
        yield lambda: not any(job.done() for job in jobs)
    finally:
        release.set()
        for job in jobs:
            job.result()


def on_device(device, kernel, /, *args, **attrs):
    """``kernel`` (a function, or the name of one of ``device``'s kernels) on host arrays moved to ``device``
    (NumPy scalars too; other arguments, None included, pass as they are); its result, or tuple of results, back
    on the host."""
    call = device.kernels[kernel] if isinstance(kernel, str) else kernel

    def put(a):
        return device.put(a) if isinstance(a, (np.ndarray, np.generic)) else a
    out = call(*map(put, args), **{name: put(a) for name, a in attrs.items()})
    return tuple(map(device.get, out)) if isinstance(out, tuple) else device.get(out)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request):
    """The Backend (``kernels`` by name, ``put``, ``get``) of each device a kernel test runs on: "cpu", then "cuda"
    (a GPU, or numba's simulator with fast thread switches; skipped, saying why, where neither runs), its device
    arrays treated as a GPU would (``like_hardware``)."""
    if request.param == "cpu":
        yield ops.get_backend("cpu")
        return
    from ops import _cuda
    if _cuda.unavailable():
        pytest.skip(_cuda.unavailable())
    request.getfixturevalue("like_hardware")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield ops.get_backend("cuda")
    sys.setswitchinterval(interval)


# What real device arrays offer on the host (numba's DeviceNDArray), besides the simulator's own methods.
_DEVICE_ARRAY_ATTRIBUTES = {"shape", "strides", "ndim", "size", "dtype", "nbytes", "alloc_size", "flags", "stream",
                            "gpu_data", "__array__", "__cuda_array_interface__", "__len__"}
_HOST_OPERATORS = ("__add__", "__sub__", "__mul__", "__floordiv__", "__truediv__", "__mod__", "__pow__", "__lt__",
                   "__le__", "__gt__", "__ge__")


@pytest.fixture
def like_hardware(monkeypatch):
    """In the simulator, device arrays lose the NumPy attributes and operators that real ones lack."""
    from ops import _cuda
    if not _cuda.SIMULATOR:
        return
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    forward = FakeCUDAArray.__getattr__

    def device_attribute(self, name):
        if name not in _DEVICE_ARRAY_ATTRIBUTES:
            raise AttributeError(f"a device array has no attribute {name!r} on the host (the simulator's has)")
        return forward(self, name)

    def no_host_arithmetic(self, other):
        raise TypeError("device arrays have no arithmetic or comparisons on the host (the simulator's have)")

    monkeypatch.setattr(FakeCUDAArray, "__getattr__", device_attribute)
    for name in _HOST_OPERATORS:
        monkeypatch.setattr(FakeCUDAArray, name, no_host_arithmetic)
    monkeypatch.setattr(FakeCUDAArray, "__eq__", object.__eq__)
    monkeypatch.setattr(FakeCUDAArray, "__ne__", object.__ne__)
