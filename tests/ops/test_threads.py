"""ops/cpu/threads.py: the idle-thread policies set on import (defaults only, never over the user's choice), the
warning when an OpenMP runtime loaded before has read none, which twin a ``parallel_kernel`` runs, and
``in_threads``' parts."""
import ctypes.util
import threading
import time

import numba
import numpy as np
import pytest
from numba import prange

from ops.cpu.threads import IN_THREADS_MIN_WORK, PARALLEL_MIN_SIZE, in_threads, parallel_kernel
from tests.conftest import busy_pool, numba_threads
from tests.fresh import python

SHOW = "import os, ops.cpu.threads; print(os.environ['OMP_WAIT_POLICY'], os.environ['OPENBLAS_THREAD_TIMEOUT'])"


@pytest.mark.parametrize("given, expected", [({}, "passive 4"),
                                             ({"OMP_WAIT_POLICY": "active", "OPENBLAS_THREAD_TIMEOUT": "20"},
                                              "active 20")])
def test_idle_threads_sleep_unless_the_environment_says_otherwise(given, expected):
    out = python(SHOW, unset=("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT"), **given)
    assert out.stdout.split() == expected.split()


GOMP = ctypes.util.find_library("gomp")
LOAD_GOMP = f"import ctypes; ctypes.CDLL({GOMP!r})"


@pytest.mark.skipif(GOMP is None, reason="no GNU OpenMP runtime here")
@pytest.mark.parametrize("program, given, warns", [
    (f"{LOAD_GOMP}; import ops.cpu.threads", {}, True),                     # loaded first, as `import torch` does
    (f"{LOAD_GOMP}; import ops.cpu.threads", {"OMP_WAIT_POLICY": "passive"}, False),    # it read the user's policy
    (f"{LOAD_GOMP}; import ops.cpu.threads", {"OMP_WAIT_POLICY": "active"}, False),     # the user's choice
    (f"import ops.cpu.threads; {LOAD_GOMP}", {}, False),                    # loaded after: it reads ops' policy
    (f"{LOAD_GOMP}; import ops.cpu.threads", {"NUMBA_THREADING_LAYER": "workqueue"}, False),    # numba's own pool
])
def test_an_openmp_runtime_loaded_before_attngraph_is_named_in_a_warning(program, given, warns):
    out = python(program, unset=("OMP_WAIT_POLICY",), **{"NUMBA_THREADING_LAYER": "omp", **given})
    assert ("RuntimeWarning" in out.stderr and "Set OMP_WAIT_POLICY=passive" in out.stderr) == warns, out.stderr


needs_two_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has one thread")


@needs_two_threads
def _highest_thread(x, work):
    """The highest numba thread id among the iterations of a prange loop: above 0 only in the parallel twin."""
    ids = np.zeros(8, np.int64)
    for i in prange(8):
        ids[i] = numba.get_thread_id()
    return ids.max()


by_size, by_work = parallel_kernel(_highest_thread), parallel_kernel(_highest_thread, work=lambda x, work: work)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread")
def test_the_parallel_twin_runs_from_the_first_argument_s_size_or_the_work_given():
    small, large = np.zeros(1), np.zeros(PARALLEL_MIN_SIZE)
    with numba_threads(2):
        assert by_size(small, 0) == 0 and by_size(large, 0) > 0
        assert by_work(small, PARALLEL_MIN_SIZE - 1) == 0 and by_work(small, PARALLEL_MIN_SIZE) > 0
    with numba_threads(1):
        assert by_work(small, PARALLEL_MIN_SIZE) == 0


def test_in_threads_covers_the_range_once_and_a_slow_thread_takes_fewer_parts():
    """The calling thread sleeps 20 ms per part and the other 1 ms: parts go to the other as they come free
    (a static half each would take 32 × 20 ms)."""
    parts = []

    def kernel(start, stop):
        main = threading.current_thread() is threading.main_thread()
        time.sleep(0.02 if main else 0.001)
        parts.append((start, stop, main))

    in_threads(kernel, 64, work=IN_THREADS_MIN_WORK)
    assert sorted(i for start, stop, _ in parts for i in range(start, stop)) == list(range(64))
    assert sum(stop - start for start, stop, main in parts if main) <= 16


@needs_two_threads
def test_in_threads_raises_a_part_s_error_after_every_part_is_done():
    done = []

    def kernel(start, stop):
        if start == 0:
            raise ValueError("part 0")
        time.sleep(0.001)
        done.append(start)

    with pytest.raises(ValueError, match="part 0"):
        in_threads(kernel, 32, work=IN_THREADS_MIN_WORK)
    finished = len(done)
    time.sleep(0.05)
    assert len(done) == finished                      # nothing still running after the call returned


@needs_two_threads
def test_in_threads_parts_hold_a_grain_of_rows_at_least():
    parts = []
    in_threads(lambda start, stop: parts.append((start, stop)), 70, work=IN_THREADS_MIN_WORK, grain=32)
    assert sorted(parts) == [(0, 32), (32, 64), (64, 70)]
    parts.clear()
    in_threads(lambda start, stop: parts.append((start, stop)), 63, work=IN_THREADS_MIN_WORK, grain=32)
    assert parts == [(0, 63)]                         # two parts would hold fewer than 32 rows each


@needs_two_threads
def test_in_threads_runs_work_below_its_threshold_as_one_part_on_the_calling_thread():
    parts = []

    def record(start, stop):
        parts.append((start, stop, threading.current_thread() is threading.main_thread()))
    in_threads(record, 64, work=IN_THREADS_MIN_WORK - 1)
    assert parts == [(0, 64, True)]
    parts.clear()
    in_threads(record, 64, work=IN_THREADS_MIN_WORK)
    assert len(parts) > 1 and sorted(i for start, stop, _ in parts for i in range(start, stop)) == list(range(64))


@needs_two_threads
def test_in_threads_does_not_wait_for_a_pool_thread_that_has_not_started():
    """A pool thread that is not running yet (here: busy with another job) takes no part once the calling thread
    has taken them all, and the call returns without it."""
    parts = []
    with busy_pool() as still_busy:
        in_threads(lambda start, stop: parts.append((start, stop, threading.current_thread())), 64,
                   work=IN_THREADS_MIN_WORK)
        returned_while_busy = still_busy()
    assert returned_while_busy
    assert sorted(i for start, stop, _ in parts for i in range(start, stop)) == list(range(64))
    assert {thread for _, _, thread in parts} == {threading.current_thread()}
