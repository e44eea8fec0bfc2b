"""README's "Adding an op", a step per test: a primitive added without one of them fails here (the CPU kernel:
tests/test_architecture.py; the CUDA twin: tests/cuda/test_device.py; the warmup: tests/test_cli.py)."""
import re
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
import ops
from attngraph.core.primitive import REGISTRY
from attngraph.export.onnx import CONVERTERS, NO_ONNX_FORM
from ops.cpu import elementwise
from tests.core.test_primitives import CASES, inputs
from tests.ops.test_op_table import BINARY, BITWISE, DIVISION, INTS, SMOOTH, UNARY

ROOT = Path(__file__).parents[1]
BACKWARD = {name for name, reason in NO_ONNX_FORM.items() if reason.startswith("a backward op")}
# primitives that are no ag.<name>, and what reaches them (backward ops are emitted by their forward op's VJP)
WITHOUT_WRAPPER = {"argsort": "ag.sort, ag.topk", "gather": "ag.take, ag.embedding", "getitem": "x[index]",
                   "size": "ag.mean, ag.var", "fused": "the elementwise fusion pass",
                   "ring_attention": "attngraph.attention.ring", "cumarg": "ag.cummax, ag.cummin",
                   "max_pool2d_indices": "ag.max_pool2d(return_indices=True), ag.max_pool1d",
                   "take_along_axis": "ag.gather", "put_along_axis": "ag.scatter, ag.scatter_add, ag.scatter_reduce"}
# primitives that neither the cases of tests/core/test_primitives.py (run on both devices by
# tests/cuda/test_executor.py) nor the rows of tests/ops/test_op_table.py (run on both devices there) reach, and the
# file that runs them on both devices (or on the CPU, where the op has no CUDA kernel)
TESTED_ELSEWHERE = {
    "take_along_axis": "tests/ops/test_shape_table.py", "put_along_axis": "tests/ops/test_shape_table.py",
    "abs": "tests/ops/test_unary_functions.py", "clip": "tests/ops/test_unary_functions.py",
    "cos": "tests/ops/test_unary_functions.py", "sin": "tests/ops/test_unary_functions.py",
    "rsqrt": "tests/ops/test_unary_functions.py", "silu": "tests/ops/test_unary_functions.py",
    "logsumexp": "tests/ops/test_min_logsumexp.py", "min": "tests/ops/test_min_logsumexp.py",
    "var": "tests/ops/test_reduce.py",
    "argmax": "tests/ops/test_sort.py", "argmin": "tests/ops/test_sort.py", "argsort": "tests/ops/test_sort.py",
    "cumsum": "tests/ops/test_scan.py", "scan": "tests/ops/test_scan_codegen.py",
    "cumprod": "tests/ops/test_reduction_table.py", "logcumsumexp": "tests/ops/test_reduction_table.py",
    "cumarg": "tests/ops/test_reduction_table.py", "prod": "tests/ops/test_reduction_table.py",
    "arange": "tests/ops/test_positions.py", "relative_distance": "tests/ops/test_positions.py",
    "cross_entropy": "tests/ops/test_cross_entropy.py", "cross_entropy_grad": "tests/ops/test_cross_entropy.py",
    "dropout": "tests/ops/test_dropout.py", "gather": "tests/ops/test_embedding.py",
    "scatter_add": "tests/ops/test_embedding.py", "fused": "tests/ops/test_fused.py",
    "logical_not": "tests/ops/test_elementwise.py", "logical_or": "tests/ops/test_elementwise.py",
    "not_equal": "tests/ops/test_elementwise.py",
    "conv2d": "tests/ops/test_conv.py", "conv_transpose2d": "tests/ops/test_conv.py",
    "conv2d_weight_grad": "tests/ops/test_conv.py", "max_pool2d": "tests/ops/test_conv.py",
    "max_pool2d_grad": "tests/ops/test_conv.py", "avg_pool2d": "tests/ops/test_conv.py",
    "avg_pool2d_grad": "tests/ops/test_conv.py", "attention_bias_grad": "tests/ops/test_attention.py",
    **dict.fromkeys(("max_pool2d_indices", "adaptive_avg_pool2d", "adaptive_avg_pool2d_grad", "adaptive_max_pool2d",
                     "adaptive_max_pool2d_grad"), "tests/ops/test_conv_table.py"),
    "ring_attention": "tests/attention/test_ring.py", "ring_attention_grad": "tests/attention/test_ring.py",
    "stop_gradient": "tests/core/test_autodiff.py",
    "bitcast": "tests/ops/test_dtypes.py",
}


