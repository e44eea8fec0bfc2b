"""Kernels of attngraph: arrays in, new arrays out; nothing here knows about graphs.

`ops.cpu` holds the Numba CPU kernels, one module per op family, forward and backward side by side; `ops.cuda`
their numba.cuda twins. Each device is one Backend (``backend.py``): its kernels by primitive name, and where its
arrays live. ``get_backend(device)`` and ``backend_of(array)`` find them.

Importing ``ops`` makes idle threads sleep rather than spin, unless the environment says otherwise:
OMP_WAIT_POLICY=passive for Numba's OpenMP threads and OPENBLAS_THREAD_TIMEOUT=4 for OpenBLAS's (why:
ops/cpu/threads.py). Set here, first, so that they reach every library loaded after; NumPy's OpenBLAS, loaded
before when a program imports NumPy first, is made to read them again (ops/cpu/matmul.py). A GNU OpenMP runtime
loaded before (``import torch`` loads its own) has read OMP_WAIT_POLICY already: ``OPENMP_LOADED_FIRST``.
"""
import os


def loaded_libraries() -> set[str]:
    """The paths of the files mapped into this process (Linux's /proc/self/maps; empty where there is none)."""
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return set()


OPENMP_LOADED_FIRST = "OMP_WAIT_POLICY" not in os.environ and any("libgomp" in path for path in loaded_libraries())
"""Whether a GNU OpenMP runtime was loaded before the policy below was set: it read OMP_WAIT_POLICY when it loaded,
so its idle threads spin, and numba's OpenMP layer runs on it (one runtime a process: ops/cpu/threads.py warns)."""
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

DEVICES = ("cpu", "cuda")
BACKENDS = {}
"""The Backends built so far, by device: ``get_backend`` builds each on its first use and hands it out after."""


def get_backend(device: str):
    """The Backend of ``device`` ("cpu" or "cuda"), its kernel table built on first use (so that importing ops
    never imports numba.cuda). Raises ``backend.Unavailable`` saying what is missing when "cuda" cannot run, and
    KeyError for a device that does not exist."""
    backend = BACKENDS.get(device)
    if backend is None:
        backend = BACKENDS[device] = _build(device)
    return backend


def _build(device: str):
    if device == "cpu":
        from ops.cpu.backend import BACKEND
        return BACKEND
    if device == "cuda":
        from ops import _cuda
        from ops.backend import Unavailable
        reason = _cuda.unavailable()
        if reason is not None:
            raise Unavailable(reason)
        from ops.cuda.backend import BACKEND
        return BACKEND
    raise KeyError(f"unknown device {device!r}; available: {', '.join(DEVICES)}")


def backend_of(array):
    """The Backend where ``array`` lives: "cuda" for a CUDA device array, "cpu" for anything else."""
    return get_backend("cuda" if getattr(array, "__cuda_ndarray__", False) else "cpu")
