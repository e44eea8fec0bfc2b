"""The elementwise fusion pass and its generated kernels: which ops it groups, and that a fused graph computes
what the unfused one does bit for bit, forward and backward (every device: tests/ops/test_fused.py)."""
import collections
import os
import subprocess
import sys

import numpy as np
import pytest

import attngraph as ag
from attngraph.core import passes
from attngraph.core.autodiff import grad
from attngraph.core.executor import Executable
from attngraph.core.prims.fused import formula
from attngraph.inspect.flops import total_flops
from attngraph.render import to_dot
from ops.cpu.fused import MAX_INPUTS, scalar_source


def fused_nodes(graph):
    return [n for n in graph.nodes if n.op == "fused"]


def ops_run(graph) -> collections.Counter:
    """The ops a graph computes, counting those inside its fused nodes."""
    return collections.Counter(op for n in graph.nodes if n.kind == "call"
                               for op in ([i[0] for i in n.attrs["program"]] if n.op == "fused" else [n.op]))


def assert_fusion_changes_nothing(graph, **feeds):
    """The fused graph's outputs are the unfused graph's: same dtypes, shapes and bits (NaN where NaN)."""
    fused, plain = (Executable(passes.optimize(graph, elementwise=f))(**feeds) for f in (True, False))
    for a, b in zip(*(out if isinstance(out, tuple) else (out,) for out in (fused, plain))):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True)


def gru_update(x, h, b):
    """A GRU's state update from its projections: x (B, 3H) of the input, h (B, 3H) of the state; H = 4."""
    xz, xr, xn = ag.split(x, 4, axis=-1)
    hz, hr, hn = ag.split(h + b, 4, axis=-1)
    z, r = ag.sigmoid(xz + hz), ag.sigmoid(xr + hr)
    return (1 - z) * ag.tanh(xn + r * hn) + z * ag.tanh(hn)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_gru_update_is_one_kernel_forward_and_backward(dtype, rng):
    b = ag.Parameter(rng.standard_normal(12).astype(dtype), name="b")
    feeds = {k: rng.standard_normal((5, 12)).astype(dtype) for k in ("x", "h")}
    graph = ag.trace(lambda x, h: ag.sum(gru_update(x, h, b)), x=ag.Input(("B", 12), dtype),
                     h=ag.Input(("B", 12), dtype))
    forward = passes.optimize(graph)
    shifted, kernel = fused_nodes(forward)          # h + b, read by the slices; the rest of the update
    assert [op for op, _, _ in shifted.attrs["program"]] == ["add"]
    assert {"sigmoid", "tanh", "mul", "sub"} <= set(ops_run(forward))
    assert not {"sigmoid", "tanh", "mul", "sub", "getitem"} & {n.op for n in forward.nodes}
    assert sum(view is not None for view in kernel.attrs["views"]) == 6        # the gates, read in place
    gradient = graph.grad(wrt=["x", "h", "b"])
    assert len(fused_nodes(passes.optimize(gradient))) >= 3
    for batch in (5, 1, 3):          # one kernel serves every size of the symbolic dimension
        assert_fusion_changes_nothing(gradient, x=feeds["x"][:batch], h=feeds["h"][:batch])


def test_broadcast_inputs_are_read_in_place(rng):
    x, bias, gate = rng.standard_normal((2, 3, 4)), rng.standard_normal(4), rng.standard_normal((2, 1, 4))
    graph = ag.trace(lambda x, bias, gate: ag.relu((x + bias) * gate + 2.0), x=x, bias=bias, gate=gate)
    (node,) = fused_nodes(passes.optimize(graph))
    reads = dict(zip((x.name or x.op for x in node.inputs), node.attrs["reads"]))
    assert reads == {"x": (0, 1, 2), "bias": (2,), "gate": (0, -1, 2), "constant": ()}
    assert_fusion_changes_nothing(graph, x=x, bias=bias, gate=gate)
    np.testing.assert_array_equal(Executable(passes.optimize(graph))(x=x, bias=bias, gate=gate),
                                  np.maximum((x + bias) * gate + 2.0, 0))


