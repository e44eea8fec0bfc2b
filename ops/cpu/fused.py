"""Elementwise ops fused into one kernel generated from a program: one pass over the output, no intermediates.

A program is a tuple of instructions ``(op, args, dtype)``: ``op`` names a scalar function of
``ops/cpu/elementwise.py`` (or is ``"astype"``, a conversion alone); ``args`` index the kernel's inputs
(0 … n−1), then the results of the instructions before (n, n+1, …); ``dtype`` names the NumPy dtype its result
is converted to, the dtype the unfused op gives (int32 arithmetic stays int32). The last instruction is the
output. ``((("add", (0, 1), "float32"), ("tanh", (2,), "float32"), ("mul", (3, 1), "float32"))`` becomes::

    def fused(x0, x1):
        v2 = float32(add(x0, x1))
        v3 = float32(tanh(v2))
        return float32(mul(v3, x1))

``scalar_source`` writes that function, the one definition each device compiles (ops/cuda/fused.py with CUDA's
scalar functions). On the CPU it is inlined (``inline="always"``, at numba's IR level) into a loop nest over the
output's axes, so that a kernel is one compile rather than two; the scalar functions it calls stay compiled apart,
once per process and dtypes, shared by all the kernels (inlined as well, sixteen exps in one kernel set off
numba's SSA checks' warnings). ``reads[i]`` gives, for each axis of input i, the output axis whose index it
takes, or −1 where the input has size 1 and is broadcast (index 0). For x0 (B, T, D) and x1 (D,), reads
((0, 1, 2), (2,))::

    for i0 in prange(out.shape[0]):
        for i1 in range(out.shape[1]):
            for i2 in range(out.shape[2]):
                out[i0, i1, i2] = fused(x0[i0, i1, i2], x1[i2])

compiled as a serial and a parallel twin (``threads.parallel_kernel``) without fast-math flags, so that the
result is that of the unfused ops bit for bit. The inner loop vectorizes where the scalar code does (sums and
products; the exponentials of ``mathfn`` need fast-math flags to). Unlike NumPy's ufunc loops the kernel raises
no floating-point warnings (debug mode runs the graph unfused and names the first non-finite node).

Compiled kernels are kept per (program, reads, dtypes) for the process, and on disk: the source goes to a file
named by its hash, which names the definitions it calls too (a hash of elementwise.py and mathfn.py), and numba
caches the compiled code beside it. The folder is ``$ATTNGRAPH_KERNELS`` if set, else ``fused/`` in this
package's ``__pycache__`` (which ops/cpu/__init__.py clears when mathfn.py changes), else one in the temporary
directory.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
from numba import njit

from ops.cpu import elementwise
from ops.cpu.threads import parallel_kernel, renamed

MAX_INPUTS = 16          # arguments of one generated kernel; the fusion pass stops a group there


def scalar_source(program: tuple, inputs: int) -> str:
    """The source of ``fused(x0, …)``, the program as one scalar function (see the module docstring)."""
    lines = [f"def fused({', '.join(f'x{i}' for i in range(inputs))}):"]
    name = [f"x{i}" for i in range(inputs)]
    for k, (op, args, dtype) in enumerate(program):
        call = name[args[0]] if op == "astype" else f"{op}({', '.join(name[a] for a in args)})"
        name.append(f"v{inputs + k}")
        lines.append(f"    {name[-1]} = {_scalar_type(dtype)}({call})")
    lines[-1] = f"    return {lines[-1].split(' = ', 1)[1]}"
    return "\n".join(lines) + "\n"


def _scalar_type(dtype: str) -> str:
    """The NumPy scalar type that converts to ``dtype`` in compiled code (bool_ for bool)."""
    return "bool_" if dtype == "bool" else dtype


def conversions(program: tuple) -> dict:
    """The NumPy scalar types ``scalar_source`` names for the program's dtypes, by name."""
    return {name: getattr(np, name) for name in sorted({_scalar_type(dtype) for _, _, dtype in program})}


def ops_of(program: tuple) -> list[str]:
    """The scalar functions the program calls, in order of first use."""
    return list(dict.fromkeys(op for op, _, _ in program if op != "astype"))


