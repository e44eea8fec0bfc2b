"""attngraph: build, see and train attention models as explicit computation graphs.

    import attngraph as ag
    graph = ag.trace(model, x=ag.Input(("B", "T", 64)))
    y = graph.compile("cpu")(x=...)
"""
import ops  # noqa: F401  (first: it sets the BLAS threads' environment before NumPy loads its OpenBLAS)

from . import attention, nn
from .core import (Executable, Graph, Input, Node, Parameter, Tensor, debug, grad, gradients, no_grad, trace,
                   value_and_grad)
from .core.functional import (abs, arange, astype, broadcast_to, clip, concat, cos, cross_entropy, dropout, embedding,
                              equal, erf, exp, expand_dims, gelu, greater, greater_equal, layer_norm, less, less_equal,
                              log, log_softmax, logical_and, logical_not, logical_or, logsumexp, matmul, max, maximum,
                              mean, min, minimum, moveaxis, neg, not_equal, relative_distance, relu, reshape, rsqrt,
                              scaled_dot_product_attention, sigmoid, silu, sin, softmax, split, sqrt, stop_gradient,
                              sum, swapaxes, take, tanh, transpose, where, zeros_like)
from .core.functional import add, div, mul, pow, sub
from .core.functional import (argmax, argmin, cumsum, flatten, nll_loss, one_hot, sort, squeeze, stack, std, topk,
                              tril, triu, unsqueeze, var)
from .core.functional import avg_pool1d, avg_pool2d, conv1d, conv2d, max_pool1d, max_pool2d
from .errors import (AttnGraphError, BindingError, CheckpointError, DataError, DeviceError, DTypeError,
                     NonFiniteError, ShapeError, TracingError)
from .nn import Module

__version__ = "0.1.0"
