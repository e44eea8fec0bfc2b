"""Learning-rate schedules: ``schedule(t)`` is the learning rate of the t-th optimizer step, t = 1, 2, ...

Each schedule is a small frozen dataclass: its repr shows its settings, ``config()`` gives them as JSON
for checkpoints, and ``from_config`` builds the schedule back. Settings are checked when a schedule is made
(``ValueError``): learning rates and factors finite and >= 0, step counts and sizes integers >= 0 (>= 1 where
the formula divides by them)::

    schedule = CosineDecay(lr=3e-4, total=2000, warmup=100)
    from_config(schedule.config()) == schedule      # True
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass


class Schedule:
    positive: tuple[str, ...] = ()      # the integer settings that must be >= 1

    def __post_init__(self):
        """Check every setting (module docstring): ``ValueError`` names the first one out of range."""
        for field in dataclasses.fields(self):
            value, least = getattr(self, field.name), int(field.name in self.positive)
            kind = numbers.Integral if field.type == "int" else numbers.Real
            if not (isinstance(value, kind) and not isinstance(value, bool) and least <= value < math.inf):
                raise ValueError(f"{type(self).__name__}'s {field.name} must be "
                                 f"{'an integer' if kind is numbers.Integral else 'a finite number'} >= {least}, "
                                 f"got {value!r}")

    def __call__(self, step: int) -> float:
        if step < 1:
            raise ValueError(f"schedules count optimizer steps from 1, got step {step}")
        return self.lr_at(step)

    def lr_at(self, step: int) -> float:
        raise NotImplementedError

    def config(self) -> dict:
        return {"type": type(self).__name__, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class Constant(Schedule):
    """lr(t) = lr"""
    lr: float

    def lr_at(self, step):
        return self.lr


@dataclass(frozen=True)
class LinearWarmup(Schedule):
    """lr(t) = lr · min(1, t / warmup): a linear ramp over the first ``warmup`` steps, then constant
    (Goyal et al. 2017)."""
    lr: float
    warmup: int
    positive = ("warmup",)

    def lr_at(self, step):
        return self.lr * min(1.0, step / self.warmup)


@dataclass(frozen=True)
class CosineDecay(Schedule):
    """Linear warm-up to ``lr`` over ``warmup`` steps, then a half cosine down to ``min_lr`` at step
    ``total`` and ``min_lr`` after it (Loshchilov & Hutter 2017, without restarts):
    lr(t) = min_lr + (lr − min_lr) · ½(1 + cos(π·p)),  p = (t − warmup) / (total − warmup)."""
    lr: float
    total: int
    warmup: int = 0
    min_lr: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if not self.warmup < self.total:
            raise ValueError(f"CosineDecay needs 0 <= warmup < total, got warmup {self.warmup}, total {self.total}")

    def lr_at(self, step):
        if step <= self.warmup:
            return self.lr * step / self.warmup
        progress = min(1.0, (step - self.warmup) / (self.total - self.warmup))
        return self.min_lr + (self.lr - self.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class Noam(Schedule):
    """The Transformer's schedule (Vaswani et al. 2017, eq. 3; "Noam" in the Annotated Transformer):
    lr(t) = factor · d_model^−½ · min(t^−½, t · warmup^−³ᐟ²) — a linear ramp for ``warmup`` steps, then
    decay as 1/√t; the peak, at t = warmup, is factor / √(d_model · warmup)."""
    d_model: int
    warmup: int = 4000
    factor: float = 1.0
    positive = ("d_model", "warmup")

    def lr_at(self, step):
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)


SCHEDULES = {cls.__name__: cls for cls in (Constant, LinearWarmup, CosineDecay, Noam)}


def from_config(config: dict) -> Schedule:
    """The schedule that ``config()`` describes; ``ValueError`` says what does not fit."""
    settings = dict(config)
    kind = settings.pop("type", None)
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule type {kind!r}; known: {', '.join(SCHEDULES)}")
    try:
        return SCHEDULES[kind](**settings)
    except TypeError as e:              # a setting missing, or one the schedule does not have
        raise ValueError(f"settings {settings} do not fit {kind}: {e}") from None
