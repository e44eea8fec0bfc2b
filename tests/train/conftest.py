"""Fixtures of the training tests: a tiny regression problem."""
from types import SimpleNamespace

import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import MLP, init


WEIGHTS = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def regression_batches(rng, size=16):
    """x ~ N(0, 1)⁴ and y = x · w: a target an MLP learns in a few dozen steps."""
    x = rng.standard_normal((size, 4)).astype(np.float32)
    return dict(x=x, y=(x @ WEIGHTS)[:, None])


def squared_error(model, x, y):
    error = model(x) - y
    return {"loss": ag.mean(error * error), "mean_abs_error": ag.mean(ag.maximum(error, -error))}


@pytest.fixture
def regression():
    """The problem's batches(rng), its loss_fn, and model(seed=0, dropout=0.0): a fresh 4-16-1 MLP."""
    def model(seed=0, dropout=0.0):
        init.manual_seed(seed)
        return MLP([4, 16, 1], dropout=dropout)
    return SimpleNamespace(batches=regression_batches, loss=squared_error, model=model)
