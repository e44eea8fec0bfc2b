"""Training on the CPU never imports numba.cuda: the optimizers pick ops/cuda/optim.py only for device arrays."""
import subprocess
import sys
from pathlib import Path

CODE = """
import sys
import numpy as np
from attngraph.nn import MLP
from attngraph.train import AdamW, Trainer, clip_grad_norm
from tests.train.conftest import regression_batches, squared_error

model = MLP([4, 4, 1])
trainer = Trainer(model, squared_error, AdamW(model), clip=0.5, accumulate=2, progress=False)
trainer.fit(regression_batches, steps=1)
clip_grad_norm([np.ones(3, np.float32)], 1.0)
trainer.optimizer.load_state_dict(trainer.optimizer.state_dict())
assert "numba.cuda" not in sys.modules, "numba.cuda was imported"
"""


def test_training_on_the_cpu_never_imports_numba_cuda():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, check=False,
                            cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr
