"""``python -m benchmarks distributed``: data-parallel training on MPI (attngraph/train/distributed.py).

Each measurement runs in fresh processes under ``mpiexec`` (this module's ``main``, one JSON line from rank 0):

- steps/s of ``Trainer.fit`` on the GPT and seq2seq of ``gpt_step`` and ``seq2seq_step``, one global step of two
  micro-batches: 1 process on 1 thread (accumulate=2), 2 ranks on 1 thread each (accumulate=1), 1 process on 2
  threads (accumulate=2);
- the gradient all-reduce of 2 ranks (``GradientBuckets.reduce`` of the gradients of gpt_step's GPT and of one of
  width 256 and 8 layers, copies in included) against one bare mpi4py ``Allreduce`` of the same bytes, at three
  bucket sizes;
- the ring all-reduce cost model (``predicted``) of 8-64 ranks over 10-100 Gb/s from the measured step.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from attngraph.train.distributed import BUCKET_BYTES

from .harness import load

ROOT = Path(__file__).resolve().parents[1]
GPT_CONFIG = dict(vocab=65, width=128, heads=4, layers=2, length=64, batch=32)      # gpt_step's
LATENCY_S = 20e-6          # α: one message between two machines (TCP over Ethernet; 1-5 µs over InfiniBand)
BUCKETS = (1 << 20, 4 << 20, 25 << 20)


def gpt(config: dict):
    from attngraph.models.gpt import GPT
    c = config
    return GPT(c["vocab"], c["width"], c["heads"], c["layers"], 4 * c["width"], c["length"], dropout=0.0,
               rng=np.random.default_rng(0))


def trainer(model_name: str, accumulate: int, comm):
    """A Trainer of the GPT or seq2seq benchmark model and its batches (the same arrays every step)."""
    import attngraph as ag
    from attngraph.train import AdamW, Trainer
    if model_name == "gpt":
        c, rng = GPT_CONFIG, np.random.default_rng(0)
        model = gpt(c)
        batch = {name: rng.integers(0, c["vocab"], (c["batch"], c["length"])) for name in ("tokens", "targets")}

        def loss_fn(m, tokens, targets):
            return ag.cross_entropy(m(tokens), targets)
    else:
        from .cases import seq2seq_task
        model, _, loss, batch = seq2seq_task()

        def loss_fn(m, **arrays):
            return loss(**arrays)
    return Trainer(model, loss_fn, AdamW(model, lr=1e-4), accumulate=accumulate, comm=comm, progress=False,
                   compile_progress=False), lambda rng: batch


def train(model_name: str, accumulate: int, steps: int) -> dict:
    """Rank 0's steps/s of ``steps`` steps after two to warm up."""
    from attngraph.train import distributed
    world = distributed.init()
    fit, batches = trainer(model_name, accumulate, world)
    fit.fit(batches, 2)
    world.barrier("the start")
    started = time.perf_counter()
    fit.fit(batches, 2 + steps)
    seconds = time.perf_counter() - started
    return {"steps_per_second": steps / seconds}


def allreduce(rounds: int, width: int, layers: int) -> dict:
    """The slowest rank's median seconds of the gradient all-reduce of a GPT of ``width`` and ``layers`` (else
    gpt_step's) through buckets of each size in ``BUCKETS`` and of a bare Allreduce of the same bytes, alternating."""
    from mpi4py import MPI

    from attngraph.train import distributed
    world = distributed.init()
    grads = [np.random.default_rng(world.rank).standard_normal(p.shape).astype(p.dtype)
             for _, p in gpt({**GPT_CONFIG, "width": width, "layers": layers}).named_parameters()]
    like = [(g.shape, g.dtype) for g in grads]
    flat = np.concatenate([g.ravel() for g in grads])
    runs = {f"buckets of {b >> 20} MiB": (lambda bucket=distributed.GradientBuckets(world, like, b):
                                          bucket.reduce(grads, "benchmark")) for b in BUCKETS}
    runs["bare Allreduce"] = lambda: world.comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    seconds = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            world.comm.Barrier()
            started = time.perf_counter()
            run()
            seconds[name].append(world.comm.allreduce(time.perf_counter() - started, op=MPI.MAX))
    return {"bytes": int(flat.nbytes), **{name: statistics.median(s) for name, s in seconds.items()}}


