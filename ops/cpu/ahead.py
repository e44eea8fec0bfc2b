"""Costly kernels compiled ahead, in a helper process on another core, while this process compiles the rest.

Numba compiles a kernel at its first call, one at a time (its compiler holds a process-wide lock), so a program's
first step on a cold cache compiles its kernels in sequence: 12.5 s for the copy demo, 6 of them for the two
flash-attention kernels. When an executable first runs on the CPU, ``start`` gives the costly ops of its schedule
(``COSTLY``: attention, GELU, the row kernels of norms, softmax, losses and embeddings, and the generated
elementwise kernels) whose kernels numba's cache does not hold yet to a helper process, last first, after the
optimizer's kernels that follow the step, given to ``expect`` beforehand. The helper calls each op's kernel on
zeros of the op's input shapes and dtypes, with its attributes and this process's number of threads, so that numba
compiles the same specializations into the cache both processes share. This process runs
the step from the front; the two meet in the middle. A step whose op the helper is compiling waits for it
(``Helper.then``), compiling meanwhile the jobs at the end of the helper's list that it has not started, and then
loads the kernel from the cache; an op the helper has not started is compiled here, and the helper, told so, skips
it. Ops whose kernels call the same costly compiled code (``KIN``: the attention kernels all call
``_exponentials``) are compiled by one process, so that numba compiles that code once: the helper does them last,
and when this process takes one, it takes and compiles the others with it. With one core, with the cache off, where
no process can be started, or with ``ATTNGRAPH_COMPILE_AHEAD=0``, everything compiles here as before. The helper's
errors are its own (its output on stderr is dropped): a kernel it could not compile compiles here. Figures:
benchmarks/MEASUREMENTS.md.
"""
from __future__ import annotations

import ast
import atexit
import math
import os
import subprocess
import sys
import threading

import numba
import numpy as np

from ops.cpu import additive, attention, cross_entropy, embedding, fused, gelu, layer_norm, optim, softmax


def _twins(kernel) -> tuple:
    """The numba dispatchers behind a kernel: both twins of a ``parallel_kernel``, else the kernel itself."""
    return (kernel.serial, kernel.parallel) if hasattr(kernel, "serial") else (kernel,)


def _written(kernel):
    """A hand-written kernel's dispatchers, whatever the attributes and dtypes."""
    return lambda attrs, dtypes: _twins(kernel)


def _generated(attrs: dict, dtypes: tuple) -> tuple:
    """The dispatchers of the kernel ``ops/cpu/fused.py`` generates for a fused node's program and dtypes."""
    return _twins(fused._compiled(attrs["program"], attrs["reads"], dtypes, len(attrs["shape"])))


COSTLY = {          # op -> (attrs, input dtype names) -> the dispatchers whose cache entries say if it is compiled
    "additive_scores": _written(additive._scores),
    "additive_scores_grad": _written(additive._backward),
    "attention": _written(attention._forward_tiles),
    "attention_grad": _written(attention._backward_heads),
    "attention_bias_grad": _written(attention._backward_heads),
    "layer_norm": _written(layer_norm._layer_norm_rows),
    "layer_norm_grad": _written(layer_norm._layer_norm_backward_rows),
    "layer_norm_params_grad": _written(layer_norm._layer_norm_params_backward_rows),
    "softmax": _written(softmax._softmax_rows),
    "softmax_grad": _written(softmax._softmax_backward_rows),
    "log_softmax": _written(softmax._log_softmax_rows),
    "log_softmax_grad": _written(softmax._log_softmax_backward_rows),
    "cross_entropy": _written(cross_entropy._cross_entropy_rows),
    "cross_entropy_grad": _written(cross_entropy._cross_entropy_backward_rows),
    "gelu": _written(gelu._forward),
    "gelu_grad": _written(gelu._backward),
    "gather": _written(embedding._gather_rows),
    "scatter_add": _written(embedding._scatter_add_rows),
    "fused": _generated,
    "sgd": _written(optim._sgd),
    "adam": _written(optim._adam),
    "adamw": _written(optim._adam),
    "sum_of_squares": _written(optim._sum_of_squares),
}

