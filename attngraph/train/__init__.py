"""Training: optimizers, learning-rate schedules, checkpoints, the Trainer, and data sets and tasks."""
from . import checkpoint, data, distributed, schedules
from .optim import SGD, Adam, AdamW, GradientAccumulator, Optimizer, clip_factor, clip_grad_norm, global_norm
from .schedules import Constant, CosineDecay, LinearWarmup, Noam
from .trainer import Trainer
