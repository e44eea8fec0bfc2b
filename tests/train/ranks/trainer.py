"""The Trainer on every rank (tests/train/test_distributed.py): ``trainer.py CASE FOLDER [ACCUMULATE]``.

same: W ranks with accumulate=a train the regression MLP (dropout, clipping, a sharded evaluation, a checkpoint
  at step 2) and each rank compares with one process (``comm=SELF``) with accumulate=W·a: bit for bit for W=2,
  a=1, else within 1e-6 relative; the ranks' parameters are identical; only rank 0 wrote the metrics file; the
  checkpoint resumed by one process repeats the run. Prints "rank R: same".
cuda: the same on "cuda" (the simulator) against one CPU process, within float32 rounding.
stalls: rank 1 stalls in a callback of step 2; rank 0's next collective times out naming its rank and step 2.
differ: in turn, the ranks differ in fit's steps, the trainer's step, the micro-batches a step, the model,
  attngraph's version: each rank prints the DistributedError it got each time.
"""
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.core.device import host

from attngraph.errors import DistributedError
from attngraph.nn import MLP, init
from attngraph.train import SGD, AdamW, Trainer, distributed, trainer as trainer_module
from tests.train.conftest import regression_batches, squared_error

case, folder = sys.argv[1], Path(sys.argv[2])
accumulate = int(sys.argv[3]) if len(sys.argv) > 3 else 1
world = distributed.init(timeout=60)
rank, size = world.rank, world.size
BATCH = 4 if case == "cuda" else 16          # the CUDA simulator runs every thread in Python
EVAL = np.random.default_rng(7).standard_normal((10, 4)).astype(np.float32)


def make(comm, accumulate, device="cpu", hidden=16, **options):
    init.manual_seed(rank if comm is not distributed.SELF else 0)     # rank 0's values must reach every rank
    model = MLP([4, hidden, 1], dropout=0.1)
    return Trainer(model, squared_error, AdamW(model, lr=0.01), clip=0.5, accumulate=accumulate, seed=5,
                   progress=False, comm=comm, device=device, **options)


def evaluate(trainer):
    """Mean |model(x)| over this rank's shard of EVAL (all of it in a world of one), and the shard's size."""
    trainer.model.eval()
    forward = ag.trace(trainer.model, x=ag.Input(("B", 4), "float32")).compile(trainer.device)
    trainer.model.train()

    def eval_fn(model):
        rows = EVAL[trainer.world.shard(len(EVAL))]
        return {"val_abs": float(np.abs(host(forward(x=rows))).mean()), "examples": len(rows)}
    return eval_fn


def batches(rng):
    return regression_batches(rng, size=BATCH)


def values(trainer):
    return [p.numpy() for p in trainer.model.parameters()]


def compare(got, want, exact, what, rtol=1e-6):
    for g, w in zip(got, want):
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol / 10, err_msg=what)


if case in ("same", "cuda"):
    device, rtol = ("cuda", 1e-5) if case == "cuda" else ("cpu", 1e-6)       # the GPU's sums round otherwise
    exact = size <= 2 and accumulate == 1 and device == "cpu"
    options = dict(metrics_path=folder / "metrics.jsonl", checkpoint_every=2, checkpoint_path=folder / "step2")
    ranks = make(world, accumulate, device, **options)
    assert case != "cuda" or all(p.device == "cuda" for p in ranks.model.parameters())
    ranks.eval_fn, ranks.eval_every = evaluate(ranks), 2
    records = ranks.fit(batches, steps=2)
    ranks.checkpoint_every = None
    records += ranks.fit(batches, steps=4)
    alone = make(distributed.SELF, accumulate * size)
    alone.eval_fn, alone.eval_every = evaluate(alone), 2
    expected = alone.fit(batches, steps=4)
    compare(values(ranks), values(alone), exact, f"rank {rank}: parameters", rtol)
    for kind, keys in (("train", ("loss", "grad_norm", "mean_abs_error")), ("eval", ("val_abs",))):
        compare([[r[k] for k in keys] for r in records if r["kind"] == kind],     # a sharded evaluation sums in
                [[r[k] for k in keys] for r in expected if r["kind"] == kind],    # another order: a tolerance
                exact and kind == "train", f"rank {rank}: {kind} records", rtol)
    gathered = world.allgather(values(ranks), "the parameters")
    for other in gathered[1:]:
        compare(other, gathered[0], True, "the ranks' parameters")
    written = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in written if r["kind"] == "train"] == [1, 2, 3, 4], written       # rank 0's lines only
    resumed = make(distributed.SELF, accumulate * size)
    resumed.eval_fn, resumed.eval_every = evaluate(resumed), 2
    resumed.load(folder / "step2")
    resumed.fit(batches, steps=4)
    compare(values(resumed), values(alone), exact, f"rank {rank}: the resumed run", rtol)
    print(f"rank {rank}: same", flush=True)
elif case == "stalls":
    trainer = make(world, 1)
    trainer.fit(batches, steps=1)                                   # compiled: the next steps are quick
    trainer.world = distributed.World(world.comm, timeout=2)
    if rank == 1:
        trainer.callbacks.append(lambda t, record: time.sleep(60))  # rank 1 stalls after its step 2
    trainer.fit(batches, steps=3)
else:
    for difference in ("steps", "step", "data", "model", "version"):     # one launch; the ranks stay in step
        trainer_module.__version__ = "0.1.0" if difference != "version" or rank == 0 else "9.9.9"
        try:
            trainer = make(world, 2 if difference == "data" and rank == 1 else 1,
                           hidden=16 if difference != "model" or rank == 0 else 8)
            if difference == "step" and rank == 1:
                trainer.optimizer.steps = 1
            trainer.fit(batches, steps=2 if difference != "steps" or rank == 0 else 3)
            print(f"rank {rank}: {difference}: no error", flush=True)
        except DistributedError as e:
            print(f"rank {rank}: {difference}: DistributedError: {e}", flush=True)
        world.barrier(f"the end of {difference}")
