"""attngraph: build, see and train attention models as explicit computation graphs.

    import attngraph as ag
    graph = ag.trace(model, x=ag.Input(("B", "T", 64)))
    y = graph.compile("cpu")(x=...)
"""
import ops  # noqa: F401  (first: it sets the BLAS threads' environment before NumPy loads its OpenBLAS)

from . import attention, export, inspect, nn, render  # noqa: F401  (export, inspect and render give Graph its methods)
from .render import html  # noqa: F401  (Graph.to_html; ~1 ms)
from .core import (Executable, Graph, Input, Node, Parameter, debug, grad, gradients, no_grad, trace,
                   value_and_grad)
from .core.functional import *  # noqa: F403  (the functional API, as its __all__ lists it)
from .core.additive import additive_scores
from .core.sdpa import scaled_dot_product_attention
from .errors import (AttnGraphError, BindingError, CheckpointError, DataError, DeviceError, DTypeError, ExportError,
                     NonFiniteError, RenderError, ShapeError, TracingError)
from .nn import Module
from .version import __version__
