"""Independent time loops run together (core/together.py, ops/cpu/threads.py's ``together``)."""
import threading
import time

import numba
import numpy as np
import pytest

import attngraph as ag
from attngraph.core import executor
from attngraph.nn import GRU
from ops.cpu import matmul, recurrence, threads
from tests.conftest import busy_pool, numba_threads

B, T, IN, H = 5, 6, 4, 8


def loss_of(bidirectional: bool, layers: int = 1):
    """Σ tanh(h) h over the states of ``layers`` stacked GRUs, each reading the states of the one below."""
    rng = np.random.default_rng(0)
    width = 2 * H if bidirectional else H
    encoders = [GRU(IN if k == 0 else width, H, bidirectional=bidirectional, rng=rng) for k in range(layers)]

    def loss(x, mask):
        states = x
        for encoder in encoders:
            states, _ = encoder(states, mask)
        return ag.sum(ag.tanh(states) * states)
    return loss


def feeds():
    rng = np.random.default_rng(1)
    return dict(x=rng.standard_normal((B, T, IN)).astype(np.float32),
                mask=np.arange(T)[None, :] < rng.integers(1, T + 1, (B, 1)))


def gradient(bidirectional: bool, layers: int = 1):
    return ag.trace(loss_of(bidirectional, layers), **feeds()).grad()


def test_the_directions_of_a_bidirectional_encoder_pair_up_in_a_valid_schedule():
    """Forward, both directions' loops are a pair; in the gradient, both directions' reverse loops are another. Each
    pair's nodes are adjacent, neither depends on the other, and every node still comes after its inputs."""
    step = gradient(True).compile()
    order = step._nodes
    place = {node: k for k, node in enumerate(order)}
    assert len(step._firsts) == 2 and all(first.op == "scan" for first in step._firsts)
    for first in step._firsts:
        second = order[place[first] + 1]
        assert second.op == "scan" and first not in ag.core.graph.topological_order([second])
    assert all(place[x] < place[node] for node in order for x in node.inputs if x in place)


@pytest.mark.parametrize("bidirectional, layers", [(False, 1), (False, 2)])
def test_a_loop_that_reads_another_is_not_paired_with_it(bidirectional, layers):
    """A one-direction encoder: its forward loop feeds its gradient's loop; two layers: each loop feeds the next."""
    assert gradient(bidirectional, layers).compile()._firsts == set()


def test_paired_loops_give_the_results_of_loops_one_after_the_other(monkeypatch):
    """Both directions of each of two layers run as pairs, forward and backward, each side on a thread of its own
    with Numba's threads at one there: the loss and gradients equal, bit for bit, those of the same schedule run one
    loop after the other."""
    sides, on_one_thread = [], threads._on_one_thread

    def recorded(kernel, args):
        def kernel_recorded(*arrays):
            sides.append((threading.get_ident(), numba.get_num_threads()))
            return kernel(*arrays)
        return on_one_thread(kernel_recorded, args)
    monkeypatch.setattr(threads, "_on_one_thread", recorded)
    graph = gradient(True, layers=2)
    step = graph.compile()
    assert len(step._firsts) == 4
    together = step(**feeds())
    if numba.get_num_threads() > 1:
        assert len(sides) == 8 and len({thread for thread, _ in sides}) == 2 and {n for _, n in sides} == {1}
    monkeypatch.setattr(executor, "paired", lambda order, ops: (order, set()))
    alone = graph.compile()(**feeds())
    for a, b in zip(together, alone):
        np.testing.assert_array_equal(a, b)


def test_together_returns_both_results_and_raises_the_first_error():
    def kernel(value, fail=False):
        if fail:
            raise ValueError(f"side {value}")
        return value, numba.get_num_threads()

    threads_before = numba.get_num_threads()
    expected = 1 if threads_before > 1 else threads_before
    assert threads.together(kernel, kernel, 1, "a", "b") == (("a", expected), ("b", expected))
    assert numba.get_num_threads() == threads_before
    with pytest.raises(ValueError, match="side a"):
        threads.together(kernel, kernel, 2, "a", True, "b", True)
    with pytest.raises(ValueError, match="side b"):
        threads.together(kernel, kernel, 1, "a", "b", True)
    assert numba.get_num_threads() == threads_before


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread")
def test_together_runs_the_second_here_when_no_pool_thread_has_started_it():
    """With the pool thread busy (as a halted core is slow to wake), the calling thread runs the second side after the
    first, on one numba thread and beside another as the pool thread would, and does not wait for the pool."""
    def kernel(value):
        return value, threading.current_thread(), numba.get_num_threads(), threads.beside_another()
    with busy_pool() as still_busy, numba_threads(2):
        results = threads.together(kernel, kernel, 1, "a", "b")
        returned_while_busy = still_busy()
    assert returned_while_busy
    assert results == tuple((side, threading.current_thread(), 1, True) for side in "ab")


def test_one_hold_on_scipys_blas_however_many_threads_ask_at_once(monkeypatch):
    """Loops compiled at once on two threads each ask for the hold on SciPy's OpenBLAS: they get the same one (two
    holds on one library restore its thread count under each other's products)."""
    class Slow(matmul.OneThread):
        def __init__(self, set_threads):
            time.sleep(0.05)
            super().__init__(set_threads)
    monkeypatch.setattr(matmul, "OneThread", Slow)
    monkeypatch.setattr(matmul, "_scipy_hold", matmul.functools.cache(matmul._scipy_hold.__wrapped__))
    holds, start = [], threading.Barrier(4)

    def ask():
        start.wait()
        holds.append(matmul._scipy_on_one_thread())
    workers = [threading.Thread(target=ask) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(holds) == 4 and len(set(map(id, holds))) == 1


def test_a_loop_beside_another_runs_as_one_block_on_any_number_of_threads(monkeypatch):
    """Blocks of rows would share out one core between them: a paired loop runs its 40 rows as one block, alone or
    beside its twin, on one thread as on two, so its results are the same bit for bit."""
    counts = []

    def recorded(kernel, count, *args, work):
        counts.append(count)
        threads.in_threads(kernel, count, *args, work=work)
    monkeypatch.setattr(recurrence, "in_threads", recorded)
    monkeypatch.setattr(recurrence, "SPLIT_MIN_SIZE", 0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, T, IN)).astype(np.float32)
    mask = np.arange(T)[None, :] < rng.integers(1, T + 1, (40, 1))
    graph = ag.trace(loss_of(True), x=x, mask=mask).grad()
    runs = []
    for count in (1, 2):
        with numba_threads(count):
            runs.append(graph.compile()(x=x, mask=mask))
    assert counts == [1] * 8
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two)