def predicted(step_s: float, gradient_bytes: int, ranks: int, gbit_s: float, bucket_bytes: int) -> float:
    """Scaling efficiency of ``ranks`` ranks, each taking ``step_s`` to compute its share, by the α-β model of a
    ring all-reduce (Patarasuk & Yuan 2009; Thakur et al. 2005): each bucket of b bytes costs 2(W−1)·α +
    2(W−1)/W · b/β, and the reduction does not overlap the backward pass (attngraph's does not)."""
    buckets = max(1, -(-gradient_bytes // bucket_bytes))
    beta = gbit_s * 1e9 / 8
    reduce_s = buckets * 2 * (ranks - 1) * LATENCY_S + 2 * (ranks - 1) / ranks * gradient_bytes / beta
    return step_s / (step_s + reduce_s)


def launch(ranks: int, threads: int, *args) -> dict:
    """Run this module's ``main`` on ``ranks`` ranks with ``threads`` numba threads each; rank 0's record."""
    mpiexec = shutil.which("mpiexec", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
           "OMP_WAIT_POLICY": "passive", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", "benchmarks.distributed",
                           *map(str, args)], env=env, cwd=ROOT, check=True, capture_output=True, text=True, timeout=900)
    return json.loads(done.stdout.strip().splitlines()[-1])


def distributed(rounds: int) -> dict:
    """Steps/s on 1 and 2 ranks, the all-reduce's overhead, and the cost model's efficiency at 8-64 ranks."""
    before, steps = load(), max(5, rounds)
    settings = {"1 rank, 1 thread": (1, 1, 2), "2 ranks, 1 thread each": (2, 1, 1), "1 rank, 2 threads": (1, 2, 2)}
    rates = {(model, setting): launch(ranks, threads, "train", model, accumulate, steps)["steps_per_second"]
             for model in ("gpt", "seq2seq") for setting, (ranks, threads, accumulate) in settings.items()}
    reduces = [launch(2, 1, "allreduce", 3 * rounds, width, layers) for width, layers in ((128, 2), (256, 8))]
    overhead = [{name: seconds / reduce["bare Allreduce"] - 1 for name, seconds in reduce.items()
                 if name.startswith("buckets")} for reduce in reduces]
    gpt_step_s = 1 / rates[("gpt", "1 rank, 1 thread")] / 2          # one micro-batch's step on one thread
    model = {f"{ranks} ranks, {gbit} Gb/s": predicted(gpt_step_s, reduces[0]["bytes"], ranks, gbit, BUCKET_BYTES)
             for ranks in (8, 64) for gbit in (10, 100)}
    rows = [f"  {model:<8} {setting:<24} {rate:.2f} steps/s" for (model, setting), rate in rates.items()]
    for reduce, extra in zip(reduces, overhead):
        rows += [f"  all-reduce of {reduce['bytes'] / 2 ** 20:.2f} MiB on 2 ranks: bare Allreduce "
                 f"{reduce['bare Allreduce'] * 1e3:.2f} ms; " +
                 ", ".join(f"{name} {reduce[name] * 1e3:.2f} ms ({extra[name]:+.0%})" for name in extra)]
    rows += [f"  cost model, GPT at {gpt_step_s * 1e3:.0f} ms a micro-batch: " +
             ", ".join(f"{k} {v:.0%}" for k, v in model.items())]
    best = min(overhead[-1].values())
    return {"name": "distributed", "config": {"gpt": GPT_CONFIG, "seq2seq": "seq2seq_step's", "steps": steps},
            "load": [round(before, 2), round(load(), 2)], "rows": rows,
            "steps_per_second": {f"{m}, {s}": r for (m, s), r in rates.items()}, "allreduce": reduces,
            "overhead": overhead, "cost_model": model,
            "target": "bucketed all-reduce of the larger GPT within 10% of a bare Allreduce of the same bytes",
            "met": best <= 0.10}


def main(argv: list[str]) -> None:
    """On every rank: ``train MODEL ACCUMULATE STEPS`` or ``allreduce ROUNDS WIDTH LAYERS``; rank 0 prints the
    record."""
    from attngraph.train import distributed as world_of
    what, *args = argv
    record = train(args[0], int(args[1]), int(args[2])) if what == "train" else allreduce(*map(int, args))
    if world_of.init().rank == 0:
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
