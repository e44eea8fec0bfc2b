"""SciPy's BLAS for numba, loaded without running ``scipy.linalg``'s ``__init__``.

Numba calls BLAS (``np.dot`` in a kernel) through the function pointers that the extension module
``scipy.linalg.cython_blas`` exports, and its registry imports that module the first time a process compiles or
loads any kernel, whether it multiplies or not. The usual import runs the package ``scipy.linalg`` first: 0.12 s of
modules (decompositions, array-API shims) that no kernel uses, a tenth of a warm process's first training step.

``load()`` makes ``scipy.linalg`` a lazy module (``importlib.util.LazyLoader``, run in full on the first access to
one of its attributes, as an ``import scipy.linalg`` followed by any use of it) and loads the one extension under its
own name, set as the package's attribute as an import would. Nothing is done where SciPy is absent or already
imported, or where the extension cannot be found: numba then imports it as before.
Python 3.11's lazy modules take no lock (3.12's do): two threads touching ``scipy.linalg`` for the first time at once
could see it half run, as with any module ``LazyLoader`` defers.
"""
import importlib.machinery
import importlib.util
import sys

PACKAGE, MODULE = "scipy.linalg", "cython_blas"


def load() -> None:
    if PACKAGE in sys.modules or importlib.util.find_spec("scipy") is None:
        return
    package = importlib.util.find_spec(PACKAGE)
    blas = package and importlib.machinery.PathFinder.find_spec(f"{PACKAGE}.{MODULE}",
                                                               package.submodule_search_locations)
    if blas is None:
        return
    try:
        extension = importlib.util.module_from_spec(blas)
        blas.loader.exec_module(extension)
    except ImportError:
        return
    package.loader = importlib.util.LazyLoader(package.loader)
    lazy = importlib.util.module_from_spec(package)
    package.loader.exec_module(lazy)
    sys.modules[PACKAGE], sys.modules[blas.name] = lazy, extension
    setattr(lazy, MODULE, extension)
    setattr(sys.modules["scipy"], PACKAGE.rpartition(".")[2], lazy)