def test_every_elementwise_primitive_has_the_scalar_function_that_cuda_and_fusion_compile():
    missing = [name for name, prim in REGISTRY.items() if prim.elementwise and not (
        isinstance(elementwise.KERNELS.get(name), elementwise.Elementwise) or name == "astype")]
    assert missing == []


def test_every_primitive_is_a_functional_wrapper_a_backward_op_or_listed():
    unreachable = sorted(set(REGISTRY) - set(dir(ag)) - BACKWARD - set(WITHOUT_WRAPPER))
    assert unreachable == [], "add the op's wrapper to core/tensor.py's __all__ (or its family module's)"
    assert set(WITHOUT_WRAPPER) - {"gather"} <= set(REGISTRY) - set(dir(ag))    # ag.gather is torch.gather's


def without_an_onnx_form() -> list[str]:
    """The primitives with neither a converter in export/onnx.py's CONVERTERS nor a reason in NO_ONNX_FORM."""
    return sorted(set(REGISTRY) - set(CONVERTERS) - set(NO_ONNX_FORM))


def without_a_kernel(device: str) -> list[str]:
    """The primitives that ``device``'s backend has no kernel for."""
    return sorted(set(REGISTRY) - set(ops.get_backend(device).kernels))


def test_every_primitive_has_an_onnx_form_or_a_listed_refusal():
    assert set(CONVERTERS).isdisjoint(NO_ONNX_FORM)
    assert without_an_onnx_form() == [], \
        "add a converter to export/onnx.py's CONVERTERS, or the op and the reason to NO_ONNX_FORM"
    assert set(NO_ONNX_FORM) <= set(REGISTRY)


def ops_of(fn, *arrays) -> set[str]:
    """The primitives of ``fn``'s graph on ``arrays`` and, for a floating result, of its gradient with respect to
    every input."""
    feeds = {f"x{i}": x for i, x in enumerate(arrays)}
    graph = ag.trace(lambda **xs: ag.sum(fn(*xs.values())), **feeds)
    gradient = graph.grad(wrt=list(feeds)) if graph.outputs[0].dtype.kind == "f" else graph
    return {n.op for g in (graph, gradient) for n in g.nodes}


def exercised_by_the_cases() -> set[str]:
    """The primitives that the case tables reach: tests/core/test_primitives.py's and tests/ops/test_op_table.py's."""
    rng = np.random.default_rng(0)
    return (set().union(*(ops_of(CASES[case][0], *inputs(case, rng, np.float64)) for case in CASES))
            | set().union(*(ops_of(row[0], SMOOTH) for row in UNARY.values()))
            | set().union(*(ops_of(row[0], SMOOTH, SMOOTH[::-1]) for row in (*BINARY.values(), *DIVISION.values())))
            | set().union(*(ops_of(row[0], INTS, INTS[::-1]) for row in BITWISE.values())) | ops_of(lambda a: ~a, INTS))


def test_every_primitive_has_a_case_on_both_devices():
    uncased = sorted(set(REGISTRY) - exercised_by_the_cases() - set(TESTED_ELSEWHERE))
    assert uncased == [], "add a case to tests/core/test_primitives.py's CASES"


@pytest.mark.parametrize("name", sorted(TESTED_ELSEWHERE))
def test_a_primitive_tested_elsewhere_is_named_in_its_test_file(name):
    forward = re.sub(r"(_input|_weight|_bias)?_grad$", "", name)        # a backward op: its forward op's name
    assert re.search(rf"\b{forward}\b", (ROOT / TESTED_ELSEWHERE[name]).read_text()), TESTED_ELSEWHERE[name]