def test_integer_arithmetic_wraps_in_its_dtype_and_predicates_stay_boolean():
    a, b = np.array([2 ** 30, -7, 5], np.int32), np.array([4, 3, 5], np.int32)

    def f(a, b):
        wrapped = a * b + a                                      # int32: wraps around, as NumPy and PyTorch
        keep = ag.logical_and(wrapped > 0, ag.logical_not(ag.equal(a, b)))
        return wrapped, ag.where(keep, wrapped, -wrapped).astype(np.float32) * 0.5
    graph = ag.trace(f, a=a, b=b)
    assert len(fused_nodes(passes.optimize(graph))) == 2
    assert_fusion_changes_nothing(graph, a=a, b=b)
    wrapped, scaled = Executable(passes.optimize(graph))(a=a, b=b)
    assert wrapped.dtype == np.int32 and wrapped.tolist() == [2 ** 30, -28, 30]
    assert scaled.dtype == np.float32 and scaled.tolist() == [2.0 ** 29, 14.0, -15.0]


def test_large_outputs_run_on_numba_s_threads(rng):
    """From PARALLEL_MIN_SIZE elements the parallel twin runs: broadcast, scalar and viewed inputs too."""
    x, bias = rng.standard_normal((2, 256, 128)).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    graph = ag.trace(lambda x, bias: ag.tanh(x[..., :64] * 0.5 + bias) - x[..., 64:], x=x, bias=bias)
    assert passes.optimize(graph).outputs[0].inputs[0].op == "fused"
    assert_fusion_changes_nothing(graph, x=x, bias=bias)


def test_a_value_read_outside_its_chain_is_computed_once():
    def f(x):
        e = ag.exp(x * 2.0)
        return ag.sum(e) + ag.sum(ag.tanh(e + 1.0) * 3.0)
    graph = ag.trace(f, x=np.linspace(-1, 1, 6))
    optimized = passes.optimize(graph)
    assert ops_run(optimized)["exp"] == 1 and ops_run(optimized)["mul"] == 2
    assert_fusion_changes_nothing(graph, x=np.linspace(-1, 1, 6))


def test_an_output_of_the_graph_is_kept():
    graph = ag.trace(lambda x: (ag.tanh(x + 1.0), ag.tanh(x + 1.0) * 2.0 - x), x=np.linspace(-1, 1, 4))
    optimized = passes.optimize(graph)
    first = optimized.outputs[0].inputs[0]
    assert first.op == "fused" and first in fused_nodes(optimized)[-1].inputs
    assert_fusion_changes_nothing(graph, x=np.linspace(-1, 1, 4))


def test_long_sums_split_into_kernels_of_at_most_max_inputs(rng):
    xs = {f"x{i}": rng.standard_normal(3) for i in range(40)}
    graph = ag.trace(lambda **xs: sum(ag.exp(x) for x in xs.values()), **xs)
    kernels = fused_nodes(passes.optimize(graph))
    assert len(kernels) >= 40 // MAX_INPUTS and all(len(n.inputs) <= MAX_INPUTS for n in kernels)
    assert ops_run(passes.optimize(graph)) == ops_run(passes.optimize(graph, elementwise=False))
    assert_fusion_changes_nothing(graph, **xs)


def test_scalars_non_contiguous_inputs_nan_and_inf(rng):
    x = np.array([[np.nan, -np.inf, -1.0, 0.0, 2.0, np.inf]] * 3, np.float32)

    def f(x):
        view = x[:, ::2]                                   # a strided view
        y = ag.maximum(ag.log(ag.relu(view) + 1.0), view) * ag.sqrt(ag.exp(-ag.relu(view)))
        return y, ag.sum(view) * 2.0 + 1.0                   # a 0-d chain
    graph = ag.trace(f, x=x)
    assert len(fused_nodes(passes.optimize(graph))) == 2
    with np.errstate(invalid="ignore"):
        assert_fusion_changes_nothing(graph, x=x)


