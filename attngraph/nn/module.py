"""``Module``: PyTorch-style containers of parameters and sub-modules whose ``forward`` is traced.

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it; the attribute paths
(``encoder.layers.0.attn.w_q.weight``) are the parameter names, the scopes of the graph's nodes and the keys
of ``state_dict``.

Buffers (``register_buffer``) are arrays a module keeps that are not parameters: BatchNorm's running statistics.
They are in ``state_dict`` (and so in checkpoints) beside the parameters, move with ``to``/``astype``, and are
never trained: ``parameters()`` and the optimizers do not see them. A traced graph reads a buffer as it reads a
frozen parameter; a module that changes one while tracing (``update_buffer``, BatchNorm in training mode) makes
its new value an extra output of the graph, ``update:<path>``, and every run of a compiled graph writes it back
into the buffer, as torch's forward updates it in place: ``graph.compile()``, ``value_and_grad``, gradcheck and
the Trainer alike (core/tracing.py, core/executor.py).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..core.parameter import Parameter
from ..core.tracing import module_call
from ..errors import CheckpointError


class Module:
    training: bool = True

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_buffers", {})

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() before "
                                 "assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers.pop(name, None)
        if isinstance(value, Parameter):
            value.name = value.name or name
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        with module_call(self):
            return self.forward(*args, **kwargs)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        """This module (path ``prefix``) and every sub-module, each once, depth first."""
        seen, stack = set(), [(prefix, self)]
        while stack:
            path, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield path, module
            children = [(f"{path}.{name}" if path else name, m) for name, m in module._modules.items()]
            stack.extend(reversed(children))

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """Every parameter once (a shared one under its first path), with its dotted path."""
        seen = set()
        for path, module in self.named_modules():
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{path}.{name}" if path else name), p

    def register_buffer(self, name: str, value) -> Parameter:
        """Keep the float array ``value`` under ``name``: in ``state_dict``, not trained (see the module's doc)."""
        buffer = Parameter(np.array(value, copy=True), trainable=False, name=name)
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = buffer
        object.__setattr__(self, name, buffer)
        return buffer

    def named_buffers(self) -> Iterator[tuple[str, Parameter]]:
        """Every buffer with its dotted path, as ``named_parameters``."""
        for path, module in self.named_modules():
            for name, buffer in module._buffers.items():
                yield (f"{path}.{name}" if path else name), buffer

    def _named_state(self) -> dict[str, Parameter]:
        return {**dict(self.named_parameters()), **dict(self.named_buffers())}

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.size for p in self.parameters() if p.trainable or not trainable_only)

    def astype(self, dtype) -> "Module":
        """Cast every parameter and buffer to ``dtype`` in place (float64 for gradient checks)."""
        for p in self._named_state().values():
            p.assign(p.numpy().astype(dtype))
        return self

    def to(self, device: str) -> "Module":
        """Move every parameter to ``device`` ("cpu" or "cuda"), in place, as PyTorch's ``Module.to``. On "cuda"
        they then stay on the GPU: graphs compiled for "cuda" use them there, without a copy per call. Buffers too."""
        for p in self._named_state().values():
            p.to(device)
        return self

    def train(self, mode: bool = True) -> "Module":
        for _, module in self.named_modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every parameter's and buffer's array (NumPy, wherever it lives), keyed by dotted path."""
        return {name: p.numpy() for name, p in self._named_state().items()}

    def load_state_dict(self, state: dict[str, np.ndarray], strict: bool = True) -> None:
        """Copy ``state`` into the parameters. Everything is checked before anything is written: missing or
        unexpected names (when ``strict``) and shape or dtype differences raise ``CheckpointError`` listing
        them all, and leave the module unchanged."""
        own = self._named_state()
        problems = []
        if strict:
            problems += [f"missing: {name}" for name in own if name not in state]
            problems += [f"unexpected: {name}" for name in state if name not in own]
        for name in own.keys() & state.keys():
            value = np.asarray(state[name])
            if value.shape != own[name].shape or value.dtype != own[name].dtype:
                problems.append(f"{name}: expected {own[name].shape} {own[name].dtype}, "
                                f"got {value.shape} {value.dtype}")
        if problems:
            raise CheckpointError("state does not fit the model:\n  " + "\n  ".join(sorted(problems)))
        for name in own.keys() & state.keys():
            own[name].assign(np.array(state[name], copy=True))

    def summary(self, **inputs):
        """Trace this module on ``inputs`` (``ag.Input`` specs or arrays) and summarize the graph."""
        from ..core.api import trace
        return trace(self, **inputs).summary(model=self)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            lines.append(f"  ({name}): " + repr(m).replace("\n", "\n  "))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"
