"""Speed and memory of attngraph against PyTorch (eager and torch.compile) and JAX (jit), when installed (the
``bench`` extra), and NumPy.

    python -m benchmarks                   every case, as a table
    python -m benchmarks attention matmul  some cases
    python -m benchmarks --json            one JSON object per case, for scripts

Cases (``cases.py``): gpt_step, gpt_step_float64, gpt_step_large, gpt_step_long (GPT's loss and gradients, module
and functional forms on every side: ``gpt.py``), seq2seq_step
(BahdanauSeq2Seq: bidirectional GRU encoder, additive attention, GRU decoder), han_step (a HAN), attention,
attention_long (causal scaled-dot-product attention, forward and backward), layernorm, softmax,
cross_entropy (4096 × 1024, forward and backward), matmul (1024³ float32) and compile (the first
training step with a cold and a warm numba cache). How they are timed: ``harness.py``. Figures move with
the load from other processes, which each record reports (``load``: the load average before and after).
"""
# Every thread pool in the process lets idle threads sleep: the sides alternate, and threads one side leaves
# spinning would take the cores the other is timed on. Importing ops sets the variables (ops/__init__.py); PyTorch's
# OpenMP and NumPy's OpenBLAS must see them before they are loaded, hence first. (With NumPy's OpenBLAS spinning
# for 0.1 s after each of its products, attngraph's 1024³ product measured 16.1 ms against NumPy's 7.5.)
import ops  # noqa: F401
