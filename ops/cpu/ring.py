"""Ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers"): self-attention over a sequence
split across the ranks of a communicator, each rank holding its queries, keys and values, the keys and values
passing from rank to rank around the ring while each rank attends its queries to the block it holds.

Rank r holds the tokens of its *pieces*, contiguous ranges of the T positions: with ``split="contiguous"`` the
r-th of W nearly equal ranges; with ``split="zigzag"`` the r-th and (2W − 1 − r)-th of 2W ranges, so that under a
causal mask every rank has the same work (Brandon et al. 2023, "Striped Attention", and the zigzag layout of
ring-flash-attention). ``pieces`` gives them; the ranges' lengths differ by at most one when W does not divide T.

Forward, at step s = 0 … W − 1 rank r holds the keys and values of rank (r − s) mod W and, for each of its query
pieces against each of that block's key pieces, runs the fused kernel (``attention_lse``): a key piece wholly in
the queries' past is attended in full, the same piece causally (its diagonal), one in the future is skipped
(only with ``causal``; without it every pair is full). The blocks' outputs merge exactly by their rows'
log-sum-exp (``merge``): o = Σ_b exp(L_b − L) o_b, L = log Σ_b exp(L_b). While a block is computed the next one
is already on its way (Isend / Irecv before the kernels, waited for after them).

Backward (FlashAttention-2's, per block): D = rowsum(dO ∘ O) − dL with the final L, then the same walk around the
ring, each block's dK and dV travelling with it and summing every rank's share; after the last step they take
one more hop home. ``attention_block_backward`` recomputes each block's probabilities from the global L.

The communicator is duck-typed on mpi4py's: ``Get_rank``, ``Get_size``, ``allgather`` (the ranks' lengths,
once per call) and ``Isend`` / ``Irecv`` of NumPy buffers returning requests with ``Wait``; when it also has
``wait(requests, what)`` the ring waits for its messages through it (attngraph's ``World.communicator``: a
deadline, past which it raises naming the rank and the ring step), else on each request's ``Wait``, without a
limit. Every rank must make the same calls in the same order, as the one compiled graph on each rank does; None is
one process. The ring works on host (NumPy) arrays; on CUDA (``ops/cuda/ring.py``) the same ring runs the
CUDA block kernels through host memory (``kernel_table``).
"""
import math

import numpy as np

from ops.cpu.attention import attention_block_backward, attention_lse
from ops.shapes import LAYOUTS

SPLITS = ("contiguous", "zigzag")
GRADIENTS = "backward (dK, dV)"         # the travelling gradients' messages and buffers
BLOCKS = (attention_lse, attention_block_backward)      # one block's kernels, forward and backward, on host arrays


