"""The width of the vectors numba's loops compile to: all 512 bits where the CPU has AVX-512.

LLVM's tuning for Intel's AVX-512 CPUs (Skylake-X to Sapphire Rapids) prefers 256-bit vectors (its
``prefer-256-bit``, a guard against the clock drop of the first AVX-512 parts), so numba's loops run at half the
width the CPU has, while OpenBLAS's products already use all of it. ``use_full_width()`` turns the preference off:
numba's ``CPU_FEATURES`` become the host's features and ``-prefer-256-bit``. Measured on a Sapphire Rapids Xeon: a
sigmoid loop 0.89 → 0.68 ns an element; training steps up to 7% shorter, the cold compile ~1 s longer
(benchmarks/MEASUREMENTS.md, session 20).

The setting is numba's and the process's: it holds for every function numba compiles after it (the user's too),
and numba's cache keys compiled code by the features, so that code cached without it compiles once more. Left as it
is where the environment names the CPU or its features (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES) or turns AVX off
(NUMBA_ENABLE_AVX=0), where the CPU has no AVX-512, and where LLVM cannot tell the host's features. Numba reads the
setting when it first compiles or loads code: a process that did so before importing attngraph keeps its own.
"""
import llvmlite.binding
from numba.core import config

KEEP_TO_256_BITS = "prefer-256-bit"


def use_full_width() -> None:
    if config.CPU_NAME is not None or config.CPU_FEATURES is not None or not config.ENABLE_AVX:
        return
    try:
        features = llvmlite.binding.get_host_cpu_features()
    except RuntimeError:
        return
    if features.get("avx512f"):
        config.CPU_FEATURES = f"{features.flatten()},-{KEEP_TO_256_BITS}"
