"""Fixtures of the demo smoke tests: the shared data folder, and the process state a demo changes."""
import os
from pathlib import Path

import numba
import pytest


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
