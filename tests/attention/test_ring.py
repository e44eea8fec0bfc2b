"""Ring attention (attngraph.attention.ring, ops/cpu/ring.py): blocks merged by their log-sum-exp equal the whole
attention; the ring, run by threads in one process through a communicator of queues, equals one process's
attention forward and backward (2 and 3 ranks, both splits, causal or not, lengths the ranks do not divide); the
primitive differentiates as ``scaled_dot_product_attention``; a GPT with ``context=`` matches the plain one; and
on real MPI ranks (``mpiexec -n 2`` and ``-n 3``, tests/attention/ranks/ring.py) the same, the GPT included."""
import collections
import contextlib
import math
import queue
import re
import threading
from pathlib import Path

import numpy as np
import pytest

import attngraph as ag
from attngraph.attention import MultiHeadAttention, Ring, ring_attention
from attngraph.core import functional as F
from attngraph.models.gpt import GPT
from ops.cpu import attention as kernels
from ops.cpu import ring
from tests.mpi import launch, requires_mpi

TOLERANCE = dict(rtol=1e-5, atol=2e-6)


def rows(layout, start, stop):
    """The index of positions start … stop − 1 of a (..., T, [H,] f) array of the layout."""
    return (Ellipsis, slice(start, stop)) + (slice(None),) * (1 if layout == "bhtd" else 2)


def arrays(layout, length, rng, dtype=np.float32):
    shape = (2, 3, length, 8) if layout == "bhtd" else (2, length, 3, 8)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("split", ring.SPLITS)
@pytest.mark.parametrize("length, size", [(12, 2), (13, 3), (5, 3), (1, 2)])
def test_pieces_cover_every_position_once(split, length, size):
    pieces = ring.pieces(length, size, split)
    held = [sum(b - a for a, b in ranges) for ranges in pieces]
    assert sorted(p for ranges in pieces for a, b in ranges for p in range(a, b)) == list(range(length))
    assert max(held) - min(held) <= (1 if split == "contiguous" else 2)
    if split == "zigzag":
        parts = sorted(r for ranges in pieces for r in ranges)
        assert all(pieces[r] == [parts[r], parts[2 * size - 1 - r]] for r in range(size))
    with pytest.raises(ValueError, match="split"):
        ring.pieces(length, size, "striped")


@pytest.mark.parametrize("layout", kernels.LAYOUTS)
def test_blocks_merged_by_their_log_sum_exp_equal_the_whole(layout, rng):
    """Keys in three blocks under a mask (a causal one, and a query that sees nothing): o and L merged from the
    blocks equal the whole attention's, L is log Σ exp(scores) (−inf for the query that sees nothing), and the
    blocks' backward given the whole L and D sums to the whole backward."""
    q, k, v, g = arrays(layout, 70, rng)
    mask = np.tril(np.ones((70, 70), bool))
    mask[5] = False
    o, lse = kernels.attention_lse(q, k, v, mask, layout=layout)
    grads = kernels.attention_backward(g, o, q, k, v, mask, layout=layout)
    qh, kh = (x if layout == "bhtd" else x.swapaxes(1, 2) for x in (q.astype(np.float64), k))
    scores = np.where(mask, qh @ kh.swapaxes(-1, -2) / math.sqrt(8), -np.inf)
    with np.errstate(divide="ignore"):                          # log 0 = −inf for the query that sees nothing
        expected = np.log(np.exp(scores).sum(-1))
    np.testing.assert_allclose(lse, expected if layout == "bhtd" else expected.swapaxes(1, 2), rtol=1e-5)
    assert np.isneginf(lse[rows(layout, 5, 6)[:-1]]).all() and not o[rows(layout, 5, 6)].any()

    merged_o, merged_lse = np.zeros_like(o), np.full_like(lse, -np.inf)
    delta, dq = np.einsum("...f,...f->...", g, o), 0
    for start, stop in ((0, 30), (30, 64), (64, 70)):
        block = [x[rows(layout, start, stop)] for x in (k, v)]
        merged_o, merged_lse = ring.merge(merged_o, merged_lse, *kernels.attention_lse(
            q, *block, mask[:, start:stop], layout=layout))
        parts = ring.unstack(kernels.attention_block_backward(g, q, *block, lse, delta, mask[:, start:stop],
                                                              layout=layout), q, *block, layout)
        dq = dq + parts[0]
        for part, whole in zip(parts[1:], ring.unstack(grads, q, k, v, layout)[1:]):
            np.testing.assert_allclose(part, whole[rows(layout, start, stop)], **TOLERANCE)
    np.testing.assert_allclose(merged_o, o, **TOLERANCE)
    np.testing.assert_array_equal(np.isneginf(merged_lse), np.isneginf(lse))
    np.testing.assert_allclose(merged_lse, lse, **TOLERANCE)
    np.testing.assert_allclose(dq, grads[0], **TOLERANCE)


