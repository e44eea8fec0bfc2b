"""Ring attention over 2 MPI ranks against one process: causal attention forward and backward (B = 1, H = 4,
d = 64, float32) at T = 4096 … 16384, time per step (the slowest rank's, each round starting at a barrier) and peak
extra memory per process. The ranks hold the zigzag split (ops/cpu/ring.py) and run one numba thread each; the
one process runs the fused kernels on the whole sequence with one thread per rank, i.e. 2 threads.

    python -m benchmarks ring ring_long               the cases (T = 4096 and 16384), in the benchmarks' table
    python -m benchmarks.ring [--lengths 4096 8192 16384] [--rounds 3]     one line per length

Each side runs in its own processes (``mpiexec -n 2 python -m benchmarks.ring --worker``, or plain ``python``),
so that one's peak memory and threads do not touch the other's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .harness import load, peak_bytes

HEADS, DIM, RANKS = 4, 64, 2
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def worker(length: int, rounds: int) -> None:
    """One side's measurement, printed as JSON by rank 0: under MPI the ring over COMM_WORLD, else one process."""
    from ops.cpu import attention as kernels
    from ops.cpu import ring
    comm = None
    if "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((1, HEADS, length, DIM), np.float32) for _ in range(4))
    if comm is None:
        def step():
            o = kernels.attention(q, k, v, None, True)
            kernels.attention_backward(g, o, q, k, v, None, True)
    else:
        positions = np.concatenate([np.arange(a, b) for a, b in ring.pieces(length, comm.Get_size(), "zigzag")
                                    [comm.Get_rank()]])
        q, k, v, g = (np.ascontiguousarray(x[:, :, positions]) for x in (q, k, v, g))

        def step():
            o, lse = ring.ring_attention(q, k, v, comm, True, None, "bhtd", "zigzag")
            ring.ring_attention_backward(g, o, lse, q, k, v, comm, True, None, "bhtd", "zigzag")
    step()
    peak = peak_bytes(step)
    seconds = []
    for _ in range(rounds):
        if comm is not None:
            comm.Barrier()
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    everyone = [(seconds, peak)] if comm is None else comm.gather((seconds, peak))
    if everyone is not None:
        print(json.dumps({"seconds": [max(s) for s in zip(*(s for s, _ in everyone))],
                          "peak_bytes": max(p or 0 for _, p in everyone)}))


def side(length: int, rounds: int, ranks: int | None) -> dict:
    """Run ``worker`` in new processes: on ``ranks`` MPI ranks of one thread, or (None) one process of RANKS
    threads."""
    threads = "1" if ranks else str(RANKS)
    env = {**os.environ, "NUMBA_NUM_THREADS": threads, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "benchmarks.ring", "--worker", "--lengths", str(length), "--rounds", str(rounds)]
    if ranks:
        if MPIEXEC is None:
            raise SystemExit("the ring benchmark needs mpiexec (pip install -e '.[mpi]')")
        command = [MPIEXEC, "-n", str(ranks)] + command
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(result: dict) -> dict:
    q1, median, q3 = statistics.quantiles(result["seconds"], n=4, method="inclusive") if len(result["seconds"]) > 1 \
        else [result["seconds"][0]] * 3
    return {"median_s": median, "p25_s": q1, "p75_s": q3, "min_s": min(result["seconds"]),
            "runs": len(result["seconds"]), "peak_bytes": result["peak_bytes"]}


def measure(length: int, rounds: int) -> dict:
    """The benchmarks' record: "attngraph" is the ring over RANKS ranks, "one process" the reference."""
    before = load()
    ring_side, one = summary(side(length, rounds, RANKS)), summary(side(length, rounds, None))
    return {"name": f"ring T={length}", "config": dict(B=1, H=HEADS, T=length, d=DIM, causal=True, ranks=RANKS,
                                                       split="zigzag"),
            "load": [round(before, 2), round(load(), 2)], "attngraph": ring_side, "one process": one,
            "ratio": {"one process": ring_side["median_s"] / one["median_s"]},
            "target": "peak memory per rank below one process's", "met":
                ring_side["peak_bytes"] < one["peak_bytes"] if ring_side["peak_bytes"] and one["peak_bytes"] else None}


def ring(rounds: int) -> dict:
    """The case ``ring`` (registered in cases.py): T = 4096."""
    return measure(4096, max(3, rounds // 5))


def ring_long(rounds: int) -> dict:
    """The case ``ring_long``: T = 16384."""
    return measure(16384, max(2, rounds // 7))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ring", description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for length in args.lengths:
        if args.worker:
            worker(length, args.rounds)
            continue
        record = measure(length, args.rounds)
        ring_side, one = record["attngraph"], record["one process"]
        print(f"T={length}: ring over {RANKS} ranks {ring_side['median_s'] * 1e3:.0f} ms, peak +"
              f"{ring_side['peak_bytes'] / 2 ** 20:.1f} MiB per rank; one process ({RANKS} threads) "
              f"{one['median_s'] * 1e3:.0f} ms, peak +{one['peak_bytes'] / 2 ** 20:.1f} MiB; ratio "
              f"{record['ratio']['one process']:.2f}; load {record['load'][0]}-{record['load'][1]}", flush=True)


if __name__ == "__main__":
    main()
