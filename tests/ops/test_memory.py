"""The allocator setting (ops/cpu/memory.py) and the BLAS threads' environment (ops/__init__.py): measured in
fresh processes, since both act on process-wide state."""
import platform

import pytest

from ops.cpu.memory import glibc, reuse_freed_memory
from tests.fresh import python

pytestmark = pytest.mark.skipif(glibc() is None, reason="the allocator setting is for glibc's malloc")

STEPS = """
import resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from ops.cpu.memory import reuse_freed_memory
    assert reuse_freed_memory()
def step():                    # a training step's pattern: arrays of several sizes made, kept a while, freed
    kept = [np.ones(n, np.float32) for n in (300_000, 1_000_000, 2_000_000, 700_000)]
    kept += [np.ones(n, np.float32) * 2 for n in (1_500_000, 400_000, 2_500_000)]
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def run(code: str, *args: str, **env: str) -> str:
    return python(code, *args, unset=("OPENBLAS_THREAD_TIMEOUT", "OMP_WAIT_POLICY"), **env).stdout.strip()


def test_freed_arrays_are_reused_without_page_faults():
    """glibc's own thresholds give the next step's arrays fresh pages (a fault each); attngraph's, none."""
    faults = {mode: float(run(STEPS, mode)) for mode in ("system", "tuned")}
    assert faults["tuned"] < 50 and faults["system"] > 1000, faults


@pytest.mark.parametrize("variable", [("ATTNGRAPH_MALLOC", "system"), ("MALLOC_TOP_PAD_", "0"),
                                      ("GLIBC_TUNABLES", "glibc.malloc.top_pad=0"), ("LD_PRELOAD", "")])
def test_the_environment_s_own_malloc_settings_are_left_alone(monkeypatch, variable):
    monkeypatch.setenv(*variable)
    assert reuse_freed_memory() is False


def test_numpy_s_blas_threads_sleep_whichever_is_imported_first():
    """Importing ops sets OPENBLAS_THREAD_TIMEOUT before NumPy loads its OpenBLAS, which reports it; imported
    after NumPy, ops makes NumPy's OpenBLAS read it again. A timeout the environment sets is kept: one that lets
    the threads spin sends only small products to NumPy's BLAS."""
    sleeps = "import {}\nfrom ops.cpu import matmul\nprint(matmul.NUMPY_BLAS_SLEEPS, matmul._NUMPY_MAX)"
    assert run(sleeps.format("attngraph")) == "True inf"
    assert run(sleeps.format("numpy, attngraph")) == "True inf"
    assert run(sleeps.format("numpy, attngraph"), OPENBLAS_THREAD_TIMEOUT="20") == f"False {2 ** 24}"
    assert run(sleeps.format("attngraph"), OPENBLAS_THREAD_TIMEOUT="20") == f"False {2 ** 24}"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="Sandybridge's kernels are x86-64's")
def test_the_openblas_kernels_are_named_and_the_benchmarks_say_who_chose_them():
    """OPENBLAS_CORETYPE makes both OpenBLAS libraries run one processor's kernels, which ``openblas_core`` names;
    the benchmarks' header names them and warns that the environment chose them."""
    program = ("from ops.cpu.matmul import openblas_core\nfrom benchmarks.__main__ import header\n"
               "print(openblas_core('numpy'), openblas_core('scipy'))\nprint(header())")
    pinned = python(program, unset=("OPENBLAS_L2_SIZE",), OPENBLAS_CORETYPE="Sandybridge").stdout.splitlines()
    assert pinned[0] == "Sandybridge Sandybridge"
    assert "OpenBLAS kernels Sandybridge (NumPy), Sandybridge (SciPy)" in pinned[1]
    assert pinned[2].startswith("warning: OPENBLAS_CORETYPE=Sandybridge chose them")
    free = python(program, unset=("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")).stdout.splitlines()
    assert free[0].split()[0] not in ("", "None") and not free[2].startswith("warning")
