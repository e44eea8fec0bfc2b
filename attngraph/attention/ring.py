"""Context parallelism: self-attention over a sequence split across MPI ranks, by ring attention (Liu et al.
2023, "Ring Attention with Blockwise Transformers"), with the zigzag split that balances causal work (Brandon et
al. 2023, "Striped Attention"; rank r holds chunks r and 2W − 1 − r of 2W).

    ring = Ring(distributed.init())                       # or an mpi4py communicator; None: one process
    tokens_here = ring.shard(tokens, axis=1)              # this rank's positions of (B, T) tokens
    model = GPT(vocab, ..., context=ring)                 # its attention layers run ring_attention
    logits = model(tokens_here, positions=ring.positions(T))

Where it lives: the ring is one primitive, ``ring_attention``, whose CPU kernel (``ops/cpu/ring.py``) sends the
keys and values around the ring itself, the communicator being a static attribute of the node; its VJP is a
second primitive walking the ring backward (dK and dV travel with their block). So the gradient is an ordinary
graph, and a model whose attention calls it trains with its sequence split: each rank's loss is over its tokens,
the parameters' gradients summed over the ranks (the data-parallel all-reduce). This module is what users call;
it takes the communicator as an argument and imports nothing from ``attngraph.train``. Every rank must run the
same graph (the same ring calls in the same order). Masks, biases and caches are not split over ranks: ring
attention is causal or full self-attention.
"""
from __future__ import annotations

import math

import numpy as np

from ops.cpu.ring import SPLITS, pieces

from ..core import functional as F
from ..errors import ShapeError


class Ring:
    """The ranks a sequence is split over and how: ``comm`` an ``attngraph.train.distributed.World`` (the ring's
    waits then have its collectives' deadline: ``CollectiveTimeout`` naming the rank and the ring step), an mpi4py
    communicator (waits without a limit) or None for one process; ``split`` "zigzag" (default: causal work
    balanced) or "contiguous"."""

    def __init__(self, comm=None, split: str = "zigzag"):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.comm = comm.communicator if hasattr(comm, "communicator") else comm
        self.split = split
        self.rank, self.size = (0, 1) if self.comm is None else (self.comm.Get_rank(), self.comm.Get_size())

    def __repr__(self) -> str:
        return f"Ring(rank {self.rank} of {self.size}, {self.split})"

    def positions(self, length: int) -> np.ndarray:
        """The positions (int64) of this rank's tokens in a sequence of ``length``, in the order its shard holds them."""
        return np.concatenate([np.arange(a, b) for a, b in pieces(length, self.size, self.split)[self.rank]])

    def shard(self, x: np.ndarray, axis: int = -1) -> np.ndarray:
        """This rank's positions of the NumPy array ``x`` along its sequence ``axis``."""
        return np.take(x, self.positions(x.shape[axis]), axis=axis)

    def __call__(self, q, k, v, causal: bool = False, layout: str = "bhtd"):
        """``ring_attention(q, k, v, self, causal, layout)``: the form ``MultiHeadAttention(context=...)`` calls."""
        return ring_attention(q, k, v, self, causal, layout)


def ring_attention(q, k, v, ring: Ring, causal: bool = False, layout: str = "bhtd"):
    """softmax(q kᵀ / √d) v over the whole sequence for this rank's shard q (..., T, d), k (..., T, d),
    v (..., T, dv) (``layout="bthd"``: (..., T, H, d)); ``causal`` by the tokens' global positions. Equal to
    ``scaled_dot_product_attention`` over the unsplit sequence, shard for shard."""
    d = F.as_node(q).shape[-1]
    if isinstance(d, str):
        raise ShapeError(f"the head dimension must be concrete, not {d}")
    stacked = F.emit("ring_attention", q, k, v, comm=ring.comm, split=ring.split, causal=bool(causal),
                     scale=1 / math.sqrt(d), layout=layout)
    return stacked[..., :-1]
