"""Kernel times per op and per module, as the torch profiler's table gives them.

``profile(graph, **feeds)`` compiles the graph, runs it once to compile numba's kernels, then ``runs`` times
through a ``Profiler``: an ``Interpreter`` (core/interpreter.py) whose ``run_node`` hook times every kernel call
with ``time.perf_counter``. The times are the kernels' own (wall clock of the calls, the executor's bookkeeping
between them left out) summed over the runs; a module's time is that of every op whose scope lies inside it::

    report = ag.inspect.profile(ag.trace(model, tokens=tokens), tokens=tokens)
    print(report.table())          # ops, then modules, by total time

On "cuda" a kernel call returns when it is launched: the times are launch times, not the GPU's.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from ..core.interpreter import Interpreter


class Profiler(Interpreter):
    """Sums the seconds and counts the calls of every node it runs (``seconds``, ``calls``: by node)."""

    def __init__(self, device: str = "cpu"):
        super().__init__(device)
        self.seconds: dict = defaultdict(float)
        self.calls: dict = defaultdict(int)

    def run_node(self, node, call, args):
        start = time.perf_counter()
        out = super().run_node(node, call, args)
        self.seconds[node] += time.perf_counter() - start
        self.calls[node] += 1
        return out


@dataclass
class Profile:
    """Seconds and calls per op name and per module scope ("" is the whole graph), over ``runs`` runs."""

    runs: int
    ops: dict[str, tuple[float, int]] = field(default_factory=dict)
    modules: dict[str, tuple[float, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, profiler: Profiler, runs: int) -> Profile:
        ops, modules = defaultdict(lambda: [0.0, 0]), defaultdict(lambda: [0.0, 0])
        for node, seconds in profiler.seconds.items():
            scope = node.scope.split(".") if node.scope else []
            for key, table in [(node.op, ops)] + [(".".join(scope[:i]), modules) for i in range(len(scope) + 1)]:
                table[key][0] += seconds
                table[key][1] += profiler.calls[node]
        return cls(runs, {k: tuple(v) for k, v in ops.items()}, {k: tuple(v) for k, v in modules.items()})

    @property
    def total(self) -> float:
        return self.modules.get("", (0.0, 0))[0]

    def table(self, rows: int = 20) -> str:
        """The ``rows`` slowest ops, then modules: total and per-call time, share of the total, calls per run."""
        lines = []
        for title, entries in (("op", self.ops), ("module", self.modules)):
            ordered = sorted(entries.items(), key=lambda item: -item[1][0])[:rows]
            width = max([len(title), *(len(k or "(model)") for k, _ in ordered)])
            lines += [f"{title:<{width}}  {'total ms':>10}  {'% total':>7}  {'µs/call':>9}  {'calls/run':>9}",
                      "-" * (width + 43)]
            for key, (seconds, calls) in ordered:
                lines.append(f"{key or '(model)':<{width}}  {1e3 * seconds / self.runs:>10.3f}  "
                             f"{100 * seconds / max(self.total, 1e-12):>6.1f}%  {1e6 * seconds / max(calls, 1):>9.1f}  "
                             f"{calls / self.runs:>9g}")
            lines.append("")
        lines.append(f"kernel time per run: {1e3 * self.total / self.runs:.3f} ms over {self.runs} runs")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def profile(graph, runs: int = 10, device: str = "cpu", **feeds) -> Profile:
    """Time ``graph``'s kernels on ``feeds`` over ``runs`` runs on ``device`` (after one untimed run)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    executable = graph.compile(device)
    executable(**feeds)
    executable.interpreter = profiler = Profiler(device)
    for _ in range(runs):
        executable(**feeds)
    return Profile.of(profiler, runs)
