"""The engine: graph IR, primitives, tracing, autodiff and execution."""
from . import prims  # noqa: F401  (registers every primitive)
from .api import trace, value_and_grad
from .autodiff import grad, gradients
from .debug import debug
from .executor import Executable
from .graph import Graph, Node
from .parameter import Parameter
from .tensor import Tensor
from .tracing import Input, no_grad
