"""Fixtures of the training tests: the shared data folder, and a tiny regression problem."""
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import MLP, init


@pytest.fixture
def shared_data():
    """A file of the corpora beside the project (``$ATTNGRAPH_SHARED_DATA``, default ../shared/data);
    the test is skipped when it is absent."""
    folder = Path(os.environ.get("ATTNGRAPH_SHARED_DATA", Path(__file__).parents[3] / "shared" / "data"))

    def path(name: str) -> Path:
        if not (folder / name).exists():
            pytest.skip(f"{name} not found in {folder} (set ATTNGRAPH_SHARED_DATA)")
        return folder / name
    return path


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