class Fused:
    """``fused(*xs, program=, reads=, views=, shape=)``: the program's output, of ``shape``, for the inputs ``xs``,
    each read through its view (``xs[i][views[i]]``) where it has one. The executor asks ``for_dtypes`` once per
    node instead. A view is copied to a C-contiguous array first: numba types a strided view as layout "A", whose
    loops do not vectorize, so that the copy and a vectorized loop cost less than the strided loop."""

    def __call__(self, *xs, **attrs):
        return self.for_dtypes(*(np.asarray(x).dtype for x in xs), **attrs)(*map(np.asarray, xs), **attrs)

    @staticmethod
    def for_dtypes(*dtypes, program: tuple, reads: tuple, views: tuple, shape: tuple, **_):
        """The kernel for inputs of these dtypes, compiled if new: a function of the inputs and ``shape``."""
        kernel = _compiled(program, reads, tuple(np.dtype(d).name for d in dtypes), len(shape))
        result = np.dtype(program[-1][2])

        def run(*xs, shape, **_):
            out = np.empty(shape, result)
            kernel(out, *xs)
            return out

        def run_views(*xs, shape, **_):
            return run(*(x if view is None else np.require(x[view], requirements="C") for x, view in zip(xs, views)),
                       shape=shape)
        return run if all(view is None for view in views) else run_views


fused = Fused()


@functools.cache
def _compiled(program: tuple, reads: tuple, dtypes: tuple, rank: int):
    """The program's loop nest over an output of ``rank`` axes, loaded from the file its source is kept in."""
    module = load_source(_module_source(program, reads, dtypes, rank))
    if rank == 0:
        return njit(cache=True, error_model="numpy")(module.kernel)
    return parallel_kernel(error_model="numpy")(module.kernel)


def _module_source(program: tuple, reads: tuple, dtypes: tuple, rank: int) -> str:
    index = [f"i{axis}" for axis in range(rank)]
    scalars = [f"    s{i} = x{i}[()]" for i, r in enumerate(reads) if not r]     # read once, outside the loops
    loads = ", ".join(f"x{i}[{', '.join(index[a] if a >= 0 else '0' for a in r)}]" if r else f"s{i}"
                      for i, r in enumerate(reads))
    loops = [f"{'    ' * (a + 1)}for i{a} in {'prange' if a == 0 else 'range'}(out.shape[{a}]):" for a in range(rank)]
    header = f"# Generated by ops/cpu/fused.py for dtypes {', '.join(dtypes)}; definitions {_definitions_digest()}."
    return "\n".join([
        header,
        "from numba import njit, prange",
        "from numpy import " + ", ".join(conversions(program)),
        "from ops.cpu.fused import SCALAR",
        *(f"{op} = SCALAR['{op}']" for op in ops_of(program)),
        "",
        "",
        '@njit(inline="always")',
        scalar_source(program, len(reads)),
        "",
        f"def kernel(out, {', '.join(f'x{i}' for i in range(len(reads)))}):",
        *scalars,
        *loops,
        f"{'    ' * (rank + 1)}out[{', '.join(index) or '()'}] = fused({loads})",
        "",
    ])


@functools.cache
def _definitions_digest() -> str:
    folder = Path(__file__).parent
    return hashlib.sha256(b"".join((folder / name).read_bytes() for name in ("elementwise.py", "mathfn.py"))
                          ).hexdigest()[:16]


def load_source(source: str):
    """Import ``source`` from the file named by its hash in the kernel folder (written if new, atomically)."""
    name = "attngraph_fused_" + hashlib.sha256(source.encode()).hexdigest()[:20]
    path = _folder() / f"{name}.py"
    if not path.is_file() or path.read_text() != source:
        temporary = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.write_text(source)
        os.replace(temporary, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def _folder() -> Path:
    """Where the generated sources (and numba's cache of them) live: the first writable of $ATTNGRAPH_KERNELS,
    this package's __pycache__/fused and the temporary directory."""
    candidates = [Path(os.environ["ATTNGRAPH_KERNELS"])] if os.environ.get("ATTNGRAPH_KERNELS") else []
    candidates += [Path(__file__).parent / "__pycache__" / "fused",
                   Path(tempfile.gettempdir()) / f"attngraph-kernels-{os.getuid() if hasattr(os, 'getuid') else 0}"]
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".probe.{os.getpid()}"
            probe.write_text("")
            probe.unlink()
            return folder
        except OSError:
            continue
    raise OSError(f"no writable folder for generated kernels among {', '.join(map(str, candidates))}; "
                  "set ATTNGRAPH_KERNELS to one")


class _Scalars(dict):
    """Op name -> the scalar function of ops/cpu/elementwise.py compiled for calls from numba code (lazily)."""

    def __missing__(self, op: str):
        scalar = getattr(elementwise, op, None)
        if not isinstance(scalar, elementwise.Elementwise):
            raise KeyError(f"{op!r} is not an elementwise op of ops/cpu/elementwise.py")
        twin = renamed(scalar.__wrapped__, f"{op}.scalar")        # its own cache files, not the ufunc's
        self[op] = njit(cache=True, error_model="numpy")(twin)
        return self[op]


SCALAR = _Scalars()


KERNELS = {"fused": fused}
