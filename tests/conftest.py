"""Shared fixtures: a seeded generator and a helper to run a traced function on NumPy arrays."""
import numpy as np
import pytest

import attngraph as ag


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def run(fn, *arrays):
    """Trace ``fn`` on inputs shaped like ``arrays`` and run it on them."""
    graph = ag.trace(lambda **xs: fn(*xs.values()), **{f"x{i}": a for i, a in enumerate(arrays)})
    return graph.compile()(**{f"x{i}": a for i, a in enumerate(arrays)})