def test_gradients_through_fused_nodes_are_those_of_their_ops(rng):
    """A fused node's VJP expands its program: differentiating an optimized graph gives what differentiating
    the traced one does."""
    x, w = rng.standard_normal((3, 4)), rng.standard_normal(4)
    graph = ag.trace(lambda x, w: ag.sum(ag.tanh(x * w + 1.0) * ag.sigmoid(x)), x=x, w=w)
    optimized = passes.optimize(graph)
    assert fused_nodes(optimized)
    for a, b in zip(Executable(grad(optimized, ["x", "w"]))(x=x, w=w), Executable(grad(graph, ["x", "w"]))(x=x, w=w)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_flops_formula_source_and_unfuse(rng):
    x, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    graph = ag.trace(lambda x, b: ag.tanh(x + b) * x, x=x, b=b)
    optimized = passes.optimize(graph)
    (node,) = fused_nodes(optimized)
    assert total_flops(optimized) == total_flops(graph) == 6 * (1 + 6 + 1)
    assert formula(node.attrs["program"], ["x", "b"]) == "mul(tanh(add(x, b)), x)"
    assert scalar_source(node.attrs["program"], 2) == ("def fused(x0, x1):\n    v2 = float64(add(x0, x1))\n"
                                                      "    v3 = float64(tanh(v2))\n    return float64(mul(v3, x0))\n")
    assert [m.op for m in node.value] == ["add", "tanh", "mul"] and node.source == graph.outputs[0].inputs[0].source
    expanded = passes.unfuse(optimized)
    assert not fused_nodes(expanded) and ops_run(expanded) == ops_run(graph)
    np.testing.assert_array_equal(Executable(expanded)(x=x, b=b), Executable(optimized)(x=x, b=b))


def test_the_drawing_shows_a_fused_node_as_its_formula():
    graph = passes.optimize(ag.trace(lambda x, b: ag.tanh(x + b) * x, x=np.ones((2, 3)), b=np.ones(3)))
    dot = to_dot(graph).source
    assert "mul(tanh(add([0], [1])), [0])" in dot and "fused ops:" in dot


def test_debug_mode_names_the_fused_op_that_made_the_nan():
    run = ag.trace(lambda x: ag.exp(ag.sqrt(x - 1.0) * 2.0), x=ag.Input((3,))).compile()
    with np.errstate(invalid="ignore"), ag.debug(), \
            pytest.raises(ag.NonFiniteError, match=r"NaN in the output of node n\d+ \(sqrt.*, fused into n\d+"):
        run(x=np.array([2.0, 0.5, 3.0], np.float32))


def test_generated_kernels_are_cached_on_disk(tmp_path):
    """A second process loads the kernel that the first compiled: numba compiles nothing."""
    script = (
        "import numpy as np\nfrom numba.core import event\nimport attngraph as ag\n"
        "compiled = []\n"
        "class Listener(event.Listener):\n"
        "    def on_start(self, e): compiled.append(e.data['dispatcher'].py_func.__qualname__)\n"
        "    def on_end(self, e): pass\n"
        "run = ag.trace(lambda x: ag.tanh(x * 3.0 + 1.0), x=ag.Input((4,))).compile()\n"
        "with event.install_listener('numba:compile', Listener()):\n"
        "    y = run(x=np.arange(4.0, dtype=np.float32))\n"
        "assert np.allclose(y, np.tanh(np.arange(4.0) * 3 + 1), atol=1e-6)\n"
        "print(' '.join(compiled))\n")
    env = {**os.environ, "ATTNGRAPH_KERNELS": str(tmp_path)}
    first, second = (subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                    check=True).stdout.split() for _ in range(2))
    assert "kernel.serial" in first and second == []
    assert len(list(tmp_path.glob("attngraph_fused_*.py"))) == 1 and list((tmp_path / "__pycache__").glob("*.nbi"))
