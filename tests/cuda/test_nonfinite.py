"""NaN and Inf through the CUDA kernels: the semantics of their CPU twins (tests/ops/test_nonfinite.py),
checked on the same inputs, NaN for NaN. Every input holds clean rows beside the bad ones."""
import numpy as np
import pytest

from ops.cpu import attention as cpu_attention
from ops.cpu import cross_entropy as cpu_xent
from ops.cpu import gelu as cpu_gelu
from ops.cpu import layer_norm as cpu_ln
from ops.cpu import softmax as cpu_sm
from ops.cuda import attention as cuda_attention
from ops.cuda import cross_entropy as cuda_xent
from ops.cuda import gelu as cuda_gelu
from ops.cuda import layer_norm as cuda_ln
from ops.cuda import softmax as cuda_sm
from tests.cuda.conftest import host, on_device

# The simulator computes on NumPy scalars, which warn where a GPU quietly makes NaN or inf.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
BAD = pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])


def same(device_result, cpu_result, dtype):
    """The CUDA result equals the CPU's, NaN where it is NaN (float32: CUDA's exp is not the CPU's polynomial)."""
    got = host(device_result)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(cpu_result))
    np.testing.assert_allclose(got, cpu_result, **(dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else
                                                   dict(rtol=1e-12, atol=1e-14)))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@DTYPES
@BAD
def test_softmax_rows_with_nan_or_inf_and_masked_ones(name, dtype, bad, rng):
    """Row 0 holds a bad score it takes part in; row 1 one that is masked out; row 2 is clean."""
    x, g = (rng.standard_normal((3, 6)).astype(dtype) for _ in range(2))
    mask = np.ones((3, 6), bool)
    mask[:, 4] = False
    x[0, 2] = x[1, 4] = bad
    y = getattr(cuda_sm, name)(*on_device(x, mask))
    want = getattr(cpu_sm, name)(x, mask)
    same(y, want, dtype)
    assert np.isnan(host(y)[0, [0, 1, 2, 3, 5]]).all() and np.isfinite(host(y)[1:]).all()
    if name == "softmax":
        same(cuda_sm.softmax_backward(on_device(g), y), cpu_sm.softmax_backward(g, want), dtype)
    else:
        same(cuda_sm.log_softmax_backward(on_device(g), y, on_device(mask)),
             cpu_sm.log_softmax_backward(g, want, mask), dtype)


@DTYPES
@BAD
def test_cross_entropy_bad_kept_row_ignored_row_and_minus_inf(dtype, bad, rng):
    """Row 0 kept with a bad logit, row 1 ignored and all bad, row 2 with -inf beside its target, row 3 clean."""
    logits = rng.standard_normal((4, 5)).astype(dtype)
    targets = np.array([1, -100, 3, 0])
    logits[0, 4] = bad
    logits[1] = bad
    logits[2, 0] = -np.inf
    g = np.asarray(1.5, dtype)
    loss = cuda_xent.cross_entropy(*on_device(logits, targets), -100)
    assert np.isnan(host(loss))
    same(cuda_xent.cross_entropy_backward(*on_device(g, logits, targets), -100),
         cpu_xent.cross_entropy_backward(g, logits, targets, -100), dtype)
    keep = [1, 2, 3]
    same(cuda_xent.cross_entropy(*on_device(logits[keep], targets[keep]), -100),
         cpu_xent.cross_entropy(logits[keep], targets[keep], -100), dtype)


@DTYPES
@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_layer_norm_bad_and_constant_rows(dtype, eps, rng):
    """Rows: a NaN, an inf, a constant, a clean one."""
    x, g = (rng.normal(2, 3, (4, 9)).astype(dtype) for _ in range(2))
    w, b = (rng.standard_normal(9).astype(dtype) for _ in range(2))
    x[0, 3], x[1, 8], x[2] = np.nan, np.inf, -31.06
    y = cuda_ln.layer_norm(*on_device(x, w, b), eps=eps)
    same(y, cpu_ln.layer_norm(x, w, b, eps), dtype)
    if eps:
        np.testing.assert_array_equal(host(y)[2], b)
    same(cuda_ln.layer_norm_backward(*on_device(g, x, w), eps=eps), cpu_ln.layer_norm_backward(g, x, w, eps), dtype)
    same(cuda_ln.layer_norm_params_backward(*on_device(g, x), eps=eps), cpu_ln.layer_norm_params_backward(g, x, eps),
         dtype)


@DTYPES
def test_layer_norm_of_an_empty_last_axis_is_empty(dtype):
    x = np.zeros((2, 0), dtype)
    assert host(cuda_ln.layer_norm(on_device(x))).shape == (2, 0)
    assert host(cuda_ln.layer_norm_backward(*on_device(x, x))).shape == (2, 0)
    assert host(cuda_ln.layer_norm_params_backward(*on_device(x, x))).shape == (2, 0)


@DTYPES
@pytest.mark.parametrize("exact", [True, False], ids=["erf", "tanh"])
def test_gelu_saturates_and_keeps_nan(dtype, exact):
    x = np.array([[-np.inf, -1e30, -40, -10.5, np.nan, 0.5, 10.5, 40, 1e30, np.inf]], dtype)
    g = np.full_like(x, 2)
    y, dx = cuda_gelu.gelu(on_device(x), None, exact), cuda_gelu.gelu_backward(*on_device(g, x), None, exact)
    same(y, cpu_gelu.gelu(x, None, exact), dtype)
    same(dx, cpu_gelu.gelu_backward(g, x, None, exact), dtype)
    np.testing.assert_array_equal(host(y)[0], np.where(x[0] > 1, x[0], host(y)[0]))
    np.testing.assert_array_equal(host(y)[0, :4], 0)
    np.testing.assert_array_equal(host(dx)[0], [0, 0, 0, 0, np.nan, host(dx)[0, 5], 2, 2, 2, 2])


@DTYPES
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_attention_overflowing_scores_seen_and_masked(dtype, value, rng):
    """Finite operands whose scores overflow: queries 0 and 1 meet key 4 with a score of +inf (or inf - inf =
    NaN); query 0 sees it and is NaN, query 1 does not and is untouched. Their other scores, and all those of
    the other queries, are moderate: the two lie in orthogonal feature planes."""
    q, k, v, g = (rng.standard_normal((1, 5, 3)).astype(dtype) / 2 for _ in range(4))
    big = 2 * np.finfo(dtype).max ** 0.5
    q[0, :2], q[0, 2:, :2], k[0, :4, :2] = [big, big, 0], 0, 0
    k[0, 4] = [big, big if value == "inf" else -big, 0]
    mask = np.ones((5, 5), bool)
    mask[1, 4] = False
    o = cuda_attention.attention(*on_device(q, k, v, mask))
    want = cpu_attention.attention(q, k, v, mask)
    same(o, want, dtype)
    assert np.isnan(host(o)[0, 0]).all() and np.isfinite(host(o)[0, 1:]).all()
    same(cuda_attention.attention_backward(*on_device(g, want, q, k, v, mask)),
         cpu_attention.attention_backward(g, want, q, k, v, mask), dtype)
