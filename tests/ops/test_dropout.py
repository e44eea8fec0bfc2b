"""Counter-based dropout: reproducible masks, the kept fraction, scaling, argument checks."""
import numpy as np
import pytest

from ops.cpu.dropout import dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_kept_fraction_and_scale(p):
    y = dropout(np.ones((200, 500), np.float32), p, 7, 3)
    assert y.dtype == np.float32
    assert abs((y != 0).mean() - (1 - p)) < 0.005         # 5+ standard deviations
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-7)


def test_same_seed_and_key_give_the_same_mask_across_dtypes_and_calls(rng):
    x = rng.standard_normal((30, 40)) + 10
    a = dropout(x, 0.5, 1, 2)
    np.testing.assert_array_equal(a, dropout(x, 0.5, 1, 2))
    np.testing.assert_array_equal(a != 0, dropout(x.astype(np.float32), 0.5, 1, 2) != 0)
    assert 0.4 < ((a != 0) != (dropout(x, 0.5, 1, 3) != 0)).mean() < 0.6     # another key: independent
    assert 0.4 < ((a != 0) != (dropout(x, 0.5, 2, 2) != 0)).mean() < 0.6     # another seed too


def test_backward_is_dropout_of_the_gradient(rng):
    x, g = rng.standard_normal((2, 50, 20))
    y, dx = dropout(x, 0.3, 5, 9), dropout(g, 0.3, 5, 9)
    np.testing.assert_array_equal(y == 0, dx == 0)
    np.testing.assert_allclose(dx[dx != 0], g[dx != 0] / 0.7)


def test_p_zero_copies_and_bad_p_raises():
    x = np.arange(6.0).reshape(2, 3).T
    y = dropout(x, 0.0, 1, 1)
    assert not np.shares_memory(x, y) and y.flags.c_contiguous
    np.testing.assert_array_equal(y, x)
    for p in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="probability"):
            dropout(x, p, 1, 1)
    assert dropout(np.ones((0, 3)), 0.5, 1, 1).shape == (0, 3)
    assert dropout(np.ones((2, 3)), 0.5, np.int64(-1), 2 ** 70).shape == (2, 3)     # any integers
