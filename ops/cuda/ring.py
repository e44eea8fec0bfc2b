"""Ring attention on CUDA, staged through host memory (a CUDA-aware MPI is not assumed): the ring of
``ops/cpu/ring.py`` runs on host copies of this rank's shard, sending K/V and dK/dV between ranks from host
buffers and merging the blocks' (o, L) on the host, while each block's kernels (``attention_lse``,
``attention_block_backward`` of ``ops/cuda/attention.py``) run on the GPU, their inputs copied to it and their
outputs back. The primitives' inputs and results are device arrays, as every CUDA kernel's."""
import numpy as np

from ops._cuda import to_device, to_host
from ops.cpu.ring import kernel_table
from ops.cuda import attention


def staged(kernel):
    """``kernel`` (device arrays in, device arrays out) called on host arrays: its array arguments copied to the
    GPU, its result (an array or a tuple of them) copied back."""
    def run(*args):
        result = kernel(*(to_device(a) if isinstance(a, np.ndarray) else a for a in args))
        return tuple(map(to_host, result)) if isinstance(result, tuple) else to_host(result)
    return run


BLOCKS = (staged(attention.attention_lse), staged(attention.attention_block_backward))
KERNELS = kernel_table(BLOCKS, to_host, to_device)