KIN = {             # op -> its kin: ops whose kernels call the same costly compiled code, compiled in one process
    "attention": "attention", "attention_grad": "attention", "attention_bias_grad": "attention",
}

_given: dict[tuple, tuple[Helper, int]] = {}     # job -> the helper compiling it, and its number there
_expected: list[tuple] = []                     # jobs for the next helper to compile first (``expect``)
_lock = threading.Lock()


def expect(jobs: list[tuple | None]) -> None:
    """Have the next helper compile ``jobs`` (None: not one) before all others: kernels that run after the step
    whose kernels it compiles, as the optimizer's update and the gradient norm (attngraph/train/optim.py), which
    would otherwise compile in this process once the step is done."""
    with _lock:
        _expected.extend(job for job in jobs if job is not None and job not in _expected)


def start(jobs: list[tuple | None]) -> list[tuple[Helper, int] | None]:
    """For each of ``jobs`` (op, attrs, ((shape, dtype name), ...)), or None for a step that is not one, the helper
    compiling it and its number there, or None where it compiles here. The costly ones whose kernels are not
    compiled yet, here or in the cache, and not given to a helper before, go to a new helper, last first, but
    kin together after the others, first first (``KIN``); the jobs ``expect`` was given come before them all."""
    with _lock:
        fresh = [job for job in dict.fromkeys([*_expected, *reversed(jobs)]) if job is not None and job not in _given
                 and _cold(job)]
        _expected.clear()
        if fresh and _can_help():
            fresh = _kin_last(fresh)
            helper = Helper(fresh)
            if helper.process is not None:
                _given.update((job, (helper, i)) for i, job in enumerate(fresh))
        return [_given.get(job) for job in jobs]


def _kin_last(jobs: list[tuple]) -> list[tuple]:
    """``jobs`` (last first) with the kin among them moved after the others, each family together, first first."""
    family = [KIN.get(op) for op, _, _ in jobs]
    shared = [f for f in dict.fromkeys(reversed(family)) if f is not None and family.count(f) > 1]
    first_first = list(zip(reversed(jobs), reversed(family)))
    return [job for job, f in zip(jobs, family) if f not in shared] + \
        [job for f in shared for job, g in first_first if g == f]


def job(op: str, attrs: dict, inputs: list[tuple[tuple[int, ...], np.dtype]]) -> tuple | None:
    """The job of a step running ``op`` on inputs of these shapes and dtypes, or None when it is not a costly op
    or cannot be written out for the helper (an attribute that is not a plain literal; a float16 input)."""
    if op not in COSTLY or any(dtype == np.float16 for _, dtype in inputs):
        return None
    spec = (op, tuple(sorted(attrs.items())), tuple((tuple(shape), np.dtype(dtype).name) for shape, dtype in inputs))
    return spec if _plain(spec) else None


def _plain(value) -> bool:
    """Whether ``repr`` writes value so that ``ast.literal_eval`` reads it back as itself (the helper's input):
    tuples of None, bools, ints, finite floats and strings."""
    if type(value) is tuple:
        return all(map(_plain, value))
    return type(value) in (type(None), bool, int, str) or type(value) is float and math.isfinite(value)


def _cold(job: tuple) -> bool:
    """Whether numba has compiled none of ``job``'s kernels, here or into its cache (which must be on). Numba has no
    public way to ask its cache without compiling: its index file, one per function, is looked for instead."""
    op, attrs, inputs = job
    dispatchers = COSTLY[op](dict(attrs), tuple(dtype for _, dtype in inputs))
    files = [getattr(d._cache, "_cache_file", None) for d in dispatchers]
    return all(f is not None for f in files) and not any(d.signatures for d in dispatchers) \
        and not any(os.path.exists(f._index_path) for f in files)


