"""The world's collectives on every rank (tests/train/test_distributed.py): ``world.py CASE``.

sums: an all-reduce, a gather, a broadcast and the gradient buckets give every rank the same sums; prints "ok".
raises: rank 1 raises under plain ``python`` while rank 0 waits in a collective: init's hook aborts the world.
stalls: rank 1 sleeps past rank 0's timeout before a collective: rank 0 names itself and the step.
in_turn FILE: each rank appends "start R" and "end R" to FILE inside ``rank0_first`` (numba's cache: rank 0
  compiles, the others load).
"""
import sys
import time

import numpy as np

from attngraph.train import distributed

case = sys.argv[1]
world = distributed.init(timeout=60 if case != "stalls" else 1)
rank, size = world.rank, world.size

if case == "sums":
    assert world.allreduce_sum(np.array([rank + 1.0, 2.0]), "sum").tolist() == [size * (size + 1) / 2, 2.0 * size]
    assert world.allgather({"rank": rank}, "gather") == [{"rank": r} for r in range(size)]
    assert world.broadcast(np.full(3, float(rank)), "broadcast").tolist() == [0.0] * 3
    assert world.any(rank == size - 1, "any") and not world.any(False, "any")
    grads = [np.full((2, 3), rank + 1.0, np.float32), None, np.arange(5.0) * rank, np.ones(4, np.float32)]
    given = [None if g is None else g.copy() for g in grads]
    buckets = distributed.GradientBuckets(world, [None if g is None else (g.shape, g.dtype) for g in grads],
                                          bucket_bytes=24)
    summed = buckets.reduce(grads, "step 1: the gradient all-reduce")
    assert buckets.layout() == [[0], [2], [3]], buckets.layout()
    assert summed[1] is None and np.all(summed[0] == size * (size + 1) / 2)
    assert np.array_equal(summed[2], np.arange(5.0) * size * (size - 1) / 2) and np.all(summed[3] == size)
    assert all(g is None or np.array_equal(g, k) for g, k in zip(grads, given)), "the given gradients were written"
    print(f"rank {rank}: ok", flush=True)
elif case == "raises":
    if rank == 1:
        raise RuntimeError("rank 1 breaks on purpose")
    world.barrier("waiting for rank 1")
elif case == "in_turn":
    with world.rank0_first("compiling"):
        with open(sys.argv[2], "a") as log:
            log.write(f"start {rank}\n")
            log.flush()
            time.sleep(0.5)
            log.write(f"end {rank}\n")
elif case == "stalls":
    if rank == 1:
        time.sleep(30)
    world.allreduce_sum(np.zeros(1), "step 7: the gradient all-reduce")
