"""Bad input gives the project's own errors, with messages a user can act on."""
import numpy as np
import pytest

import attngraph as ag
from attngraph.core.functional import emit


def test_shape_mismatch_names_op_scope_source_line_and_shapes():
    class Proj(ag.Module):
        def __init__(self):
            super().__init__()
            self.lin = ag.nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x)

    with pytest.raises(ag.ShapeError) as err:
        ag.trace(Proj(), x=ag.Input(("B", 5)))
    message = str(err.value)
    for text in ["matmul", "scope 'lin'", "layers.py:", "(B, 5)", "(4, 3)", "contracts 5 with 4"]:
        assert text in message, (text, message)


def test_broadcast_mismatch_points_at_the_user_line():
    with pytest.raises(ag.ShapeError, match=r"test_errors.py:\d+.*do not broadcast"):
        ag.trace(lambda x, y: x + y, x=ag.Input((3, 4)), y=ag.Input((5,)))


def test_symbolic_dimension_does_not_broadcast_with_a_concrete_one():
    with pytest.raises(ag.ShapeError, match="do not broadcast"):
        ag.trace(lambda x, y: x + y, x=ag.Input(("T",)), y=ag.Input((10,)))


def test_mixing_dtypes_requires_a_cast():
    with pytest.raises(ag.DTypeError, match="astype"):
        ag.trace(lambda x, y: x * y, x=ag.Input((3,), "float32"), y=ag.Input((3,), "float64"))


def test_wrong_dtype_at_run_time():
    run = ag.trace(lambda x: x * 2, x=ag.Input((3,))).compile()
    with pytest.raises(ag.BindingError, match="must be float32, got float64"):
        run(x=np.ones(3))


def test_missing_extra_and_inconsistent_inputs_at_run_time():
    run = ag.trace(lambda x, m: x * m, x=ag.Input(("B", "T")), m=ag.Input(("B", 1))).compile()
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ag.BindingError, match="missing input 'm'"):
        run(x=x)
    with pytest.raises(ag.BindingError, match="unexpected input"):
        run(x=x, m=np.ones((2, 1), np.float32), y=x)
    with pytest.raises(ag.BindingError, match="dimension B is 2 elsewhere but 4"):
        run(x=x, m=np.ones((4, 1), np.float32))
    with pytest.raises(ag.BindingError, match="axis 1"):
        run(x=x, m=np.ones((2, 2), np.float32))
    with pytest.raises(ag.BindingError, match="shape"):
        run(x=np.ones(3, np.float32), m=np.ones((2, 1), np.float32))


def test_unknown_op_name():
    with pytest.raises(ag.AttnGraphError, match="unknown op 'frobnicate'"):
        ag.trace(lambda x: emit("frobnicate", x), x=ag.Input((2,)))


def test_branching_on_a_traced_value_is_explained():
    def f(x):
        if ag.sum(x) > 0:
            return x
        return -x

    with pytest.raises(ag.TracingError, match="cannot branch on a traced value.*ag.where"):
        ag.trace(f, x=ag.Input((3,)))


def test_debug_mode_names_the_node_that_made_a_nan_forward_and_backward():
    def f(x):
        return ag.sum(ag.sqrt(x - 1.0))

    forward = ag.trace(f, x=ag.Input((3,))).compile()
    x = np.array([2.0, 0.5, 3.0], np.float32)
    with np.errstate(invalid="ignore"):
        assert np.isnan(forward(x=x))
        with ag.debug(), pytest.raises(ag.NonFiniteError, match=r"NaN in the output of node n\d+ \(sqrt.*test_errors.py"):
            forward(x=x)
    backward = ag.trace(f, x=ag.Input((3,))).grad(wrt=["x"]).compile()
    with np.errstate(divide="ignore"), ag.debug(), \
            pytest.raises(ag.NonFiniteError, match="Inf in the output of .*gradient of"):
        backward(x=np.array([2.0, 1.0, 3.0], np.float32))


def test_debug_mode_catches_nan_in_an_input():
    run = ag.trace(lambda x: x * 2, x=ag.Input((3,))).compile()
    with ag.debug(), pytest.raises(ag.NonFiniteError, match="input 'x'"):
        run(x=np.array([1, np.nan, 2], np.float32))


def test_ops_outside_a_trace_say_how_to_trace():
    with pytest.raises(ag.TracingError, match="ag.trace"):
        ag.tanh(np.ones(3))


def test_padding_mask_on_the_query_axis_is_refused():
    q = ag.Input(("B", 2, "T", 4))
    with pytest.raises(ag.ShapeError, match=r"\(B, 1, 1, Tk\)"):
        ag.trace(lambda q, m: ag.scaled_dot_product_attention(q, q, q, mask=m), q=q,
                 m=ag.Input(("B", 1, "T", 1), "bool"))


def test_fully_masked_row_gives_zeros_and_zero_gradients_never_nan(rng):
    x = rng.standard_normal((2, 3, 4))
    mask = np.ones((2, 3, 4), bool)
    mask[1, 2] = False
    mask[0, 0, 1:] = False
    weights = rng.standard_normal((2, 3, 4))
    value, grad = ag.value_and_grad(lambda x, m: ag.sum(ag.softmax(x, mask=m) * weights))(x, mask)
    out = ag.trace(lambda x, m: ag.softmax(x, mask=m), x=x, m=mask).compile()(x=x, m=mask)
    assert np.all(out[1, 2] == 0) and np.all(grad[1, 2] == 0)
    assert np.isfinite(value) and np.isfinite(grad).all()
    np.testing.assert_allclose(out[0, 0], [1, 0, 0, 0])


def test_defining_a_differentiable_primitive_without_vjp_fails_loudly():
    from attngraph.core.primitive import REGISTRY, define

    with pytest.raises(ag.AttnGraphError, match="'no_vjp_yet' is differentiable but has no VJP"):
        define("no_vjp_yet", lambda x: (x.shape, x.dtype))
    assert "no_vjp_yet" not in REGISTRY
