"""The model registry: every architecture by name, with its configurations, inputs and loss.

    model = attngraph.models.get("gpt", layers=2)
    spec = attngraph.models.spec("gpt")
    graph = ag.trace(model, **spec.inputs(model))               # symbolic forward graph
    batch = spec.batch(model, np.random.default_rng(0), 4)      # concrete inputs and targets
    loss = ag.trace(lambda **b: spec.loss(model, **b), **batch)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import AttnGraphError
from ..nn import Module


@dataclass(frozen=True)
class ModelSpec:
    name: str
    factory: Callable[..., Module]
    inputs: Callable[[Module], dict]
    batch: Callable[[Module, np.random.Generator, int], dict[str, np.ndarray]]
    loss: Callable[..., object]
    defaults: dict = field(default_factory=dict)
    tiny: dict = field(default_factory=dict)
    description: str = ""


REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> ModelSpec:
    if spec.name in REGISTRY:
        raise AttnGraphError(f"model {spec.name!r} is registered twice")
    REGISTRY[spec.name] = spec
    return spec


def names() -> list[str]:
    return sorted(REGISTRY)


def spec(name: str) -> ModelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise AttnGraphError(f"unknown model {name!r}; registered: {', '.join(names())}") from None


def get(name: str, tiny: bool = False, **config) -> Module:
    """Build model ``name`` from its default configuration (or its tiny one) updated with ``config``."""
    s = spec(name)
    base = {**s.defaults, **(s.tiny if tiny else {})}
    unknown = set(config) - set(base)
    if unknown:
        raise AttnGraphError(f"model {name!r} has no setting(s) {sorted(unknown)}; settings: {sorted(base)}")
    return s.factory(**{**base, **config})