def test_block_backward_checks_the_rows(rng):
    q, k, v, g = arrays("bhtd", 4, rng)
    with pytest.raises(ValueError, match="lse and delta"):
        kernels.attention_block_backward(g, q, k, v, np.zeros(4), np.zeros(4))


def test_the_gradient_of_the_log_sum_exp(rng):
    """dL_i/dq_i = scale Σ_j P_ij k_j, dL_i/dk_j = scale P_ij q_i, dL/dv = 0: the L column's gradient counts."""
    q, k, v, _ = (x.astype(np.float64) for x in arrays("bhtd", 6, rng))
    o, lse = ring.ring_attention(q, k, v, None, causal=True)
    dq, dk, dv = ring.ring_attention_backward(np.zeros_like(o), o, lse, q, k, v, None, causal=True,
                                              g_lse=np.ones_like(lse))
    scale = 1 / math.sqrt(8)
    p = np.exp(np.where(np.tril(np.ones((6, 6), bool)), q @ k.swapaxes(-1, -2) * scale, -np.inf) - lse[..., None])
    np.testing.assert_allclose(dq, scale * p @ k, rtol=1e-10)
    np.testing.assert_allclose(dk, scale * p.swapaxes(-1, -2) @ q, rtol=1e-10)
    assert not dv.any()


