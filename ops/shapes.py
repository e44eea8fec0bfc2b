"""The shape contracts that graphs, exporters and every device's kernels share, in no device's file: the attention
primitives' layouts, sequence lengths, score shape and optional inputs, and the output sizes of convolutions and
pooling."""
import numpy as np


def extras(extra) -> tuple:
    """(mask, bias) among the optional inputs of the ``attention`` primitives after q, k, v (graph nodes or
    arrays): the boolean one is the mask, the floating one the bias; None for one that is absent."""
    mask = [x for x in extra if x.dtype == np.bool_]
    bias = [x for x in extra if x.dtype != np.bool_]
    return (mask or [None])[0], (bias or [None])[0]


LAYOUTS = ("bhtd", "bthd")


def heads_swap(rank: int) -> tuple:
    """The permutation between the layouts: (..., T, H, f) ↔ (..., H, T, f)."""
    return tuple(range(rank - 3)) + (rank - 2, rank - 3, rank - 1)


def lengths(q_shape, k_shape, layout: str) -> tuple:
    """(Tq, Tk) of q (..., Tq, d) and k (..., Tk, d), or of q (..., Tq, H, d) and k (..., Tk, H, d) ("bthd")."""
    axis = -2 if layout == "bhtd" else -3
    return q_shape[axis], k_shape[axis]


def scores_shape(q_shape, k_shape, layout: str) -> tuple:
    """The shape of the scores, which a mask and a bias broadcast to: (..., Tq, Tk), or (..., H, Tq, Tk)."""
    tq, tk = lengths(q_shape, k_shape, layout)
    return q_shape[:-1] + (tk,) if layout == "bhtd" else q_shape[:-3] + (q_shape[-2], tq, tk)


def output_size(size, kernel, stride, pad_before, pad_after, dilation, ceil_mode=False):
    """The number of positions of a dilated kernel along an axis of ``size`` padded on both sides, as PyTorch counts
    them: (size + before + after − dilation·(kernel − 1) − 1) / stride + 1, rounded down, or with ``ceil_mode`` up
    while the last window still starts inside the input or its left padding."""
    span = size + pad_before + pad_after - dilation * (kernel - 1) - 1
    count = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    return count - 1 if ceil_mode and (count - 1) * stride >= size + pad_before else count


def transposed_size(size, kernel, stride, pad_before, pad_after, dilation, output_padding):
    """The length of a transposed convolution's output along an axis: the input that a convolution with these
    arguments maps to ``size`` positions, (size − 1)·stride − before − after + dilation·(kernel − 1) + 1, and
    ``output_padding`` more (which of the ``stride`` such inputs)."""
    return (size - 1) * stride - pad_before - pad_after + dilation * (kernel - 1) + 1 + output_padding
