"""The peers the benchmarks time attngraph against, None where not installed (PyTorch and JAX are optional: the
pyproject's ``bench`` extra)."""
try:
    from . import torch_reference as tr
except ImportError:
    tr = None
try:
    from . import jax_reference as jr
except ImportError:
    jr = None
