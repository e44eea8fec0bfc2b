"""float16 storage (computed in float32, rounded per op: attngraph/core/half.py), bfloat16 refused, and ``bitcast``,
on every device: values against the float32 computation rounded to float16, float16 gradients, parameters and
constants, the fused and debug paths, ONNX; bitcast's bits against NumPy's ``view``."""
import numpy as np
import pytest

import attngraph as ag
import ops
from attngraph.errors import DTypeError
from tests.conftest import run, value_and_grad_on

HALF = np.float16
X = np.array([[-2.5, -1.0, -0.0, 0.3], [0.7, 1.5, 3.0, 65504.0]])
SMALL = np.array([[-1.2, -0.4, 0.1], [0.6, 1.1, 2.0]])

# name: (a function of float tensors, its inputs); each computes on values, so each runs its float32 kernel
FUNCTIONS = {
    "add_broadcast": (lambda a, b: a + b * 2, (SMALL, SMALL[0])),
    "exp_tanh_fused": (lambda a: ag.tanh(ag.exp(a) - 1) * a, (SMALL,)),
    "matmul": (ag.matmul, (SMALL, SMALL.T)),
    "softmax": (lambda a: ag.softmax(a, axis=-1), (SMALL,)),
    "layer_norm": (lambda a: ag.layer_norm(a), (SMALL,)),
    "sum_mean": (lambda a: ag.sum(a, axis=0) + ag.mean(a, axis=-1)[0], (SMALL,)),
    "gelu": (ag.gelu, (SMALL,)),
    "where_comparison": (lambda a: ag.where(a > 0, a, -a), (SMALL,)),
    "transpose_slice": (lambda a: a.T[1:], (SMALL,)),
    "overflow": (lambda a: a * 2, (X,)),                         # 65504 · 2 is inf in float16, as in PyTorch
}
COVERS = {"bitcast", "astype"}        # astype: the casts to and from float16 below


def float32_rounded(fn, arrays):
    """``fn`` computed in float32 on the float16 values, then rounded to float16: what each device must give,
    up to the rounding of the ops between (float16 keeps 11 bits: 2⁻¹¹ relative each)."""
    return run(fn, *(a.astype(HALF).astype(np.float32) for a in arrays)).astype(HALF)


def assert_half_close(got, want):
    assert got.dtype == HALF and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=3 * 2.0 ** -11, atol=2e-4)


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("name", FUNCTIONS)
def test_float16_values_are_the_float32_ones_rounded(name, device):
    fn, arrays = FUNCTIONS[name]
    assert_half_close(run(fn, *(a.astype(HALF) for a in arrays), device=device), float32_rounded(fn, arrays))


@pytest.mark.parametrize("name", [n for n in FUNCTIONS if n not in ("where_comparison", "overflow")])
def test_float16_gradients_are_float16_and_the_float32_ones_rounded(name, device):
    fn, arrays = FUNCTIONS[name]
    weights = np.linspace(-1, 1, np.size(run(fn, *arrays))).reshape(np.shape(run(fn, *arrays)))

    def objective(*xs):
        return ag.sum(fn(*xs) * weights.astype(xs[0].dtype))
    value, grads = value_and_grad_on(device, objective, *(a.astype(HALF) for a in arrays))
    want_value, want_grads = value_and_grad_on(ops.get_backend("cpu"), objective, *(a.astype(HALF).astype(np.float32) for a in arrays))
    assert value.dtype == HALF and abs(float(value) - float(want_value)) <= 2e-3 * (1 + abs(float(want_value)))
    for grad, want in zip(grads, want_grads):
        assert_half_close(grad, want.astype(HALF))


def test_float16_parameters_and_constants_stay_float16(device):
    weight = ag.Parameter(np.linspace(-1, 1, 6).reshape(3, 2).astype(HALF), name="w")
    table = np.array([0.5, -2.0], HALF)
    x = SMALL.astype(HALF)
    graph = ag.trace(lambda x: ag.relu(x @ weight + table) + 0.1, x=x)
    assert {n.dtype for n in graph.nodes} == {np.dtype(HALF)}
    want = np.maximum(x.astype(np.float32) @ weight.data.astype(np.float32) + table, 0) + np.float32(0.1)
    assert_half_close(graph.compile(device.name)(x=x), want.astype(HALF))
    loss = ag.trace(lambda x: ag.sum(ag.relu(x @ weight + table)), x=x).grad(wrt=["w"])
    _, dw = loss.compile(device.name)(x=x)
    assert_half_close(dw, (x.astype(np.float32).T @ ((x.astype(np.float32) @ weight.data + table) > 0)).astype(HALF))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")     # 300², as NumPy's float16
