"""Threads for Numba's parallel kernels: used only when the work is large enough to pay for them.

A parallel region is cheap on a quiet machine, but when another process holds a core its threads wait for
one another at every barrier, and a tiny kernel or a small training step then runs many times slower than on
one thread. ``parallel_kernel`` therefore makes two twins of a kernel, compiled at their first call: a serial
one, which runs when its first argument has fewer than ``PARALLEL_MIN_SIZE`` elements or Numba has one thread,
and a ``parallel=True`` one for the rest. NUMBA.md's ~10-50k elements hold for threads that spin between regions
(1.5 µs a region); the passive threads below sleep, and a region wakes one: a region doing nothing took 61-84 µs
with them against 2 µs spinning on a 2-vCPU virtual machine, where the sleeping vCPU itself must be woken. There a
kernel's serial twin beat its parallel one in training steps up to ~2**19 elements (HAN's (192, 10, 192) fused
gate gradients 78 against 116 µs, GPT's (2048, 128) layer norm 82 against 135 µs); from 2**19 on, the kernels
heavier than a pass over memory gained (GPT's (2048, 256) layer norm backward 196 against 238 µs, attention
1.2-1.7x). A parallel compile costs several times a serial one, so a program on one thread, as the demos run, or
on small arrays never pays for it. The twins agree to the last bit but where LLVM vectorizes a fastmath sum in
another order (1 ulp seen in the cross-entropy backward), as the parallel kernel on one and on two threads do.

Larger kernels still meet the barriers, where GNU OpenMP's threads spin (300,000 rounds by default) in
the hope that the others arrive soon: with another process on one of the two cores, the spinning thread
holds the core that the late one needs. ``OMP_WAIT_POLICY=passive`` makes threads sleep at once; importing
``ops`` sets that policy unless the environment already sets one (ops/__init__.py); it must precede the
first parallel kernel call, which starts Numba's OpenMP runtime.

OpenBLAS's own worker threads spin after each product for 2**28 cycles (~0.1 s) before they sleep, so in a
training step, where products and numba's kernels alternate, they hold the cores that the next kernel's
threads need, slowing the kernel that follows a product. With ``OPENBLAS_THREAD_TIMEOUT=4`` (2**4 cycles,
OpenBLAS's minimum) they sleep at once. Importing ``ops`` sets it too, unless set; OpenBLAS reads it when it
is loaded, which for SciPy's OpenBLAS (the one numba's ``np.dot`` calls) is at the first compiled product, and
for NumPy's when NumPy is imported (before attngraph, in most programs: see ops/cpu/matmul.py).

``in_threads`` runs a ``nogil`` kernel over parts of a range on Python threads instead: for kernels whose
loop body calls other compiled functions, which numba compiles once more for a prange body, so that as prange
loops they would take several times as long to compile. ``together`` runs two such kernels at once, one thread
each: the two directions of a bidirectional recurrence (attngraph/core/together.py).
"""
import concurrent.futures
import functools
import importlib.util
import threading
import types
import warnings

import numba
import numpy as np
from numba import njit, prange

import ops

PARALLEL_MIN_SIZE = 2 ** 19     # elements of a parallel_kernel's work from which its threads pay
IN_THREADS_MIN_WORK = 32_768    # elements of in_threads' work (time loops, attention: many FLOPs each) from which
                                # its threads pay
BLAS_SERIAL_MAX = 2 ** 18   # multiply-adds of a product OpenBLAS runs on the calling thread (SMP_THRESHOLD_MIN * ...)
PARTS_PER_THREAD = 8


def spinning_openmp() -> bool:
    """Whether numba's parallel kernels will run on an OpenMP runtime whose idle threads spin: one loaded before
    ``ops`` set OMP_WAIT_POLICY (``ops.OPENMP_LOADED_FIRST``), which numba's OpenMP layer shares (a process has one
    libgomp), when that layer is the one numba takes (asked for, or the default where TBB is not installed)."""
    layer = numba.config.THREADING_LAYER
    takes_omp = layer == "omp" or layer == "default" and importlib.util.find_spec("tbb") is None
    return ops.OPENMP_LOADED_FIRST and takes_omp


if spinning_openmp():
    warnings.warn("an OpenMP runtime (libgomp) was loaded before attngraph, with OMP_WAIT_POLICY unset, as `import "
                  "torch` loads its own: numba's parallel kernels share its threads, which spin while idle and hold "
                  "the cores that BLAS needs (GPT's training step ran 1.7x as long). Set OMP_WAIT_POLICY=passive in "
                  "the environment, or import attngraph first.", RuntimeWarning, stacklevel=2)


def parallel_kernel(fn=None, *, work=None, **options):
    """``fn`` compiled twice with ``@njit(cache=True, **options)``: ``run.parallel`` with ``parallel=True``,
    called when the first argument has PARALLEL_MIN_SIZE elements or more (``work(*args)`` elements, when given)
    and Numba has several threads, and ``run.serial`` (``prange`` as ``range``) otherwise."""
    if fn is None:
        return functools.partial(parallel_kernel, work=work, **options)
    size = work or (lambda first, *rest: first.size)
    parallel = njit(parallel=True, cache=True, **options)(fn)
    serial = njit(cache=True, **options)(renamed(fn, f"{fn.__qualname__}.serial"))

    @functools.wraps(fn)
    def run(*args):
        if size(*args) >= PARALLEL_MIN_SIZE and numba.get_num_threads() > 1:
            return parallel(*args)
        return serial(*args)

    run.parallel, run.serial = parallel, serial
    return run


