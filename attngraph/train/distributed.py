"""Data-parallel training on MPI (mpi4py): the world of ranks, its collectives with a deadline, and the
gradients' bucketed all-reduce.

    world = distributed.init()                      # MPI's COMM_WORLD, or a world of one without mpi4py
    trainer = Trainer(model, loss_fn, optimizer, comm=world, accumulate=2)
    trainer.fit(batches, steps=1000)                # mpiexec -n 4 python train.py: 4 ranks x 2 micro-batches

Every rank runs the same script. The Trainer splits each step's W·a global micro-batches over the W ranks (rank
r draws micro-batches r·a .. r·a + a − 1, each seeded by its global index), sums their gradients with one
all-reduce in fixed buckets, and steps every rank's optimizer with the same sums, as PyTorch's
DistributedDataParallel and Horovod do: W ranks with ``accumulate=a`` take the step of one process with
``accumulate=W·a``. A Trainer built without ``comm`` joins ``world()``: the MPI world when the process was
started by ``mpiexec``/``srun``, else a world of one (nothing changes).

Faults never hang (``init`` arranges it): an uncaught exception on any rank prints that rank's traceback and
calls ``MPI_Abort``, which ends every rank within seconds (``python -m mpi4py script.py`` does the same); every
collective here is non-blocking and polled against a deadline (``timeout`` seconds, default ``TIMEOUT``, or
``ATTNGRAPH_MPI_TIMEOUT``), past which ``CollectiveTimeout`` names the rank and what it waited for (the step);
``check_same`` compares what every rank must share (parameter names, shapes, dtypes, model, attngraph's
version, the gradient schedule) and raises ``DistributedError`` naming the first difference on every rank.
``rank0_first`` lets rank 0 compile numba's kernels into the on-disk cache before the others load them, so
that ranks never write one cache entry at the same moment.

On the GPU the gradients are staged to host memory through the same buffers (a CUDA-aware MPI is not assumed).
"""
from __future__ import annotations

import math
import os
import pickle
import sys
import time
import traceback
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from ..core.device import backend, backend_of
from ..errors import CollectiveTimeout, DistributedError

TIMEOUT = 600.0                 # seconds a collective may wait for the other ranks (a cold compile takes minutes)
SPIN_S = 1.0                    # seconds a collective polls without pausing (World.wait)
BUCKET_BYTES = 25 << 20         # gradient bucket size (benchmarks/MEASUREMENTS.md, "Data parallelism")
ABORT_GRACE_S = 0.5             # seconds a failing rank waits before MPI_Abort: MPICH's launcher forwards a rank's
                                # output through a proxy that the abort ends, and without the pause it lost the
                                # traceback (every time in a fresh clone under load)
LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")   # mpiexec (MPICH, Open MPI), srun


