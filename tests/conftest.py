"""Shared fixtures: a seeded generator, the shared data folder, and a helper to run a traced function. Every test
starts from the same default generator (parameters' initialization), whichever tests ran before it."""
import os
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag


@pytest.fixture(autouse=True)
def seeded_initialization():
    ag.nn.init.manual_seed(0)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data():
    """A file of the corpora beside the project (``$ATTNGRAPH_SHARED_DATA``, default ../shared/data);
    the test is skipped when it is absent."""
    folder = Path(os.environ.get("ATTNGRAPH_SHARED_DATA", Path(__file__).parents[2] / "shared" / "data"))

    def path(name: str) -> Path:
        if not (folder / name).exists():
            pytest.skip(f"{name} not found in {folder} (set ATTNGRAPH_SHARED_DATA)")
        return folder / name
    return path


def run(fn, *arrays):
    """Trace ``fn`` on inputs shaped like ``arrays`` and run it on them."""
    graph = ag.trace(lambda **xs: fn(*xs.values()), **{f"x{i}": a for i, a in enumerate(arrays)})
    return graph.compile()(**{f"x{i}": a for i, a in enumerate(arrays)})