def pieces(length: int, size: int, split: str = "contiguous") -> list[list[tuple[int, int]]]:
    """Each rank's ranges [start, stop) of the positions 0 … length − 1, in the order its shard holds them."""
    if split not in SPLITS:
        raise ValueError(f"ring attention's split must be one of {SPLITS}, got {split!r}")
    parts = size if split == "contiguous" else 2 * size
    ends = np.cumsum([0] + [length // parts + (i < length % parts) for i in range(parts)]).tolist()
    ranges = list(zip(ends[:-1], ends[1:]))
    return [[ranges[r]] if split == "contiguous" else [ranges[r], ranges[parts - 1 - r]] for r in range(size)]


def merge(o, lse, o_block, lse_block):
    """The attention of queries over two sets of keys, (o, L), from each set's (o, L), written into o and L (and
    returned): exact, and 0 with L = −inf for a row that sees no key in either. o_block is overwritten; the only
    temporaries are rows of L."""
    total = np.logaddexp(lse, lse_block)
    shift = np.where(np.isfinite(total), total, 0)
    o *= np.exp(lse - shift)[..., None]
    o_block *= np.exp(lse_block - shift)[..., None]
    o += o_block
    lse[...] = total
    return o, lse


def ring_attention(q, k, v, comm, causal=False, scale=None, layout="bhtd", split="contiguous", blocks=BLOCKS):
    """(o, L) of this rank's queries q over the keys k and values v of every rank (see the module's docstring);
    q, k, v are this rank's shard (the same positions for the three), in ``attention``'s layouts, host arrays;
    ``blocks`` the block kernels (``BLOCKS``)."""
    ring = _Ring(comm, q, k, layout, split)
    o = np.zeros(q.shape[:-1] + v.shape[-1:], q.dtype)
    lse = np.full(q.shape[:-1], -np.inf, q.dtype)
    for step, (k_block, v_block) in ring.travel((k, v), "forward"):
        for rows, keys, diagonal in ring.pairs(step, causal):
            merge(o[rows], lse[rows], *blocks[0](q[rows], k_block[keys], v_block[keys], None, diagonal, scale,
                                                     None, layout))
    return o, lse


def ring_attention_backward(g, o, lse, q, k, v, comm, causal=False, scale=None, layout="bhtd", split="contiguous",
                            g_lse=None, blocks=BLOCKS):
    """(dq, dk, dv) of this rank's shard for the output gradient g (and ``g_lse`` reaching L, if any), from
    ``ring_attention``'s (o, L)."""
    ring = _Ring(comm, q, k, layout, split)
    delta = np.einsum("...f,...f->...", g, o) - (0 if g_lse is None else g_lse)
    dq = np.zeros_like(q)
    grads = ring.buffers((k, v), ring.rank, GRADIENTS, 0)
    for array in grads:
        array[...] = 0
    for step, (k_block, v_block) in ring.travel((k, v), "backward"):
        for rows, keys, diagonal in ring.pairs(step, causal):
            parts = blocks[1](g[rows], q[rows], k_block[keys], v_block[keys], lse[rows],
                                             delta[rows], None, diagonal, scale, None, layout)
            for total, part in zip((dq[rows], grads[0][keys], grads[1][keys]),
                                   unstack(parts, q[rows], k_block[keys], v_block[keys], layout)):
                total += part
        if ring.size > 1:
            grads = ring.pass_on(grads, step, GRADIENTS)
    return (dq,) + grads


def unstack(grads, q, k, v, layout="bhtd"):
    """dq, dk, dv: views of the stacked gradients of ``attention_backward`` for q, k, v."""
    heads = () if layout == "bhtd" else (slice(None),)
    return tuple(grads[(i, Ellipsis, slice(0, x.shape[-2 if layout == "bhtd" else -3])) + heads +
                       (slice(0, x.shape[-1]),)] for i, x in enumerate((q, k, v)))


class _Ring:
    """One call's ring: this rank, its neighbours and every rank's pieces (checked against the lengths held)."""

    def __init__(self, comm, q, k, layout, split):
        if layout not in LAYOUTS:
            raise ValueError(f"attention layout must be one of {LAYOUTS}, got {layout!r}")
        self.comm, self.layout = comm, layout
        self._buffers, self._tags = {}, {}
        self.rank, self.size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
        self.axis = q.ndim - (2 if layout == "bhtd" else 3)
        self.lead = q.shape[:self.axis]
        if q.shape[self.axis] != k.shape[self.axis]:
            raise ValueError(f"ring attention is self-attention: this rank's queries and keys must be the same "
                             f"positions, got {q.shape[self.axis]} queries and {k.shape[self.axis]} keys")
        self.lengths = [q.shape[self.axis]] if comm is None else comm.allgather(q.shape[self.axis])
        self.pieces = pieces(sum(self.lengths), self.size, split)
        for r, (held, ranges) in enumerate(zip(self.lengths, self.pieces)):
            if held != sum(b - a for a, b in ranges):
                raise ValueError(f"rank {r} holds {held} of the {sum(self.lengths)} positions, but a {split} split "
                                 f"over {self.size} ranks gives it {sum(b - a for a, b in ranges)}: shard the "
                                 "sequence with attngraph.attention.Ring(comm, split).shard")

    def pairs(self, step: int, causal: bool):
        """(query rows, key rows, diagonal) indices of this rank's queries against the block of rank
        (rank − step) mod size: whole shards without ``causal``; else each pair of pieces not in the future; each
        for one index of the axes before the positions' (a (batch, head) pair, or a batch entry for "bthd"), so that
        the kernels read C-contiguous slices in place and their outputs, the only temporaries, are one such
        slice's (measured in benchmarks/MEASUREMENTS.md)."""
        owner = (self.rank - step) % self.size
        if not causal:
            ranges = [((0, self.lengths[self.rank]), (0, self.lengths[owner]), False)]
        else:
            ranges = [((q0, q0 + qb - qa), (k0, k0 + kb - ka), ka == qa)
                      for (qa, qb), q0 in _local(self.pieces[self.rank]) for (ka, kb), k0 in _local(self.pieces[owner])
                      if qb > qa and kb > ka and ka <= qa]
        for lead in np.ndindex(self.lead):
            for queries, keys, diagonal in ranges:
                yield lead + (slice(*queries),), lead + (slice(*keys),), diagonal

    def travel(self, arrays, what: str):
        """Yield (step, block) for step = 0 … size − 1, the block being rank (rank − step) mod size's: ``arrays``
        first, then each received from the previous rank while the one before is used (sent on before its
        kernels run, waited for after them). Blocks land in two sets of buffers used in turn: a set is written
        again only once the block sent from it has gone."""
        block = arrays
        for step in range(self.size):
            arriving = self._exchange(block, step, what, step % 2) if step < self.size - 1 else None
            yield step, block
            block = arriving() if arriving else block

    def pass_on(self, arrays, step: int, what: str):
        """Send ``arrays`` (the gradients of rank (rank − step) mod size's block) to the next rank and return the
        previous rank's, received into the other of two sets of buffers (``buffers``, slot (step + 1) mod 2)."""
        return self._exchange(arrays, step, what, (step + 1) % 2)()

    def buffers(self, like, owner: int, what: str, slot: int):
        """Arrays shaped as ``like``'s with ``owner``'s length, in the buffer set (what, slot): allocated once per
        call at the longest shard's length, reused as C-contiguous views of their first elements."""
        views = []
        for i, a in enumerate(like):
            shape = self._shape_of(a, self.lengths[owner])
            key = (what, slot, i)
            if key not in self._buffers:
                self._buffers[key] = np.empty(math.prod(self._shape_of(a, max(self.lengths))), a.dtype)
            views.append(self._buffers[key][:math.prod(shape)].reshape(shape))
        return tuple(views)

    def _exchange(self, arrays, step: int, what: str, slot: int):
        """Send ``arrays`` (the block of rank (rank − step) mod size) to the next rank and receive the previous
        rank's into the buffer set (what, slot); returns the function that waits for them and returns them."""
        received = self.buffers(arrays, (self.rank - step - 1) % self.size, what, slot)
        sent = [np.ascontiguousarray(a) for a in arrays]
        tag = self._tags.setdefault(what, 2 * len(self._tags))
        requests = [self.comm.Irecv(buffer, (self.rank - 1) % self.size, tag + i) for i, buffer in enumerate(received)]
        requests += [self.comm.Isend(buffer, (self.rank + 1) % self.size, tag + i) for i, buffer in enumerate(sent)]

        def wait():
            self.wait(requests, f"ring attention's {what}, ring step {step + 1} of {self.size} (the block from rank "
                                f"{(self.rank - 1) % self.size})")
            return received
        return wait

    def wait(self, requests, what: str) -> None:
        """The communicator's ``wait`` (a deadline) where it has one, else each request's ``Wait``."""
        if hasattr(self.comm, "wait"):
            self.comm.wait(requests, what)
            return
        for request in requests:
            request.Wait()

    def _shape_of(self, a, length: int):
        return a.shape[:self.axis] + (length,) + a.shape[self.axis + 1:]


def _local(ranges):
    """Each range with where it starts in the shard that holds the ranges one after another."""
    starts = np.cumsum([0] + [b - a for a, b in ranges]).tolist()
    return zip(ranges, starts)


def _stacked(dq, dk, dv, layout):
    """dq, dk, dv of one length stacked as ``attention_backward``'s (3, ..., T, [H,] max(d, dv)), zero-padded."""
    width = max(dq.shape[-1], dv.shape[-1])
    grads = np.zeros((3,) + dq.shape[:-1] + (width,), dq.dtype)
    for i, x in enumerate((dq, dk, dv)):
        grads[i, ..., :x.shape[-1]] = x
    return grads


def kernel_table(blocks=BLOCKS, to_host=np.asarray, to_device=np.asarray) -> dict:
    """The primitives' kernels running the ring with the block kernels ``blocks``, their array arguments taken to
    the host by ``to_host`` and their result given back by ``to_device`` (ops/cuda/ring.py: staged through host
    memory). ``ring_attention``: o and L stacked on the features, (..., T, [H,] dv + 1); ``ring_attention_grad``:
    dq, dk, dv stacked, from the stacked output y and its gradient g."""
    def forward(q, k, v, *, comm, split, causal, scale, layout):
        o, lse = ring_attention(*map(to_host, (q, k, v)), comm, causal, scale, layout, split, blocks)
        return to_device(np.concatenate([o, lse[..., None]], axis=-1))

    def backward(g, y, q, k, v, *, comm, split, causal, scale, layout):
        g, y, q, k, v = map(to_host, (g, y, q, k, v))
        grads = ring_attention_backward(g[..., :-1], y[..., :-1], y[..., -1], q, k, v, comm, causal, scale, layout,
                                        split, g[..., -1], blocks)
        return to_device(_stacked(*grads, layout))
    return {"ring_attention": forward, "ring_attention_grad": backward}


KERNELS = kernel_table()