class World:
    """The ranks training together: ``rank``, ``size``, ``comm`` (the mpi4py communicator, or None for a world
    of one, whose collectives return their input) and ``timeout`` (seconds, or None to wait forever). Every
    collective takes ``what``, the words naming it in a timeout's message ("step 12: the gradient all-reduce")."""

    def __init__(self, comm=None, timeout: float | None = TIMEOUT):
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        self.comm, self.timeout = comm, timeout
        self.rank = 0 if comm is None else comm.Get_rank()
        self.size = 1 if comm is None else comm.Get_size()

    def __repr__(self) -> str:
        return f"World(rank {self.rank} of {self.size}, timeout {self.timeout} s)"

    def wait(self, requests: Sequence, what: str) -> None:
        """Poll ``requests`` (MPI requests) until all complete, or raise ``CollectiveTimeout`` past the deadline.
        MPI progresses a non-blocking collective only inside MPI calls, so for ``SPIN_S`` the polls follow one
        another as a blocking collective's do (a pause of 10 µs made a 1.6 MiB all-reduce 17x slower on a busy
        machine), then every millisecond: the other ranks are late (compiling, or stalled)."""
        if self.timeout is None:
            self._mpi.Request.Waitall(list(requests))
            return
        requests = list(requests)
        started = time.monotonic()
        while not self._mpi.Request.Testall(requests):
            waited = time.monotonic() - started
            if waited > self.timeout:
                raise CollectiveTimeout(f"rank {self.rank} of {self.size}: {what} waited more than {self.timeout:g} s "
                                        "for the other ranks (a rank stalled, died or took another path); raise the "
                                        "limit with World(timeout=...) or ATTNGRAPH_MPI_TIMEOUT")
            if waited > SPIN_S:
                time.sleep(1e-3)

    def allreduce_sum(self, buffer: np.ndarray, what: str) -> np.ndarray:
        """Sum the C-contiguous host ``buffer`` over the ranks, in place; returns it."""
        if self.size > 1:
            self.wait([self.comm.Iallreduce(self._mpi.IN_PLACE, buffer, op=self._mpi.SUM)], what)
        return buffer

    def broadcast(self, buffer: np.ndarray, what: str, root: int = 0) -> np.ndarray:
        """Rank ``root``'s values of the host ``buffer`` on every rank, in place; returns it."""
        if self.size > 1:
            self.wait([self.comm.Ibcast(buffer, root=root)], what)
        return buffer

    def barrier(self, what: str) -> None:
        if self.size > 1:
            self.wait([self.comm.Ibarrier()], what)

    def any(self, flag: bool, what: str) -> bool:
        """Whether ``flag`` is true on some rank."""
        return bool(self.allreduce_sum(np.array([int(bool(flag))], np.int64), what)[0])

    def allgather(self, value, what: str) -> list:
        """Every rank's ``value`` (any picklable object), in rank order."""
        if self.size == 1:
            return [value]
        data = np.frombuffer(pickle.dumps(value), np.uint8)
        lengths = np.zeros(self.size, np.int64)
        self.wait([self.comm.Iallgather(np.array([data.size], np.int64), lengths)], what)
        gathered = np.empty(int(lengths.sum()), np.uint8)
        self.wait([self.comm.Iallgatherv(data, [gathered, lengths])], what)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return [pickle.loads(gathered[a:b].tobytes()) for a, b in zip(offsets[:-1], offsets[1:])]

    def check_same(self, values: dict, what: str) -> None:
        """Raise ``DistributedError`` on every rank when some rank's ``values`` differ from rank 0's, naming the
        first key (in ``values``' order) that differs and each value."""
        gathered = self.allgather(values, what)
        for key in values:
            for rank, other in enumerate(gathered[1:], 1):
                if other.get(key) != gathered[0].get(key):
                    raise DistributedError(f"rank {self.rank} of {self.size}: {what}: the ranks disagree on the {key}: "
                                           f"rank 0 has {gathered[0].get(key)!r}, rank {rank} has {other.get(key)!r}")

    def shard(self, count: int) -> slice:
        """This rank's contiguous part of ``count`` items: parts differ in length by at most one."""
        start = self.rank * count // self.size
        return slice(start, (self.rank + 1) * count // self.size)

    @contextmanager
    def rank0_first(self, what: str):
        """Run the block on rank 0, then on the other ranks at once: rank 0 compiles numba's kernels into its
        on-disk cache and the others load them (the block must not run collectives)."""
        if self.rank != 0:
            self.barrier(f"{what} (waiting for rank 0)")
        yield
        if self.rank == 0:
            self.barrier(what)

    def abort(self, code: int = 1) -> None:
        """End every rank now (``MPI_Abort``)."""
        if self.comm is not None:
            self.comm.Abort(code)
        sys.exit(code)

    @property
    def communicator(self) -> Communicator | None:
        """This world as the mpi4py-like communicator that kernels taking one use (ring attention,
        ``ops/cpu/ring.py``), its waits under this world's deadline; None for a world of one."""
        return None if self.size == 1 else Communicator(self)

    @property
    def _mpi(self):
        from mpi4py import MPI
        return MPI


class Communicator:
    """mpi4py's calls that ring attention's kernels make (``ops/cpu/ring.py``), on ``world``'s communicator, with
    ``allgather`` and ``wait(requests, what)`` under its deadline: a stalled rank makes the others raise
    ``CollectiveTimeout`` naming their rank and the ring step, never hang."""

    def __init__(self, world: World):
        self.world = world

    def __repr__(self) -> str:
        return f"Communicator({self.world!r})"

    def Get_rank(self) -> int:
        return self.world.rank

    def Get_size(self) -> int:
        return self.world.size

    def Isend(self, buffer, dest: int, tag: int):
        return self.world.comm.Isend(buffer, dest, tag)

    def Irecv(self, buffer, source: int, tag: int):
        return self.world.comm.Irecv(buffer, source, tag)

    def allgather(self, value) -> list:
        return self.world.allgather(value, "ring attention's exchange of the shards' lengths")

    def wait(self, requests: Sequence, what: str) -> None:
        self.world.wait(requests, what)


SELF = World()          # a world of one: pass comm=distributed.SELF to train alone under mpiexec
_world: World | None = None


def init(timeout: float | None = None) -> World:
    """MPI's world (``COMM_WORLD``), or a world of one when mpi4py or its MPI library is missing (but
    ``DistributedError`` when an MPI launcher started this process: N lone trainings would be wrong). With more than
    one rank it installs ``sys.excepthook`` so that an uncaught exception on a rank prints its traceback and aborts
    every rank. ``timeout``: the collectives' deadline in seconds (default ``ATTNGRAPH_MPI_TIMEOUT`` or ``TIMEOUT``).
    Later calls return the same world (with the new timeout, when given)."""
    global _world
    if _world is None:
        try:
            from mpi4py import MPI
        except (ImportError, RuntimeError) as e:       # RuntimeError: mpi4py without an MPI library to load
            if launched_by_mpi():
                raise DistributedError(f"an MPI launcher started this process, but mpi4py cannot load MPI ({e}): "
                                       "pip install 'attngraph[mpi]', or build mpi4py against the site's MPI") from None
            comm = None
        else:
            comm = MPI.COMM_WORLD if MPI.COMM_WORLD.Get_size() > 1 else None
        _world = World(comm, _environment_timeout())
        if _world.size > 1:
            sys.excepthook = _abort_on_exception
    if timeout is not None:
        _world = World(_world.comm, timeout)
    return _world


def _environment_timeout() -> float:
    value = os.environ.get("ATTNGRAPH_MPI_TIMEOUT", str(TIMEOUT))
    try:
        return float(value)
    except ValueError:
        raise DistributedError(f"ATTNGRAPH_MPI_TIMEOUT must be a number of seconds, got {value!r}") from None


def launched_by_mpi() -> bool:
    """Whether an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) started this process."""
    return any(name in os.environ for name in LAUNCHER_VARIABLES)


def world() -> World:
    """The world a Trainer joins by default: ``init()``'s when an MPI launcher started this process, else ``SELF``
    (so that a plain ``python train.py`` never loads MPI)."""
    return init() if launched_by_mpi() else SELF


def as_world(comm) -> World:
    """``comm`` as a World: a World, an mpi4py communicator, or None (``world()``)."""
    if comm is None:
        return world()
    if isinstance(comm, World):
        return comm
    if hasattr(comm, "Iallreduce"):
        return World(comm if comm.Get_size() > 1 else None, init().timeout)
    raise TypeError(f"comm must be a distributed.World or an mpi4py communicator, got {type(comm).__name__}")


def _abort_on_exception(kind, value, tb) -> None:
    """``sys.excepthook`` of a rank: print the traceback, then end every rank."""
    rank = _world.rank if _world is not None else "?"
    sys.stderr.write(f"attngraph: rank {rank} failed; aborting all ranks\n"
                     + "".join(traceback.format_exception(kind, value, tb)))
    sys.stderr.flush()
    time.sleep(ABORT_GRACE_S)
    _world.abort(1)


@dataclass(frozen=True)
class _Bucket:
    """One fixed buffer, the indices (in the gradient list) of the gradients packed into it and their views of it."""
    buffer: np.ndarray
    members: tuple[int, ...]
    views: tuple[np.ndarray, ...]


class GradientBuckets:
    """Sums gradient lists over the ranks through fixed host buffers.

    The layout is fixed when it is made, from ``like`` (one (shape, dtype) per gradient, None for a parameter
    without one): the gradients in list order, consecutive ones of one dtype packed into a bucket until it holds
    ``bucket_bytes`` (a larger gradient gets a bucket of its own). ``reduce`` copies each bucket's gradients in
    (from the GPU: staged to the host), starts its all-reduce, copies the next while MPI works, and returns the
    sums as views of the buffers, or copies on the gradients' device. It never writes the arrays it is given
    (the executor may share them with constants)."""

    def __init__(self, world: World, like: Sequence[tuple[tuple, np.dtype] | None], bucket_bytes: int = BUCKET_BYTES):
        if not (isinstance(bucket_bytes, int) and bucket_bytes > 0):
            raise ValueError(f"bucket_bytes must be an integer > 0, got {bucket_bytes!r}")
        self.world, self.like, self.bucket_bytes = world, list(like), bucket_bytes
        self.buckets: list[_Bucket] = []
        pending: list[tuple[int, tuple, np.dtype]] = []
        for i, spec in enumerate(self.like):
            if spec is None:
                continue
            shape, dtype = spec
            if pending and (pending[0][2] != dtype or _nbytes(pending + [(i, shape, dtype)]) > bucket_bytes):
                self._add(pending)
                pending = []
            pending.append((i, tuple(shape), np.dtype(dtype)))
        if pending:
            self._add(pending)

    def _add(self, members: list) -> None:
        offsets = np.cumsum([0] + [math.prod(shape) for _, shape, _ in members]).tolist()
        buffer = np.empty(offsets[-1], members[0][2])
        self.buckets.append(_Bucket(buffer, tuple(i for i, _, _ in members),
                                    tuple(buffer[a:b].reshape(shape) for (_, shape, _), a, b in
                                          zip(members, offsets[:-1], offsets[1:]))))

    def layout(self) -> list[list[int]]:
        """The gradient indices of each bucket, in order (for ``check_same`` and tests)."""
        return [list(bucket.members) for bucket in self.buckets]

    def reduce(self, grads: Sequence, what: str) -> list:
        """The sums over the ranks of ``grads`` (laid out as ``like``): each bucket gathered by one
        ``np.concatenate`` into its buffer and summed there in place."""
        if self.world.size == 1:
            return list(grads)
        self._check(grads)
        devices = [None if g is None else backend_of(g) for g in grads]
        requests = []
        for bucket in self.buckets:
            np.concatenate([np.ravel(devices[i].get(grads[i])) for i in bucket.members], out=bucket.buffer)
            requests.append(self.world.comm.Iallreduce(self.world._mpi.IN_PLACE, bucket.buffer, op=self.world._mpi.SUM))
        self.world.wait(requests, f"{what} ({len(self.buckets)} buckets)")
        summed = list(grads)
        for bucket in self.buckets:
            for i, view in zip(bucket.members, bucket.views):
                summed[i] = view if devices[i].name == "cpu" else backend(devices[i].name).put(view)
        return summed

    def _check(self, grads: Sequence) -> None:
        got = [None if g is None else (tuple(g.shape), np.dtype(g.dtype)) for g in grads]
        expected = [None if s is None else (tuple(s[0]), np.dtype(s[1])) for s in self.like]
        if got != expected:
            raise DistributedError(f"gradients {got} do not fit the buckets' layout {expected}")


def _nbytes(members: list) -> int:
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in members)


def broadcast_parameters(world: World, named: Sequence, what: str = "the broadcast of rank 0's parameters") -> None:
    """Give every rank rank 0's values of the parameters ``named`` ((name, Parameter) pairs), through the host."""
    if world.size == 1:
        return
    for name, p in named:
        values = world.broadcast(np.ascontiguousarray(p.numpy()), f"{what} ({name})")
        if world.rank != 0:
            p.assign(values)


def first_time(world: World, done: set, key: str, what: str):
    """``world.rank0_first(what)`` the first time ``key`` is seen (recorded in ``done``), else nothing."""
    if key in done or world.size == 1:
        return nullcontext()
    done.add(key)
    return world.rank0_first(what)
