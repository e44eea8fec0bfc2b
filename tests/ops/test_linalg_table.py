"""einsum, outer, bmm and baddbmm in one table: each case's value (float32 and float64) and gradient against NumPy's
einsum on every device, gradcheck in float64 (CPU); einsum routed to one matmul where it is one; integer operands;
the subscripts and arguments refused while tracing; and the products exported to ONNX, run by onnxruntime."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.errors import DTypeError, ShapeError
from attngraph.inspect.gradcheck import gradcheck
from tests.conftest import run, value_and_grad_on

# subscripts: the operands' shapes
EINSUM = {
    "ij,jk": [(2, 3), (3, 4)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 2)],
    "bhqd,bhkd->bhqk": [(1, 2, 3, 2), (1, 2, 4, 2)],
    "ii": [(3, 3)],
    "iij->ji": [(2, 2, 3)],
    "ii->i": [(3, 3)],
    "ij->": [(2, 3)],
    "ba,...": [(2, 3), (4,)],
    "...,...": [(2, 3), (3,)],
    "ij,ij->ij": [(2, 1), (2, 3)],
    "i,j": [(3,), (4,)],
    "...ij,...jk": [(3, 1, 2, 3), (2, 3, 2)],
    "abc,cd,de->ae": [(2, 3, 4), (4, 2), (2, 2)],
    "ijk,jil->kl": [(2, 3, 4), (3, 2, 2)],
    "i,i": [(4,), (4,)],
    ",->": [(), ()],
    "ij,jk->ik ": [(0, 3), (3, 2)],
    "ij, jk": [(2, 0), (0, 2)],
}
# name: (attngraph's product, its NumPy reference, the operands' shapes)
PRODUCTS = {
    "outer": (ag.outer, np.outer, [(3,), (2,)]),
    "bmm": (ag.bmm, np.matmul, [(2, 3, 4), (2, 4, 2)]),
    "baddbmm": (lambda c, a, b: ag.baddbmm(c, a, b, beta=0.5, alpha=-2.0),
                lambda c, a, b: 0.5 * c + -2.0 * (a @ b), [(3, 2), (2, 3, 4), (2, 4, 2)]),
}
CASES = {**{f"einsum {spec}": (lambda *xs, spec=spec: ag.einsum(spec, *xs),
                               lambda *xs, spec=spec: np.einsum(spec, *xs), shapes)
            for spec, shapes in EINSUM.items()}, **PRODUCTS}
COVERS = {"einsum", *PRODUCTS}


def operands(shapes, dtype=np.float64):
    rng = np.random.default_rng(len(shapes) + sum(map(len, shapes)))
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_values_are_numpy_s(case, dtype, device):
    fn, ref, shapes = CASES[case]
    xs = operands(shapes, dtype)
    got = run(fn, *xs, device=device)
    want = ref(*(x.astype(np.float64) for x in xs))
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [c for c in CASES if 0 not in sum(CASES[c][2], ())])
def test_gradients_are_numpy_s_slope(case, device, numeric_grad):
    fn, ref, shapes = CASES[case]
    xs = operands(shapes)
    weights = np.linspace(-1, 2, ref(*xs).size).reshape(ref(*xs).shape)
    _, grads = value_and_grad_on(device, lambda *ts: ag.sum(fn(*ts) * weights), *xs)
    for i, grad in enumerate(grads):
        def f(x, i=i):
            return (ref(*xs[:i], x, *xs[i + 1:]) * weights).sum()
        np.testing.assert_allclose(grad, numeric_grad(f, xs[i]), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_gradcheck_in_float64(case):
    fn, _, shapes = CASES[case]
    gradcheck(lambda *xs: ag.sum(ag.tanh(fn(*xs))), *operands(shapes)).raise_if_failed()


@pytest.mark.parametrize("spec, shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
                                          ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
                                          ("bqd,dk->bqk", [(2, 3, 4), (4, 5)])])
def test_a_product_is_one_matmul_between_transposes_and_reshapes(spec, shapes):
    graph = ag.trace(lambda a, b: ag.einsum(spec, a, b), a=ag.Input(shapes[0]), b=ag.Input(shapes[1]))
    calls = [n.op for n in graph.nodes if n.kind == "call"]
    assert calls.count("matmul") == 1 and set(calls) <= {"matmul", "transpose", "reshape", "broadcast_to"}


def test_integer_operands_multiply_and_sum_in_their_dtype():
    a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    got = run(lambda a, b: ag.einsum("ij,jk", a, b), a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a @ b)
    np.testing.assert_array_equal(run(ag.outer, a[0], b[0]), np.outer(a[0], b[0]))


def test_baddbmm_with_beta_0_does_not_read_the_input_as_torch():
    a, b = operands([(2, 3, 4), (2, 4, 2)])
    got = run(lambda c, a, b: ag.baddbmm(c, a, b, beta=0), np.full((3, 2), np.nan), a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-14)


@pytest.mark.parametrize("build, error, message", [
    (lambda a, b: ag.einsum("ij,jk", a), ShapeError, "names 2 operand"),
    (lambda a, b: ag.einsum("i1,jk", a, b), ShapeError, "subscripts are letters"),
    (lambda a, b: ag.einsum("ijk,jk", a, b), ShapeError, "3 indices for an operand of 2"),
    (lambda a, b: ag.einsum("ij,kl->ik..", a, b), ShapeError, "one '...' per term"),
    (lambda a, b: ag.einsum("ij,ij", a, b), ShapeError, "index 'i' has sizes 2 and 3"),
    (lambda a, b: ag.einsum("ij,jk->iz", a, b), ShapeError, "output index 'z' is in no operand"),
    (lambda a, b: ag.einsum("ij,jk->ii", a, b), ShapeError, "repeated"),
    (lambda a, b: ag.einsum("...j,jk->k", a, b), ShapeError, "need a '...' in the output"),
    (lambda a, b: ag.einsum("ii", a), ShapeError, "index 'i' has sizes 2 and 3"),
    (lambda a, b: ag.einsum("ij,jk->ik->i", a, b), ShapeError, "one '->'"),
    (lambda a, b: ag.einsum(a, b), ShapeError, "subscripts as a string"),
    (lambda a, b: ag.einsum("ij,jk", a, b.astype("float64")), DTypeError, "different dtypes"),
    (lambda a, b: ag.outer(a, b[0]), ShapeError, "two vectors"),
    (lambda a, b: ag.bmm(a, b), ShapeError, r"bmm takes \(B, n, m\)"),
    (lambda a, b: ag.baddbmm(a, ag.reshape(a, (1, 2, 3)), ag.reshape(b, (1, 3, 4))), ShapeError,
     r"input \(2, 3\) does not broadcast to the product \(1, 2, 4\)"),
    (lambda a, b: ag.baddbmm(a, a, b, beta="1"), ShapeError, "beta must be a number"),
])
def test_bad_subscripts_and_arguments_raise_while_tracing(build, error, message):
    with pytest.raises(error, match=message):
        ag.trace(build, a=ag.Input((2, 3)), b=ag.Input((3, 4)))


def test_a_diagonal_needs_a_concrete_size():
    with pytest.raises(ShapeError, match="repeated index 'i' takes axes of one concrete size"):
        ag.trace(lambda a: ag.einsum("ii->i", a), a=ag.Input(("T", "T")))


def test_the_products_export_to_onnx_and_match_in_onnxruntime():
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from attngraph.export import to_onnx
    a, b, c = operands([(2, 3, 3), (2, 3, 4), (3, 4)], np.float32)

    def products(a, b, c):
        return (ag.einsum("bii->bi", a), ag.einsum("bij,bjk->bik", a, b), ag.einsum("...k,jk", b, c),
                ag.outer(c[0], c[1]), ag.baddbmm(c, a, b, beta=0.5, alpha=2.0))
    graph = ag.trace(products, a=a, b=b, c=c)
    session = ort.InferenceSession(to_onnx(graph).SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, dict(a=a, b=b, c=c)), graph.compile()(a=a, b=b, c=c)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
