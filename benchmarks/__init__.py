"""Speed and memory of attngraph against PyTorch (CPU, when installed: the ``bench`` extra) and NumPy.

    python -m benchmarks                   every case, as a table
    python -m benchmarks attention matmul  some cases
    python -m benchmarks --json            one JSON object per case, for scripts

Cases (``cases.py``): gpt_step, gpt_step_large (a GPT training step with AdamW), attention,
attention_long (causal scaled-dot-product attention, forward and backward), layernorm, softmax,
cross_entropy (4096 × 1024, forward and backward), matmul (1024³ float32) and compile (the first
training step with a cold and a warm numba cache). How they are timed: ``harness.py``. Figures move with
the load from other processes, which each record reports (``load``: the load average before and after).
"""
import os

# Every OpenMP runtime in the process (Numba's, PyTorch's) lets idle threads sleep: the sides alternate, and
# threads one side leaves spinning would take the cores the other is timed on. attngraph sets this for its
# own runtime (ops/cpu/threads.py); PyTorch's must see it before it is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