def renamed(fn, qualname: str):
    """A copy of the function ``fn`` named ``qualname``: Numba names a kernel's cache files after its
    qualified name, not after its compile options, so the serial twin needs a name of its own."""
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = qualname
    return twin


def in_threads(kernel, count: int, *args, work: int, grain: int = 1) -> None:
    """``kernel(start, stop, *args)`` over 0 ≤ i < count on one Python thread per Numba thread
    (``numba.get_num_threads()``), the calling thread among them; ``kernel`` must release the GIL
    (``nogil=True``). The threads take parts of about count / (PARTS_PER_THREAD · threads), and at least
    ``grain``, in turn, so that one slowed by another process on its core takes fewer, and one not yet awake when
    the parts run out takes none and is not waited for (``Parts``). One part when ``work`` (elements) is below
    IN_THREADS_MIN_WORK. Returns when every part is done; raises the first error of a part."""
    threads = max(1, min(numba.get_num_threads(), count // grain)) if work >= IN_THREADS_MIN_WORK else 1
    if threads == 1:
        kernel(0, count, *args)
        return
    parts = Parts(kernel, count, max(grain, count // (PARTS_PER_THREAD * threads)), args)
    for _ in range(threads - 1):
        _pool().submit(parts.help)
    parts.take()
    parts.wait()


class Parts:
    """The parts [start, start + size) of range(count) for ``kernel(start, stop, *args)``, taken one at a time (each
    ``next`` of one iterator, atomic under the GIL) by the calling thread (``take``) and by pool threads (``help``).
    ``wait`` ends the taking and returns once the helpers that began are done: it never waits for a thread that has
    not started. On a virtual machine that halts an idle core, a pool thread started 30 µs after its job was given
    back to back, 120 µs after 100 ms without work and now and then 1-2 ms late, by when the calling thread may have
    done every part itself."""

    def __init__(self, kernel, count: int, size: int, args: tuple):
        self._kernel, self._count, self._size, self._args = kernel, count, size, args
        self._starts = iter(range(0, count, size))
        self._errors, self._helping, self._closed, self._changed = [], 0, False, threading.Condition()

    def take(self) -> None:
        """Run parts until none is left or one has raised (the error kept for ``wait``)."""
        for start in self._starts:
            try:
                self._kernel(start, min(start + self._size, self._count), *self._args)
            except BaseException as error:
                self._errors.append(error)
            if self._errors:
                return

    def help(self) -> None:
        """``take`` on a pool thread, unless the calling thread has already ended the taking."""
        with self._changed:
            if self._closed:
                return
            self._helping += 1
        try:
            self.take()
        finally:
            with self._changed:
                self._helping -= 1
                self._changed.notify_all()

    def wait(self) -> None:
        """Until the helpers that began are done; then raises the first error of a part."""
        with self._changed:
            self._closed = True
            self._changed.wait_for(lambda: self._helping == 0)
        if self._errors:
            raise self._errors[0]


def together(first, second, split: int, *args):
    """``first(*args[:split])`` and ``second(*args[split:])`` at the same time, the second on a pool thread, or on
    this one after the first when no pool thread has started it by then (``Claimed``), each with Numba's thread count
    set to one on its thread (``numba.set_num_threads`` is per thread), so that neither starts threads of its own, and
    ``beside_another()`` true there: (first's result, second's). One after the other when Numba has one thread.
    Raises the first's error, else the second's, once both are done."""
    if numba.get_num_threads() < 2:
        return _beside(first, args[:split]), _beside(second, args[split:])
    other = Claimed(_on_one_thread, second, args[split:])
    _pool().submit(other.run)
    try:
        result = _on_one_thread(first, args[:split])
    finally:
        other.run()
        other.wait()
    return result, other.result()


class Claimed:
    """A call ``fn(*args)`` that whichever thread ``run``s it first makes, once; ``wait`` waits for it to be made,
    ``result`` gives its value or raises its error."""

    def __init__(self, fn, *args):
        self._call, self._claim, self._done = (fn, args), threading.Lock(), threading.Event()
        self._value = self._error = None

    def run(self) -> None:
        if not self._claim.acquire(blocking=False):
            return
        fn, args = self._call
        try:
            self._value = fn(*args)
        except BaseException as error:
            self._error = error
        finally:
            self._done.set()

    def wait(self) -> None:
        self._done.wait()

    def result(self):
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


def beside_another() -> bool:
    """Whether the kernel running on this thread is one of ``together``'s two, whatever the number of threads: a
    time loop then runs its rows as one block (ops/cpu/recurrence.py), so that its results, which its blocks
    decide, do not depend on the threads either."""
    return getattr(_sides, "beside", False)


_sides = threading.local()


def _on_one_thread(kernel, args):
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return _beside(kernel, args)
    finally:
        numba.set_num_threads(threads)


def _beside(kernel, args):
    _sides.beside = True
    try:
        return kernel(*args)
    finally:
        _sides.beside = False


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """Idle workers wait on a lock, not spinning."""
    return concurrent.futures.ThreadPoolExecutor(max(1, numba.config.NUMBA_NUM_THREADS - 1), "attngraph")


@njit(parallel=True, cache=True)
def _touch(x):
    for i in prange(x.size):
        x[i] += 1.0


def threading_info() -> tuple[str, int]:
    """(layer, threads): runs one tiny parallel kernel so that the layer is loaded, then asks Numba."""
    _touch(np.zeros(4))
    return numba.threading_layer(), numba.get_num_threads()