def test_debug_mode_runs_float16_unfused_and_names_a_float16_overflow():
    x = np.array([300.0, -2.0], HALF)
    with ag.debug():
        assert run(lambda a: a * 2, x).tolist() == [600.0, -4.0]
        with pytest.raises(ag.NonFiniteError, match="Inf in the output of .*mul.*float16"):
            run(lambda a: a * a, x)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")     # 70000, as NumPy's cast
def test_casts_between_float16_and_other_dtypes_round_to_nearest_even(device):
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 70000.0, -1e-8, 3.7], np.float32)
    got = run(lambda a: ag.astype(a, "float16"), x, device=device)
    np.testing.assert_array_equal(got, x.astype(HALF))        # 1, 1 + 2⁻⁹, inf, -0, 3.7 rounded
    assert run(lambda a: ag.astype(a, "float64"), got, device=device).tolist() == got.astype(np.float64).tolist()
    assert run(lambda a: ag.astype(a, "int32"), got[[0, 1, 3, 4]], device=device).tolist() == [1, 1, 0, 3]


def test_a_float16_graph_exports_to_onnx_in_float16(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from attngraph.export import export_onnx
    x = SMALL.astype(HALF)
    graph = ag.trace(lambda x: ag.softmax(ag.gelu(x @ x.T) + 1.5), x=x)
    export_onnx(graph, tmp_path / "half.onnx")
    (got,) = ort.InferenceSession(str(tmp_path / "half.onnx")).run(None, {"x": x})
    assert_half_close(got, graph.compile()(x=x))


@pytest.mark.parametrize("source, target", [(np.float32, "int32"), (np.float16, "int16"), (np.int8, "uint8"),
                                            (np.uint8, "bool"), (np.float64, "uint64"), (np.int32, "float32")])
def test_bitcast_reads_the_bits_as_numpy_view(source, target, device):
    x = np.array([[-1.5, 0.0, 2.0], [1.0, 3.0, -0.0]]).astype(source)
    if target == "bool":
        x = (x > 0).astype(source)          # bytes of 0 and 1 only: the rest are no bool
    got = run(lambda a: (ag.bitcast(a, target), ag.bitcast(a.T, target)), x, device=device)
    for result, want in zip(got, (x.view(target), x.T.view(target))):
        assert result.dtype == np.dtype(target)
        np.testing.assert_array_equal(result, want)


def test_bitcast_keeps_0_d_and_empty_shapes_round_trips_and_has_no_gradient(device):
    assert run(lambda a: ag.bitcast(a, "int32"), np.array(1.0, np.float32), device=device).tolist() == 0x3F800000
    assert run(lambda a: ag.bitcast(a, "float32"), np.zeros((0, 3), np.int32), device=device).shape == (0, 3)
    x = np.array([np.nan, -np.inf, 1e-45], np.float32)
    same = run(lambda a: ag.bitcast(ag.bitcast(a, "uint32") ^ 0, "float32"), x, device=device)
    np.testing.assert_array_equal(same.view(np.uint32), x.view(np.uint32))
    _, (grad,) = value_and_grad_on(device, lambda a: ag.sum(ag.bitcast(ag.bitcast(a, "int32"), "float32")),
                                   np.ones(2, np.float32))
    assert grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", ["float64", "int8", np.bool_, "bfloat16", "no such dtype"])
def test_bitcast_refuses_another_itemsize_or_an_unknown_dtype_while_tracing(dtype):
    with pytest.raises(DTypeError, match="bitcast"):
        ag.trace(lambda a: ag.bitcast(a, dtype), a=np.zeros(3, np.float32))


def test_bfloat16_is_refused_wherever_it_reaches_the_api_naming_float16_and_float32():
    advice = "bfloat16, which attngraph does not store or compute in .*float16.*float32"
    for make in (lambda: ag.Input((2,), "bfloat16"), lambda: ag.trace(lambda a: a.astype("bfloat16"), a=np.ones(2))):
        with pytest.raises(DTypeError, match=advice):
            make()
    ml_dtypes = pytest.importorskip("ml_dtypes")
    brain = np.ones(2, ml_dtypes.bfloat16)
    graph = ag.trace(lambda a: a * 2, a=np.ones(2, np.float32))
    for make in (lambda: ag.Parameter(brain), lambda: graph.compile()(a=brain), lambda: ag.trace(lambda a: a * 2, a=brain),
                 lambda: ag.trace(lambda a: a + brain, a=np.ones(2, np.float32))):
        with pytest.raises(DTypeError, match=advice):
            make()
    with pytest.raises(DTypeError, match=r"argument 0 is bfloat16; .*astype\(np.float32\)"):
        ag.value_and_grad(lambda a: ag.sum(a))(brain)


def test_optimizers_refuse_float16_parameters_naming_the_way_out():
    from attngraph.train import Adam
    layer = ag.nn.Linear(3, 2).astype("float16")
    with pytest.raises(DTypeError, match=r"parameter 'weight' is float16, .*train in float32 .*astype\('float16'\)"):
        Adam(layer)
