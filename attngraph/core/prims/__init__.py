"""The primitives, one module per family: importing this package imports each of them, which registers its
primitives (core/primitive.py)."""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