def _can_help() -> bool:
    """Whether a helper can run beside this process: another core, numba compiling, and not turned off by
    ``ATTNGRAPH_COMPILE_AHEAD=0``."""
    return numba.config.NUMBA_DEFAULT_NUM_THREADS > 1 and not numba.config.DISABLE_JIT \
        and os.environ.get("ATTNGRAPH_COMPILE_AHEAD", "1") != "0"


class Helper:
    """A process compiling jobs, which reports ``start i`` and ``done i`` for its i-th job on its output and skips
    those it is told (``taken``) before it starts them."""

    def __init__(self, jobs: list[tuple]):
        self.jobs, self.started, self.done, self.taken, self.finished = jobs, set(), set(), set(), False
        self._changed = threading.Condition()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "ops.cpu.ahead", str(numba.get_num_threads())],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True, env=env)
        except OSError:
            self.process = None
            return
        self.process.stdin.write(repr(jobs) + "\n")
        self.process.stdin.flush()
        atexit.register(self.process.kill)
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        for line in self.process.stdout:
            event, i = line.split()
            with self._changed:
                (self.started if event == "start" else self.done).add(int(i))
                self._changed.notify_all()
        with self._changed:
            self.finished = True
            self._changed.notify_all()
            self.process.stdin.close()      # ``then`` writes to it only before ``finished``, under the lock
        self.process.stdout.close()
        self.process.wait()
        atexit.unregister(self.process.kill)

    def then(self, i: int, kernel, *args):
        """``kernel(*args)`` once the helper has compiled job i if it is compiling it, this process compiling
        meanwhile the helper's last jobs not started, taken from it. A job i the helper has not started is taken
        from it, with its kin: they compile here."""
        with self._changed:
            kin = self._take(i)[1:]
        while True:
            with self._changed:
                if i not in self.started or i in self.done or self.finished:
                    break
                spare = self._take(max(filter(self._open, range(len(self.jobs))), default=None))
                if not spare:
                    self._changed.wait()
            for k in spare:
                compile_job(self.jobs[k])
        result = kernel(*args)
        for k in kin:
            compile_job(self.jobs[k])
        return result

    def _open(self, i: int) -> bool:
        return i not in self.started and i not in self.taken and not self.finished

    def _take(self, i: int | None) -> list[int]:
        """Job i and its kin that the helper has not started, now taken from it (none when i is not open)."""
        if i is None or not self._open(i):
            return []
        family = KIN.get(self.jobs[i][0])
        taken = [i] + [k for k, (op, _, _) in enumerate(self.jobs)
                       if k != i and family is not None and KIN.get(op) == family and self._open(k)]
        self.taken.update(taken)
        try:
            self.process.stdin.write("".join(f"{k}\n" for k in taken))
            self.process.stdin.flush()
        except OSError:             # it has just exited
            pass
        return taken


def compile_job(job: tuple) -> None:
    """Compile a job's kernels by calling them on zeros of its inputs' shapes and dtypes, with its attributes. A
    kernel that refuses zeros is left to compile at its first real call."""
    from ops.cpu.backend import BACKEND
    op, attrs, inputs = job
    try:
        BACKEND.kernels[op](*(np.zeros(shape, dtype) for shape, dtype in inputs), **dict(attrs))
    except Exception:
        pass


def main(threads: int) -> None:
    """The helper: compile the jobs read from the first line of the input, skipping those the parent takes
    (the numbers it writes on the following lines)."""
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    jobs, taken = ast.literal_eval(sys.stdin.readline()), set()
    threading.Thread(target=lambda: taken.update(int(line) for line in sys.stdin), daemon=True).start()
    for i, spec in enumerate(jobs):
        if i in taken:
            continue
        print("start", i, flush=True)
        compile_job(spec)
        print("done", i, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
