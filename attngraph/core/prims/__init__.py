"""The primitives, by family. Importing this package registers them all and checks the registry."""
from ..primitive import check_registry
from . import attention, conv, elementwise, fused, linalg, movement, nn, positions, reduce  # noqa: F401  (registration side effects)

check_registry()
