"""Training: optimizers (the full Trainer, schedules and checkpoints build on these)."""
from .optim import Adam
