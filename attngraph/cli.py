"""The ``attngraph`` command (also ``python -m attngraph``)."""
from __future__ import annotations

import argparse
import importlib
import platform
import shutil
import sys


def _info(args) -> int:
    import numba
    import numpy as np

    from ops.cpu import threading_info

    layer, threads = threading_info()
    rows = [("attngraph", _version()), ("python", platform.python_version()), ("numpy", np.__version__),
            ("numba", numba.__version__), ("numba threading layer", layer), ("numba threads", threads),
            ("graphviz dot", shutil.which("dot") or "not found (apt-get install graphviz)")]
    for key, value in rows:
        print(f"{key:<24} {value}")
    return 0


def _demo(args) -> int:
    from .demos import DEFAULT, DEMOS
    name = args.name or DEFAULT
    if name not in DEMOS:
        print(f"attngraph demo: unknown demo {name!r}; choose from {', '.join(DEMOS)}", file=sys.stderr)
        return 2
    importlib.import_module(f"attngraph.demos.{name}").main(args.rest)
    return 0


def _version() -> str:
    from . import __version__
    return __version__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="attngraph", description="Build, see and train attention models.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a demo model and write its pictures")
    demo.add_argument("name", nargs="?", help="which demo (default: the main one)")
    demo.add_argument("rest", nargs=argparse.REMAINDER, help="options passed to the demo (--out, --steps, ...)")
    demo.set_defaults(run=_demo)
    info = commands.add_parser("info", help="versions, threading layer, graphviz")
    info.set_defaults(run=_info)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
