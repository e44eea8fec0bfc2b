"""Measurement: attngraph and its references timed in one process, alternating, with peak memory.

``compare(runs, rounds)`` calls every function once to warm up (compilation, caches), once more to
measure its peak memory, then ``rounds`` rounds in which each takes one turn, in an order shuffled anew every
round (seeded), so that each follows every other about as often and load from other processes, which drifts over
seconds, hits every side of a round alike. A turn is two calls back to back, both timed: the first after another
side's turn (``after_another``), the second after a call of its own, as a training loop runs one step after
another. The second is the time a side is judged by: this host's L3 keeps little of an idle process's data past a
few milliseconds (benchmarks/MEASUREMENTS.md, "Why time matters"), so a call after another library's turn starts
from cold caches, which no loop of one model meets (by how much varies with the host's other tenants: attngraph's
seq2seq step 12.6 ms after its own and 17-20 after JAX's or PyTorch's one day, 2-11% apart another); the first is
reported beside it. Times are wall-clock seconds, summarized by the median and the interquartile range; a ratio is
the median of the per-round ratios.

Peak memory is the resident set's high-water mark during one call above the resident set before it
(Linux: ``/proc/self/status``, the mark reset through ``/proc/self/clear_refs``). For that one call glibc's
malloc maps every block of 128 KiB or more on its own, and first returns the free memory it holds, so
that the arrays the call allocates show in the resident set; then the allocator is set back as attngraph sets
it (ops/cpu/memory.py), where freed arrays are reused without faulting their pages in again at every call.
"""
from __future__ import annotations

import gc
import os
import random
import re
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from ops.cpu.memory import M_MMAP_THRESHOLD, glibc, reuse_freed_memory

MiB = 2 ** 20


@contextmanager
def _every_block_mapped():
    """glibc's malloc maps blocks of 128 KiB and more and returns free memory first; no-op off glibc."""
    libc = glibc()
    if libc is None:
        yield
        return
    libc.malloc_trim(0)
    libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    try:
        yield
    finally:
        if not reuse_freed_memory():            # attngraph's setting back, or else glibc's largest dynamic one
            libc.mallopt(M_MMAP_THRESHOLD, 32 * MiB)


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            return int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
    except (OSError, AttributeError):
        return None


def peak_bytes(fn: Callable) -> int | None:
    """Resident memory above the level before the call at its highest during one call of ``fn``; None
    where /proc cannot tell."""
    gc.collect()
    with _every_block_mapped():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")                            # resets VmHWM to the current VmRSS
        except OSError:
            return None
        before = _status("VmRSS")
        fn()
        peak = _status("VmHWM")
    return None if before is None or peak is None else max(peak - before, 0)


@dataclass
class Timing:
    seconds: list[float]            # each turn's second call, after one of its own
    after_another: list[float]      # each turn's first call, after another side's turn
    peak_bytes: int | None

    def summary(self) -> dict:
        q1, median, q3 = statistics.quantiles(self.seconds, n=4, method="inclusive")
        return {"median_s": median, "p25_s": q1, "p75_s": q3, "min_s": min(self.seconds),
                "after_another_median_s": statistics.median(self.after_another),
                "runs": len(self.seconds), "peak_bytes": self.peak_bytes}


def compare(runs: dict[str, Callable], rounds: int) -> dict[str, Timing]:
    """Time each function of ``runs`` ``rounds`` times, alternating (see the module's docstring)."""
    for fn in runs.values():
        fn()
    peaks = {name: peak_bytes(fn) for name, fn in runs.items()}
    names = list(runs)
    own, another = ({name: [] for name in names} for _ in range(2))
    order = random.Random(0)
    for _ in range(rounds):
        for name in order.sample(names, len(names)):
            another[name].append(timed(runs[name]))
            own[name].append(timed(runs[name]))
    return {name: Timing(own[name], another[name], peaks[name]) for name in names}


def timed(fn: Callable) -> float:
    """The wall-clock seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def ratio(a: Timing, b: Timing) -> float:
    """Median over rounds of a's time / b's time."""
    return statistics.median(x / y for x, y in zip(a.seconds, b.seconds))


def load() -> float:
    """The one-minute load average (2 means both of these two cores busy)."""
    return os.getloadavg()[0]
