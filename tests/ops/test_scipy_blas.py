"""ops/cpu/scipy_blas.py: numba's BLAS loaded without running scipy.linalg, which stays whole for its users. Each
case runs in a fresh process, where the import order is the one under test."""
from tests.fresh import python

PRODUCT = """
import numpy as np
from numba import njit
a = np.arange(6, dtype=np.float32).reshape(2, 3)
print(njit(lambda a, b: np.dot(a, b))(a, a.T).tolist())
"""
LINALG_RAN = "print('scipy.linalg._basic' in sys.modules)"


def run(program: str) -> list[str]:
    return python("import sys\n" + program).stdout.split("\n")[:-1]


def test_a_kernel_multiplies_without_scipy_linalg_running():
    assert run(f"import ops.cpu\n{PRODUCT}\n{LINALG_RAN}") == ["[[5.0, 14.0], [14.0, 50.0]]", "False"]


def test_scipy_linalg_imported_afterwards_is_whole():
    program = f"""import ops.cpu
{PRODUCT}
import numpy as np
import scipy.linalg
from scipy.linalg import cython_blas
from scipy.linalg.blas import sgemm
print(scipy.linalg.cython_blas is cython_blas is sys.modules['scipy.linalg.cython_blas'])
print(scipy.linalg.solve(np.diag([2.0, 4.0]), np.ones(2)).tolist(), sgemm(1.0, np.eye(2), np.eye(2)).tolist())
{LINALG_RAN}"""
    assert run(program)[1:] == ["True", "[0.5, 0.25] [[1.0, 0.0], [0.0, 1.0]]", "True"]


def test_scipy_linalg_imported_before_is_left_alone():
    program = f"""import scipy.linalg
linalg = scipy.linalg
import ops.cpu
print(sys.modules['scipy.linalg'] is linalg, type(linalg).__name__)
{PRODUCT}"""
    assert run(program) == ["True module", "[[5.0, 14.0], [14.0, 50.0]]"]
