"""The primitives, by family. Importing this package registers them all and checks the registry."""
from ..primitive import check_registry
from . import attention, conv, elementwise, fused, linalg, movement, nn, positions, reduce, scan, sort  # noqa: F401

check_registry()
