"""Running sums along the last axis (``functional`` moves any other axis last): ``cumsum``, from the first
element or, ``reverse``, from the last. Floats keep their dtype; bool and integers are summed in int64, as
torch.cumsum. The gradient of a running sum is the running sum of the gradient in the other direction:
∂L/∂x_i = Σ_{j ≥ i} ∂L/∂y_j."""
from math import prod

import numpy as np


from .. import functional as F
from ..primitive import define


def cumsum_rule(x, reverse):
    if not x.shape:
        raise ValueError("a running sum takes at least one axis")
    return x.shape, x.dtype if x.dtype.kind == "f" else np.dtype(np.int64)


define("cumsum", cumsum_rule, flops=lambda out, x, reverse: prod(x),
       vjp=lambda g, y, x, reverse: (F.emit("cumsum", g, reverse=not reverse),))
