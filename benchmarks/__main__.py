"""``python -m benchmarks [NAME ...] [--json] [--rounds N]``: run cases, print a table or JSON lines."""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys

import numba
import numpy as np

from .cases import CASES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"cases to run (default: all): {', '.join(CASES)}")
    parser.add_argument("--json", action="store_true", help="print one JSON object per case instead of a table")
    parser.add_argument("--rounds", type=int, default=15, help="timed runs of each side per case (default 15)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASES)}")
    if not args.json:
        print(header())
    for name in args.names or list(CASES):
        record = CASES[name](args.rounds)
        print(json.dumps(record) if args.json else row(record), flush=True)
    return 0


def header() -> str:
    from ops.cpu.threads import threading_info

    from .cases import jr, tr
    layer, threads = threading_info()
    torch = f"torch {tr.torch.__version__} ({tr.torch.get_num_threads()} threads)" if tr else "torch not installed"
    jax = f"jax {jr.jax.__version__}" if jr else "jax not installed"
    return (f"{_cpu()}, {os.cpu_count()} cores; numpy {np.__version__}, numba {numba.__version__} ({layer}, "
            f"{threads} threads), {torch}, {jax}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
            f"OPENBLAS_THREAD_TIMEOUT={os.environ['OPENBLAS_THREAD_TIMEOUT']}; {_blas()}\n"
            f"median [interquartile range] per run after a run of its own; ratio = median over rounds of attngraph / "
            f"reference; after another: the median of the runs right after another side's\n")


def _blas() -> str:
    """OpenBLAS's kernels (NumPy's, SciPy's), and a warning where the environment chose them: some hosts pin
    OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for older OpenBLAS builds, which halves a current one's products on
    an AVX-512 machine while the peers' BLAS (MKL, XLA's) is untouched."""
    from ops.cpu.matmul import openblas_core
    cores = f"OpenBLAS kernels {openblas_core('numpy')} (NumPy), {openblas_core('scipy')} (SciPy)"
    pinned = [f"{key}={os.environ[key]}" for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if key in os.environ]
    if pinned:
        cores += (f"\nwarning: {' and '.join(pinned)} chose them, not OpenBLAS: run this command with "
                  f"`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` to time the kernels OpenBLAS picks for this CPU")
    return cores


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _time(summary: dict) -> str:
    return f"{_ms(summary['median_s'])} [{_ms(summary['p25_s'])}-{_ms(summary['p75_s'])}]"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def row(record: dict) -> str:
    """One case as a few aligned lines."""
    status = {True: "met", False: "MISSED", None: "no reference"}[record["met"]]
    lines = [f"{record['name']}  {json.dumps(record['config'])}  load {record['load'][0]}-{record['load'][1]}"]
    if "rows" in record:                        # a case that formats its own lines (benchmarks/distributed.py)
        lines += record["rows"]
    elif record["name"] == "compile":
        for program, kind in itertools.product(("gpt", "copy"), ("cold", "warm")):
            r = record[program][kind]
            parts = ", ".join(f"{key.removesuffix('_s')} {value:.2f} s" for key, value in r.items() if key != "seconds")
            lines.append(f"  {program:<5} {kind:<5} {r['seconds']:.2f} s ({parts})")
    else:
        for side in ("attngraph", *record["ratio"]):
            peak = record[side]["peak_bytes"]
            memory = f"peak +{peak / 2 ** 20:.1f} MiB" if peak is not None else ""
            share = f"ratio {record['ratio'][side]:.2f}" if side in record["ratio"] else ""
            rate = f"{record['gflops'][side]:.1f} GFLOP/s" if "gflops" in record else ""
            first = f"after another {_ms(record[side]['after_another_median_s'])}"
            lines.append(f"  {side:<13} {_time(record[side]):<34} {memory:<18} {share:<11} {rate:<16} {first}")
        if "sgemm_gflops" in record:
            lines.append(f"  sgemm ceiling (NumPy 1024³ float32): {record['sgemm_gflops']:.1f} GFLOP/s")
    lines.append(f"  target: {record['target']}: {status}\n")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