class ThreadWorld:
    """A communicator of ``size`` ranks that are threads of this process (mpi4py's calls the ring makes). One rank
    runs at a time, the others waiting for a message or the barrier (numba's CUDA simulator runs one kernel at a
    time)."""

    def __init__(self, size):
        self.size, self.boxes = size, collections.defaultdict(queue.Queue)
        self.barrier, self.gathered = threading.Barrier(size), [None] * size
        self.running = threading.Lock()

    @contextlib.contextmanager
    def waiting(self):
        """Let another rank run while this one waits."""
        self.running.release()
        try:
            yield
        finally:
            self.running.acquire()

    def run(self, task):
        """task(comm) on every rank at once; their results in rank order (the first error raised)."""
        results, errors = [None] * self.size, []

        def rank(r):
            try:
                with self.running:
                    results[r] = task(ThreadComm(self, r))
            except Exception as error:
                errors.append(error)
                self.barrier.abort()
        threads = [threading.Thread(target=rank, args=(r,)) for r in range(self.size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        if errors:
            raise errors[0]
        return results


class ThreadComm:
    def __init__(self, world, rank):
        self.world, self.rank = world, rank

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.world.size

    def allgather(self, value):
        with self.world.waiting():
            self.world.barrier.wait()
            self.world.gathered[self.rank] = value
            self.world.barrier.wait()
            gathered = list(self.world.gathered)
            self.world.barrier.wait()
        return gathered

    def Isend(self, buffer, dest, tag):
        self.world.boxes[self.rank, dest, tag].put(np.array(buffer))
        return Done()

    def Irecv(self, buffer, source, tag):
        return Arrival(self.world, self.world.boxes[source, self.rank, tag], buffer)


class Done:
    def Wait(self):
        pass


class Arrival:
    def __init__(self, world, box, buffer):
        self.world, self.box, self.buffer = world, box, buffer

    def Wait(self):
        with self.world.waiting():
            message = self.box.get(timeout=30)
        assert message.shape == self.buffer.shape, (message.shape, self.buffer.shape)
        self.buffer[...] = message


def shard_of(x, rank, size, split, layout):
    """Rank ``rank``'s positions of x, one of this module's (B, H, T, ...) arrays, or (B, T, H, ...) for "bthd"."""
    axis = 2 if layout == "bhtd" else 1
    return np.take(x, np.concatenate([np.arange(a, b) for a, b in ring.pieces(x.shape[axis], size, split)[rank]]),
                   axis)


@pytest.mark.parametrize("layout", kernels.LAYOUTS)
@pytest.mark.parametrize("split", ring.SPLITS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("size, length", [(2, 37), (3, 50), (3, 4)])
def test_the_ring_equals_one_process(size, length, causal, split, layout, rng):
    q, k, v, g = arrays(layout, length, rng)
    o, lse = kernels.attention_lse(q, k, v, None, causal, layout=layout)
    whole = (o, lse) + ring.unstack(kernels.attention_backward(g, o, q, k, v, None, causal, layout=layout),
                                    q, k, v, layout)

    def shard(x, r):
        return shard_of(x, r, size, split, layout)

    def task(comm):
        here = [shard(x, comm.Get_rank()) for x in (q, k, v, g)]
        o_ring, lse_ring = ring.ring_attention(*here[:3], comm, causal, None, layout, split)
        return (o_ring, lse_ring) + ring.ring_attention_backward(here[3], o_ring, lse_ring, *here[:3], comm, causal,
                                                                 None, layout, split)
    for r, got in enumerate(ThreadWorld(size).run(task)):
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, shard(b, r), **TOLERANCE)


@pytest.mark.parametrize("layout", kernels.LAYOUTS)
def test_the_primitives_kernels_on_each_device_equal_one_process(device, layout, rng):
    """``ring_attention`` and ``ring_attention_grad`` as the executor calls them (device arrays), on 2 thread
    ranks, causal, zigzag: on CUDA the ring runs the GPU's block kernels through host memory."""
    q, k, v, g = (x[:1, :2, :, :4] for x in arrays(layout, 5, rng))
    o, lse = kernels.attention_lse(q, k, v, None, True, layout=layout)
    whole = (o, lse) + ring.unstack(kernels.attention_backward(g, o, q, k, v, None, True, layout=layout),
                                    q, k, v, layout)

    def task(comm):
        here = [shard_of(x, comm.Get_rank(), 2, "zigzag", layout) for x in (q, k, v, g)]
        attributes = dict(comm=comm, split="zigzag", causal=True, scale=0.5, layout=layout)
        y = device.kernels["ring_attention"](*map(device.put, here[:3]), **attributes)
        g_y = device.put(np.concatenate([here[3], np.zeros_like(here[3][..., :1])], axis=-1))
        grads = device.get(device.kernels["ring_attention_grad"](g_y, y, *map(device.put, here[:3]), **attributes))
        return (device.get(y)[..., :-1], device.get(y)[..., -1]) + ring.unstack(grads, *here[:3], layout)
    for r, got in enumerate(ThreadWorld(2).run(task)):
        for a, b in zip(got, whole):
            np.testing.assert_allclose(a, shard_of(b, r, 2, "zigzag", layout), **TOLERANCE)


def test_a_shard_of_the_wrong_length_is_refused(rng):
    q, k, v, _ = arrays("bhtd", 5, rng)

    def task(comm):
        length = 4 if comm.Get_rank() == 0 else 3          # 7 positions: the zigzag split gives 3 and 4
        return ring.ring_attention(q[..., :length, :], k[..., :length, :], v[..., :length, :], comm, True,
                                   split="zigzag")
    with pytest.raises(ValueError, match="rank 0 holds 4 of the 7 positions.*gives it 3"):
        ThreadWorld(2).run(task)
    with pytest.raises(ValueError, match="self-attention"):
        ring.ring_attention(q, k[..., :3, :], v[..., :3, :], None)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_primitive_differentiates_as_attention(causal, rng):
    q, k, v, w = (x.astype(np.float64) for x in arrays("bhtd", 11, rng))
    one = Ring(None)

    def loss(attend):
        return lambda q, k, v: ag.sum(attend(q, k, v) * w)
    value, grads = ag.value_and_grad(loss(lambda q, k, v: ring_attention(q, k, v, one, causal)), (0, 1, 2))(q, k, v)
    expected, grads_expected = ag.value_and_grad(
        loss(lambda q, k, v: ag.scaled_dot_product_attention(q, k, v, causal=causal)), (0, 1, 2))(q, k, v)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    for a, b in zip(grads, grads_expected):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    graph = ag.trace(lambda q: ag.sum(ring_attention(q, q, q, one, causal)), q=ag.Input((2, "T", 4))).grad(["q"])
    assert [n.op for n in graph.nodes if n.op.startswith("ring")] == ["ring_attention", "ring_attention_grad"]


def test_positions_and_shards_follow_the_split():
    tokens = np.arange(20).reshape(2, 10)
    assert Ring(None).positions(10).tolist() == list(range(10))
    np.testing.assert_array_equal(Ring(None).shard(tokens, 1), tokens)
    with pytest.raises(ValueError, match="split"):
        Ring(None, "random")


def gpt_step(context, tokens, targets, **positions):
    """The loss and the parameters' gradients of a tiny GPT, with the tokens' ``positions=`` when given."""
    model = GPT(12, d_model=16, heads=2, layers=2, d_ff=32, max_length=16, dropout=0.0,
                rng=np.random.default_rng(3), context=context)
    graph = ag.trace(lambda tokens, targets, **positions: F.cross_entropy(model(tokens, **positions), targets),
                     tokens=tokens, targets=targets, **positions).grad()
    return graph.compile()(tokens=tokens, targets=targets, **positions)


def test_a_gpt_with_a_ring_of_one_matches_the_plain_gpt(rng):
    tokens, targets = rng.integers(0, 12, (2, 9)), rng.integers(0, 12, (2, 9))
    for a, b in zip(gpt_step(Ring(None), tokens, targets, positions=np.arange(9)), gpt_step(None, tokens, targets)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_split_attention_takes_no_mask():
    attention = MultiHeadAttention(8, 2)
    attention.context = Ring(None)
    with pytest.raises(ValueError, match="no mask"):
        ag.trace(lambda x, m: attention(x, x, x, mask=m), x=ag.Input((1, 3, 8)), m=ag.Input((1, 3), "bool"))


RANKS = Path(__file__).parent / "ranks" / "ring.py"


@requires_mpi
@pytest.mark.parametrize("ranks, cases", [(2, ["ring", "gpt"]), (3, ["ring"])])
def test_ring_attention_on_mpi_ranks(ranks, cases):
    result = launch(RANKS, ranks=ranks, args=cases, timeout=240)
    assert result.returncode == 0, result.output
    for case in cases:
        assert sorted(re.findall(rf"rank (\d+): {case}", result.output)) == [str(r) for r in range(ranks)], result.output


@requires_mpi
def test_a_rank_that_stops_sending_makes_the_others_raise():
    result = launch(RANKS, ranks=2, args=["stalls"], timeout=60, runner=False)
    assert result.returncode != 0
    assert ("CollectiveTimeout: rank 0 of 2: ring attention's forward, ring step 1 of 2 (the block from rank 1) "
            "waited more than 1 s") in result.output, result.output
