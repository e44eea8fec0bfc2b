"""Issue 26's "how it is checked": every function of ``attngraph.functional.__all__`` is in a table of cases run on
every device (CPU and CUDA: the simulator where there is no GPU), and every primitive has a CUDA kernel and an ONNX
form or a listed refusal.

A table module (tests/ops/test_*.py, tests/nn/test_*.py) names the ``ag`` functions whose parametrized tests run over the
``device`` fixture in a module-level ``COVERS`` set, derived from its tables' keys. tests/core/test_primitives.py's
``CASES`` run on both devices too (against NumPy on the CPU, the CPU's values and gradients on CUDA:
tests/cuda/test_executor.py), and cover the functions each case calls. A function added to ``__all__`` without a
row fails the first test, which names it. The eager functions, whose result's shape depends on the data, run on
NumPy arrays and never on a device: they are listed in ``EAGER``, and each must refuse a traced tensor."""
import importlib
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import TracingError
from attngraph.core import functional
from attngraph.core.primitive import REGISTRY
from ops import _cuda
from tests.core.test_primitives import CASES
from tests.test_op_checklist import BACKWARD, WITHOUT_WRAPPER, without_a_kernel, without_an_onnx_form

FUNCTIONS = set(functional.__all__) - {"Tensor"}
EAGER = {"masked_select": lambda x: ag.masked_select(x, x > 0), "nonzero": ag.nonzero}   # tests/ops/test_indexing.py


def tables() -> dict[str, set[str]]:
    """Each tests/ops and tests/nn module that has a ``COVERS``: its name, and the functions it covers."""
    tests = Path(__file__).parents[1]
    modules = (importlib.import_module(f"tests.{folder}.{path.stem}")
               for folder in ("ops", "nn") for path in sorted((tests / folder).glob("test_*.py")))
    return {module.__name__: set(module.COVERS) for module in modules if hasattr(module, "COVERS")}


def called(fn) -> set[str]:
    """The ``ag`` functions a case calls: ``fn`` itself when it is one, else those its code names (``ag.sum``)."""
    if fn in (getattr(ag, name) for name in FUNCTIONS):
        return {fn.__name__}
    return FUNCTIONS.intersection(fn.__code__.co_names)


def covered() -> set[str]:
    return set().union(*tables().values(), *(called(fn) for fn, _, _ in CASES.values()))


def test_every_function_is_in_a_table_run_on_every_device():
    uncovered = sorted(FUNCTIONS - covered() - set(EAGER))
    assert uncovered == [], (f"{len(uncovered)} functions of attngraph.functional.__all__ are in no case table run on "
                             f"every device: {', '.join(uncovered)}; add rows to a table of tests/ops/ and its COVERS")


@pytest.mark.parametrize("name", sorted(EAGER))
def test_the_eager_functions_refuse_a_traced_tensor(name):
    with pytest.raises(TracingError, match="depends on the data"):
        ag.trace(EAGER[name], x=np.ones(3))


@pytest.mark.parametrize("module", sorted(tables()))
def test_a_tables_covers_names_functions_of_the_api(module):
    assert sorted(tables()[module] - set(functional.__all__)) == []        # Tensor: its operators and indexing


def reached_by(primitive: str) -> str:
    """Which ``ag`` function (or what else) runs ``primitive``, for the messages below."""
    if primitive in FUNCTIONS:
        return f"ag.{primitive}"
    return WITHOUT_WRAPPER.get(primitive) or ("a backward op" if primitive in BACKWARD else "no function")


def test_every_primitive_has_an_onnx_form_or_a_listed_refusal():
    assert [f"{p} ({reached_by(p)})" for p in without_an_onnx_form()] == [], \
        "add a converter to export/onnx.py's CONVERTERS, or the op and the reason to NO_ONNX_FORM"


@pytest.mark.skipif(bool(_cuda.unavailable()), reason=str(_cuda.unavailable()))
def test_every_primitive_has_a_cuda_kernel():
    assert [f"{p} ({reached_by(p)})" for p in without_a_kernel("cuda")] == [], "add its kernel to ops/cuda/"
