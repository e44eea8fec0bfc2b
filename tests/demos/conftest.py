"""Fixtures of the demo smoke tests: the process state a demo changes."""
import os

import numba
import pytest


@pytest.fixture(autouse=True)
def restore_threads():
    """A demo sets the thread counts (``attngraph.demos.common.use_threads``): put them back."""
    threads = numba.get_num_threads()
    saved = {key: os.environ.get(key) for key in ("OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")}
    yield
    numba.set_num_threads(threads)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
