"""CUDA kernels by primitive name, called as the primitives' CPU kernels are (the ``cpu=`` functions in
attngraph/core/prims): device arrays in, a new device array (or a view) out, attributes as keyword arguments.

attngraph's executor attaches them to the primitives (``add_kernel(name, "cuda", kernel)``) when the first
"cuda" executable is built, so that importing attngraph never imports numba.cuda. A primitive missing here
has no CUDA kernel: compiling a graph that uses it for "cuda" raises DeviceError naming it.
"""
from ops.cpu.attention import kernel_args
from ops.cuda import attention, embedding, fused, gelu, movement, positions, scan, sort
from ops.cuda import conv as cv
from ops.cuda import cross_entropy as xent
from ops.cuda import dropout as drop
from ops.cuda import elementwise as ew
from ops.cuda import layer_norm as ln
from ops.cuda import matmul as mm
from ops.cuda import reduce as red
from ops.cuda import softmax as sm
from ops.cuda.layout import flat, rows


def _biased(x, bias):
    """x + bias, the bias that the fusion pass moves into GELU (optional)."""
    return x if bias is None else ew.add(x, bias)


_ELEMENTWISE = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "exp", "log", "sqrt", "tanh", "sigmoid",
                "relu", "erf", "abs", "sin", "cos", "rsqrt", "silu", "clip", "where", "equal", "not_equal", "less",
                "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_not", "astype")
_CONV = ("conv2d", "conv2d_input_grad", "conv2d_weight_grad", "max_pool2d", "max_pool2d_grad", "avg_pool2d",
         "avg_pool2d_grad")
_MOVEMENT = ("reshape", "transpose", "broadcast_to", "getitem", "scatter_slice", "concat", "stop_gradient")

KERNELS = {
    **{name: getattr(ew, name) for name in _ELEMENTWISE},
    "fused": fused.fused,
    "gelu": lambda x, bias=None, *, approximate: (ew.gelu_tanh if approximate == "tanh" else ew.gelu_erf)(
        _biased(x, bias)),
    "gelu_grad": lambda g, x, bias=None, *, approximate: gelu.gelu_backward(g, _biased(x, bias),
                                                                           exact=approximate != "tanh"),
    **{name: getattr(movement, name) for name in _MOVEMENT},
    "gather": embedding.gather,
    "scatter_add": embedding.scatter_add,
    "matmul": mm.matmul,
    "sum": red.sum,
    "max": red.max,
    "min": red.min,
    "logsumexp": red.logsumexp,
    "argmax": lambda x: sort.arg_extreme(x, True),
    "argmin": lambda x: sort.arg_extreme(x, False),
    "argsort": sort.argsort,
    "cumsum": scan.cumsum,
    "size": positions.size,
    "arange": positions.arange,
    "relative_distance": positions.relative_distance,
    "softmax": lambda x, mask=None, *, causal: sm.softmax(x, mask, causal),
    "softmax_grad": sm.softmax_backward,
    "log_softmax": lambda x, mask=None, *, causal: sm.log_softmax(x, mask, causal),
    "log_softmax_grad": lambda g, y, mask=None, *, causal: sm.log_softmax_backward(g, y, mask, causal),
    "layer_norm": ln.layer_norm,
    "layer_norm_grad": ln.layer_norm_backward,
    "layer_norm_params_grad": ln.layer_norm_params_backward,
    "cross_entropy": lambda logits, targets, ignore_index: xent.cross_entropy(
        rows(logits), flat(targets), ignore_index),
    "cross_entropy_grad": lambda g, logits, targets, ignore_index: xent.cross_entropy_backward(
        g, rows(logits), flat(targets), ignore_index).reshape(logits.shape),
    "dropout": lambda x, seed, p, key: drop.dropout(x, p, seed, key),
    **{name: getattr(cv, name) for name in _CONV},
    "attention": lambda q, k, v, *extra, causal, scale: attention.attention(
        q, k, v, *kernel_args(extra, causal, scale)),
    "attention_grad": lambda g, o, q, k, v, *extra, causal, scale: attention.attention_backward(
        g, o, q, k, v, *kernel_args(extra, causal, scale)),
    "attention_bias_grad": lambda g, o, q, k, v, *extra, causal, scale: attention.attention_bias_backward(
        g, o, q, k, v, *kernel_args(extra, causal, scale)),
}
