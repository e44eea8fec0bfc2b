"""A Backend: one device's kernels, by primitive name, and where that device's arrays live.

Each kernel module of a device package (``ops/cpu``, ``ops/cuda``) lists what it provides in a ``KERNELS``
table: a primitive's name to the function that computes it on that device, called as ``kernel(*inputs,
**attrs)`` with the node's input arrays and attributes, returning a new array (or a view). The optimizers'
updates are in the same tables, by name (``"adam"``), called as ops/cpu/optim.py documents. The package's
Backend is the union of its modules' tables: adding an op to a device is adding its kernel to its family's
module, and nothing else.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Callable, Mapping


@dataclass(frozen=True)
class Backend:
    """``put(a)`` moves an array here (returned as it is when it is here already), ``get(a)`` returns it as a
    NumPy array, ``owns(a)`` tells whether ``a`` lives here, ``zeros_like(a)`` allocates here. ``views``: kernels
    returning a strided view where the op's kernel in ``kernels`` copies to a contiguous array, which the executor
    calls where every reader of the result is an op of ``reads_views``, whose kernels read views as fast as copies
    (a column slice that only products and concatenations read is not copied). ``costless``: ops whose kernel
    returns a view of a C-contiguous input (a reshape): the executor folds them, and the views of ``views``, into
    the steps that read them (attngraph/core/folding.py). ``together(first, second, split,
    *args)`` runs ``first(*args[:split])`` and ``second(*args[split:])`` at the same time and returns both results,
    for independent nodes of the ops in ``concurrent`` (attngraph/core/together.py)."""
    name: str
    kernels: Mapping[str, Callable]
    put: Callable
    get: Callable
    owns: Callable[[object], bool]
    zeros_like: Callable
    views: Mapping[str, Callable] = field(default_factory=lambda: MappingProxyType({}))
    reads_views: frozenset[str] = frozenset()
    costless: frozenset[str] = frozenset()
    concurrent: frozenset[str] = frozenset()
    together: Callable | None = None


def kernel_table(package: ModuleType) -> Mapping[str, Callable]:
    """The union of the ``KERNELS`` tables of ``package``'s modules, each name given by one module only."""
    table: dict[str, Callable] = {}
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, kernel in getattr(module, "KERNELS", {}).items():
            if name in table:
                raise RuntimeError(f"kernel {name!r} is given by both {owner[name]} and {module.__name__}")
            table[name], owner[name] = kernel, module.__name__
    return MappingProxyType(table)


class Unavailable(RuntimeError):
    """A device that cannot run here; the message says what is missing and how to get it."""
