"""ops/cpu/vectors.py: numba's loops at the CPU's full vector width, unless the environment chooses. Each case runs in
a fresh process: numba reads the setting when it first compiles."""
import llvmlite.binding
import pytest

from tests.fresh import python

AVX512 = bool(llvmlite.binding.get_host_cpu_features().get("avx512f"))

WIDEST = """
import numpy as np
from numba import njit
import ops.cpu
from numba.core import config

@njit
def scale(x, out):
    for i in range(x.size):
        out[i] = 2.5 * x[i]

x = np.ones(1000, np.float32)
scale(x, x)
assembly = scale.inspect_asm(scale.signatures[0])
print(config.CPU_FEATURES is not None and config.CPU_FEATURES.endswith(',-prefer-256-bit'),
      'zmm' if 'zmm' in assembly else 'ymm' if 'ymm' in assembly else 'xmm')
"""


def widest(**environment) -> list[str]:
    unset = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_ENABLE_AVX")
    return python(WIDEST, unset=unset, **environment).stdout.split()


@pytest.mark.skipif(not AVX512, reason="the CPU has no AVX-512")
def test_loops_use_512_bit_vectors_where_the_cpu_has_them():
    assert widest() == ["True", "zmm"]


@pytest.mark.skipif(not AVX512, reason="the CPU has no AVX-512")
@pytest.mark.parametrize("environment", [{"NUMBA_CPU_NAME": "haswell"}, {"NUMBA_CPU_FEATURES": "+avx,+avx2,+fma"},
                                         {"NUMBA_ENABLE_AVX": "0"}])
def test_the_environments_choice_stands(environment):
    assert widest(**environment)[0] == "False"


@pytest.mark.skipif(not AVX512, reason="the CPU has no AVX-512")
def test_features_the_environment_names_are_what_numba_compiles_for():
    """Features add to the host CPU's own (AMD's Zen 4 keeps 512-bit vectors under "+avx,+avx2,+fma", Intel's
    AVX-512 parts prefer 256 bits anyway): the environment turns AVX-512 off by naming it."""
    assert widest(NUMBA_CPU_FEATURES="+avx,+avx2,+fma,-avx512f") == ["False", "ymm"]


@pytest.mark.skipif(AVX512, reason="the CPU has AVX-512")
def test_a_cpu_without_avx512_is_left_as_it_is():
    assert widest()[0] == "False"
