"""The functional API, what ``import attngraph`` exports: ``Tensor`` and the functions of tensor.py (the primitives'
wrappers and the ops composed from them there), with the families composed from those in modules of their own:
convolution, pooling and resampling (convolution.py), einsum and batched products (linalg.py), the losses
(losses.py), the normalizations (norms.py) and the time loop traced as one node (loops.py). Each of these modules imports tensor.py, none of them this one."""
from . import convolution, linalg, loops, losses, norms, tensor
from .convolution import *  # noqa: F403
from .linalg import *  # noqa: F403
from .losses import *  # noqa: F403
from .norms import *  # noqa: F403
from .loops import *  # noqa: F403
from .tensor import *  # noqa: F403
from .tensor import as_node, emit, name  # noqa: F401  (for VJP rules and modules building graphs: F.emit, F.name)

__all__ = [*tensor.__all__, *linalg.__all__, *convolution.__all__, *norms.__all__, *losses.__all__, *loops.__all__]
