"""Ring attention on every rank (tests/attention/test_ring.py): ``ring.py CASE...``.

ring: this rank's shard of ring attention (kernels: both layouts, both splits, causal or not, a length the ranks
  do not divide; the primitive's value and gradients through a graph, float64) equals one process's attention of
  the whole sequence, which every rank computes from the same seed. Prints "rank R: ring".
gpt: a tiny GPT with its sequence split over the ranks (context=Ring(world)), each rank's loss weighted by its
  share of the tokens and the parameters' gradients summed over the ranks, equals one process's loss and
  gradients. Prints "rank R: gpt".
stalls: rank 1 stops sending (its Isend sleeps) in the ring's forward; rank 0, under a 1 s deadline, raises
  CollectiveTimeout naming its rank and the ring step, which ends every rank.
"""
import sys
import time

import numpy as np

import attngraph as ag
from attngraph.attention import Ring, ring_attention
from attngraph.core import functional as F
from attngraph.models.gpt import GPT
from attngraph.train import distributed
from ops.cpu import attention as kernels
from ops.cpu.ring import ring_attention as ring_kernel, ring_attention_backward

world = distributed.init(timeout=60)
TOLERANCE = dict(rtol=1e-4, atol=2e-5)


def whole(shape, seed):
    """The same arrays on every rank."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]


def kernels_match():
    for layout, axis in (("bhtd", 2), ("bthd", 1)):
        for split in ("contiguous", "zigzag"):
            for causal in (False, True):
                length = 4 * world.size + 3
                shape = (2, 3, length, 8) if layout == "bhtd" else (2, length, 3, 8)
                q, k, v, g = whole(shape, seed=length)
                o, lse = kernels.attention_lse(q, k, v, None, causal, layout=layout)
                grads = kernels.attention_backward(g, o, q, k, v, None, causal, layout=layout)
                ring = Ring(world, split)
                here = [ring.shard(x, axis) for x in (q, k, v, g)]
                o_ring, lse_ring = ring_kernel(*here[:3], ring.comm, causal, None, layout, split)
                got = (o_ring, lse_ring) + ring_attention_backward(here[3], o_ring, lse_ring, *here[:3], ring.comm,
                                                                   causal, None, layout, split)
                for a, b in zip(got, (o, lse, *grads)):
                    np.testing.assert_allclose(a, ring.shard(b, axis), **TOLERANCE)


def graph_matches():
    length = 3 * world.size + 1
    q, k, v, w = (x.astype(np.float64) for x in whole((2, 2, length, 4), seed=1))
    ring = Ring(world)
    for causal in (False, True):
        split = ag.value_and_grad(lambda q, k, v: ag.sum(ring_attention(q, k, v, ring, causal) * ring.shard(w, 2)),
                                  argnums=(0, 1, 2))
        one = ag.value_and_grad(lambda q, k, v: ag.sum(ag.scaled_dot_product_attention(q, k, v, causal=causal) * w),
                                argnums=(0, 1, 2))
        value, grads = split(*(ring.shard(x, 2) for x in (q, k, v)))
        value_one, grads_one = one(q, k, v)
        np.testing.assert_allclose(world.allreduce_sum(np.array([value]), "loss"), value_one, rtol=1e-12)
        for a, b in zip(grads, grads_one):
            np.testing.assert_allclose(a, ring.shard(b, 2), rtol=1e-10, atol=1e-12)


def gpt_step(context, tokens, targets, positions, weight):
    model = GPT(12, d_model=16, heads=2, layers=2, d_ff=32, max_length=16, dropout=0.0,
                rng=np.random.default_rng(3), context=context)
    graph = ag.trace(lambda tokens, targets, positions: F.cross_entropy(model(tokens, positions=positions), targets)
                     * weight, tokens=tokens, targets=targets, positions=positions).grad()
    return graph.compile()(tokens=tokens, targets=targets, positions=positions)


def gpt_matches():
    length = 13
    rng = np.random.default_rng(5)
    tokens, targets = rng.integers(0, 12, (2, length)), rng.integers(0, 12, (2, length))
    ring = Ring(world)
    share = len(ring.positions(length)) / length
    split = gpt_step(ring, ring.shard(tokens, 1), ring.shard(targets, 1), ring.positions(length), share)
    one = gpt_step(None, tokens, targets, np.arange(length), 1.0)
    for a, b in zip(split, one):                 # the loss, then each parameter's gradient
        np.testing.assert_allclose(world.allreduce_sum(np.ascontiguousarray(a), "sum"), b, rtol=2e-4, atol=2e-6)


class Silent:
    """The world's communicator on a rank that stops sending."""

    def __init__(self, comm):
        self.comm = comm

    def __getattr__(self, name):
        return getattr(self.comm, name)

    def Isend(self, *args):
        time.sleep(60)


def stalls():
    ring = Ring(distributed.World(world.comm, timeout=1))
    q, k, v, _ = (ring.shard(x, 2) for x in whole((1, 2, 8, 4), seed=2))
    ring_kernel(q, k, v, Silent(ring.comm) if world.rank == 1 else ring.comm, True, None, "bhtd", ring.split)


CASES = {"ring": lambda: (kernels_match(), graph_matches()), "gpt": gpt_matches, "stalls": stalls}
with world.rank0_first("compiling the kernels"):
    kernels.attention_lse(*whole((1, 3, 2), seed=0)[:3])
for case in sys.argv[1:]:
    CASES[case]()
    print(f"rank {world.rank}: {case}", flush=True)
