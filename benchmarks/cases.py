"""The benchmark cases: each builds its inputs, times attngraph against its references and returns a
record (a JSON-able dict; see ``__main__``). Every attngraph side runs through a compiled graph, as a user's
code would, its gradients included; the references compute the same: Σ f(x) ∘ g and its gradients."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import timeit
from functools import partial
from typing import Callable

import numpy as np

import attngraph as ag
from attngraph.core.executor import Executable
from attngraph.core.passes import optimize
from attngraph.inspect.flops import total_flops
from attngraph.models import captions, tasks
from attngraph.models.elmo import ELMo, bidirectional_loss
from attngraph.models.gpt import GPT
from attngraph.models.han import HAN
from attngraph.models.lstmn import LSTMNClassifier
from attngraph.models.pointer import PointerNetwork, pointer_loss
from attngraph.models.seq2seq import BahdanauSeq2Seq, LuongSeq2Seq
from attngraph.models.show_attend_tell import ShowAttendTell, objective
from attngraph.train.optim import AdamW

from . import distributed, gpt, ring
from . import numpy_reference as npr
from .harness import compare, load, ratio
from .peers import jr, tr

MiB = 2 ** 20
CASES: dict[str, Callable[[int], dict]] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn



def versus(name: str, config: dict, attngraph: Callable, references: dict, rounds: int, target: str,
           met: Callable[[dict], bool | None]) -> dict:
    """Time attngraph and the references that are installed (None: not installed); the record."""
    runs = {"attngraph": attngraph, **{k: v for k, v in references.items() if v is not None}}
    before = load()
    timings = compare(runs, rounds)
    record = {"name": name, "config": config, "load": [round(before, 2), round(load(), 2)]}
    record.update({side: timing.summary() for side, timing in timings.items()})
    record["ratio"] = {side: ratio(timings["attngraph"], timing) for side, timing in timings.items()
                       if side != "attngraph"}
    record["target"] = target
    record["met"] = met(record)
    return record


def ratio_at_most(reference: str, limit: float) -> tuple[str, Callable]:
    """The target ``attngraph / reference ≤ limit`` (None when the reference is not installed)."""
    return ratios_at_most({reference: limit})


def ratios_at_most(limits: dict[str, float]) -> tuple[str, Callable]:
    """The target ``attngraph / reference ≤ limit`` for each reference; met when every installed one meets it
    (None when none is installed)."""
    def met(record: dict) -> bool | None:
        measured = [record["ratio"][side] <= limit for side, limit in limits.items() if side in record["ratio"]]
        return all(measured) if measured else None
    return ", ".join(f"attngraph/{side} <= {limit:g}" for side, limit in limits.items()), met


def gradient_step(f, arrays: dict[str, np.ndarray], wrt: list[str]) -> Callable:
    """A compiled graph computing Σ f(**arrays) ∘ g and its gradients with respect to ``wrt``."""
    graph = ag.trace(lambda g, **xs: ag.sum(f(**xs) * g), **arrays)
    step = graph.grad(wrt=wrt).compile()
    return lambda: step(**arrays)


STEP_TARGETS = {"torch": 1.0, "jax": 1.0, "torch.compile": 1.2}


def training_step(name: str, config: dict, loss: Callable, batch: dict[str, np.ndarray], references: dict,
                  rounds: int) -> dict:
    """A training step of the scalar ``loss(**batch)`` of a model's parameters: forward, backward, AdamW
    (lr 3e-4); against ``references`` (PyTorch eager, torch.compile, JAX's jit); the config records attngraph's
    kernel calls per step. ``gflops``: each side's rate
    on the step's FLOPs (attngraph's count of its graph), and ``sgemm_gflops`` the machine's ceiling, NumPy's
    1024³ float32 product."""
    graph = ag.trace(loss, **batch)
    params = [node for node in graph.parameters.values() if not node.stop_gradient]
    gradient = graph.grad(wrt=params)
    step = gradient.compile()
    optimizer = AdamW([(node.name, node.value) for node in params], lr=3e-4)

    def attngraph_step():
        _, *grads = step(**batch)
        optimizer.step(grads)

    record = versus(name, {**config, "optimizer": "AdamW", "kernel calls": step.kernel_calls}, attngraph_step,
                    references, rounds, *ratios_at_most(STEP_TARGETS))
    flops = total_flops(gradient)
    record["gflops"] = {side: flops / record[side]["median_s"] / 1e9 for side in ("attngraph", *record["ratio"])}
    record["sgemm_gflops"] = sgemm_gflops()
    return record


def gpt_task(width: int, heads: int, layers: int, length: int, batch: int) -> tuple:
    """GPT (vocabulary 65, d_ff = 4·width, no dropout) on the next-token cross-entropy: (config, loss, batch)."""
    vocab, rng = 65, np.random.default_rng(0)
    tokens, targets = (rng.integers(0, vocab, (batch, length)) for _ in range(2))
    model = GPT(vocab, width, heads, layers, 4 * width, length, dropout=0.0, rng=rng)
    return (dict(vocab=vocab, width=width, heads=heads, layers=layers, T=length, batch=batch),
            lambda tokens, targets: ag.cross_entropy(model(tokens), targets), dict(tokens=tokens, targets=targets))


def sgemm_gflops(n: int = 1024, repeats: int = 9) -> float:
    """The machine's practical ceiling as the case runs (the load moves it): NumPy's n³ float32 product, the
    best of ``repeats`` after one to warm up."""
    a, b = (np.random.default_rng(0).standard_normal((n, n), np.float32) for _ in range(2))
    return 2 * n ** 3 / min(timeit.repeat(lambda: a @ b, number=1, repeat=repeats + 1)[1:]) / 1e9


@case
def gpt_step(rounds: int) -> dict:
    """GPT's loss and gradients in both formulations on every side (benchmarks/gpt.py): V65 d128 H4 L2 T64 B32."""
    return gpt.gpt_case("gpt_step", 128, 4, 2, 64, 32, rounds)


@case
def gpt_step_float64(rounds: int) -> dict:
    return gpt.gpt_case("gpt_step_float64", 128, 4, 2, 64, 32, rounds, np.float64)


@case
def gpt_step_large(rounds: int) -> dict:
    return gpt.gpt_case("gpt_step_large", 256, 4, 4, 128, 16, rounds)


@case
def gpt_step_long(rounds: int) -> dict:
    """Long context: T = 1024, where attention's Tq × Tk work outweighs the products."""
    return gpt.gpt_case("gpt_step_long", 128, 4, 2, 1024, 4, max(3, rounds // 3))


def model_step(name: str, model, sizes: dict, loss: Callable, batch: dict[str, np.ndarray], reference: str,
               rounds: int) -> dict:
    """A training step of an attngraph model against its twins named ``reference`` in torch_reference (eager
    and compiled) and jax_reference (``<reference>_loss``, the whole step one jit), every side starting from the
    attngraph model's parameters (a side is left out where its library is not installed)."""
    state, arrays = model.state_dict(), list(batch.values())

    def torch_step(compiled: bool):
        return tr and tr.training_step(*tr.reference(reference, sizes, state), *arrays, compiled=compiled)
    return training_step(name, {**sizes, **{key: list(array.shape) for key, array in batch.items()}}, loss, batch,
                         {"torch": torch_step(False), "torch.compile": torch_step(True),
                          "jax": jr and jr.training_step(getattr(jr, f"{reference}_loss"), jr.tree(state), *arrays)},
                         rounds)


def seq2seq_task(factory: type = BahdanauSeq2Seq, **settings) -> tuple:
    """An encoder-decoder (``factory``, BahdanauSeq2Seq's bidirectional GRU encoder, additive attention, GRU
    decoder and tanh readout by default) on sequence reversal: sources of 1-12 tokens padded to 12 (masked),
    targets of 13, teacher forcing, cross-entropy over the non-PAD targets: (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(vocab=32, embed_dim=32, hidden=64)
    model = factory(sizes["vocab"], sizes["vocab"], sizes["embed_dim"], sizes["hidden"], **settings, rng=rng)
    return model, sizes, partial(tasks.reversal_loss, model), tasks.reversal(rng, 64, 12, sizes["vocab"])


def han_task() -> tuple:
    """HAN (word and sentence bidirectional GRUs, attention pooling at both levels) classifying documents of
    1-6 sentences of 1-10 words padded to 6 × 10, both levels masked; cross-entropy over 2 classes:
    (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(vocab=64, embed_dim=32, word_hidden=64, sentence_hidden=64, attention_dim=64, classes=2)
    model = HAN(**sizes, rng=rng)
    documents, labels = tasks.keyword_documents(rng, 32, 6, 10, sizes["vocab"])
    return (model, sizes, lambda documents, labels: ag.cross_entropy(model(documents), labels),
            dict(documents=documents, labels=labels))


def lstmn_task() -> tuple:
    """LSTMNClassifier (an LSTM with intra-attention over its tape of past states) finding a keyword in
    sentences of 1-12 tokens padded to 12; cross-entropy over 2 classes: (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(vocab=32, embed_dim=32, hidden=64, attention_dim=64, classes=2)
    model = LSTMNClassifier(**sizes, rng=rng)
    tokens, labels = tasks.keyword_sequences(rng, 64, 12, sizes["vocab"])
    return (model, sizes, lambda tokens, labels: ag.cross_entropy(model(tokens), labels),
            dict(tokens=tokens, labels=labels))


def elmo_task() -> tuple:
    """ELMo's biLM (two 2-layer LSTM language models, forward and backward, width 64) on counting sequences
    of 12 tokens; the sum of both directions' cross-entropies: (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(vocab=32, dim=64, layers=2)
    model = ELMo(**sizes, rng=rng)
    return model, sizes, partial(bidirectional_loss, model), dict(tokens=tasks.counting(rng, 64, 12, sizes["vocab"]))


def show_attend_tell_task() -> tuple:
    """Show, Attend and Tell with soft attention (two convolutions over 24 × 24 pictures, 9 locations, LSTM
    decoder of width 64) captioning 32 pictures of shapes, captions of 10 words; cross-entropy plus the doubly
    stochastic penalty: (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(vocab=captions.VOCAB, image_size=24, channels=(16, 32), embed_dim=32, hidden=64, attention_dim=32)
    model = ShowAttendTell(**sizes, rng=rng)
    return (model, sizes, lambda images, captions_in, captions_out:
            objective(model, images, captions_in, captions_out)["loss"],
            captions.batch(rng, 32, sizes["image_size"]))


def pointer_task() -> tuple:
    """A pointer network (LSTM encoder and decoder of width 64, additive pointer) sorting 10 numbers, teacher
    forcing; the mean −log p of the true positions: (model, sizes, loss, batch)."""
    rng = np.random.default_rng(0)
    sizes = dict(embed_dim=32, hidden=64, attention_dim=64)
    model = PointerNetwork(**sizes, rng=rng)
    return model, sizes, partial(pointer_loss, model), tasks.sorting(rng, 64, 10)


def model_case(name: str, task: Callable, reference: str) -> None:
    """The case ``name``: a training step of ``task()``'s model against its twins named ``reference``."""
    CASES[name] = lambda rounds: model_step(name, *task(), reference, rounds)


for _name, _task, _reference in [
        ("seq2seq_step", seq2seq_task, "seq2seq"),
        ("han_step", han_task, "han"),
        ("seq2seq_luong_step", partial(seq2seq_task, LuongSeq2Seq, score="general"), "seq2seq_luong"),
        ("lstmn_step", lstmn_task, "lstmn"),
        ("elmo_step", elmo_task, "elmo"),
        ("show_attend_tell_step", show_attend_tell_task, "show_attend_tell"),
        ("pointer_step", pointer_task, "pointer")]:
    model_case(_name, _task, _reference)


def fusion_case(name: str, config: dict, loss: Callable, batch: dict[str, np.ndarray], rounds: int) -> dict:
    """The elementwise fusion pass's gain: the loss and its gradients compiled with it and without it
    (``optimize(graph, elementwise=False)``), alternating; exactly the same results."""
    graph = ag.trace(loss, **batch)
    gradient = graph.grad(wrt=[n for n in graph.parameters.values() if not n.stop_gradient])
    fused, unfused = (Executable(optimize(gradient, elementwise=on)) for on in (True, False))
    calls = {"fused": fused.kernel_calls, "unfused": unfused.kernel_calls}
    return versus(name, {**config, "kernel calls": calls}, lambda: fused(**batch),
                  {"unfused": lambda: unfused(**batch)}, rounds, *ratio_at_most("unfused", 1.0))


@case
def fusion_gpt(rounds: int) -> dict:
    config, loss, batch = gpt_task(128, 4, 2, 64, 32)
    return fusion_case("fusion_gpt", config, loss, batch, rounds)


@case
def fusion_seq2seq(rounds: int) -> dict:
    _, sizes, loss, batch = seq2seq_task()
    return fusion_case("fusion_seq2seq", sizes, loss, batch, rounds)


@case
def fusion_han(rounds: int) -> dict:
    _, sizes, loss, batch = han_task()
    return fusion_case("fusion_han", sizes, loss, batch, rounds)


def attention_case(name: str, batch: int, heads: int, length: int, dim: int, rounds: int, target) -> dict:
    """Causal scaled-dot-product attention, forward and backward with respect to q, k and v."""
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((batch, heads, length, dim), np.float32) for _ in range(4))
    config = dict(B=batch, H=heads, T=length, d=dim, causal=True)
    return versus(name, config,
                  gradient_step(lambda q, k, v: ag.scaled_dot_product_attention(q, k, v, causal=True),
                                dict(q=q, k=k, v=v, g=g), ["q", "k", "v"]),
                  {"torch": tr and tr.loss_and_grads(tr.attention, q, k, v, g, wrt=3),
                   "numpy": lambda: npr.attention(q, k, v, g)}, rounds, *target)


@case
def attention(rounds: int) -> dict:
    return attention_case("attention", 8, 4, 256, 32, rounds, ratio_at_most("torch", 1.0))


@case
def attention_long(rounds: int) -> dict:
    limit = 64 * MiB
    return attention_case("attention_long", 1, 4, 4096, 64, max(3, rounds // 3),
                          ("attngraph peak extra memory < 64 MiB",
                           lambda record: record["attngraph"]["peak_bytes"] < limit
                           if record["attngraph"]["peak_bytes"] is not None else None))


ROWS, COLUMNS = 4096, 1024


@case
def layernorm(rounds: int) -> dict:
    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((ROWS, COLUMNS), np.float32) for _ in range(2))
    w, b = (rng.standard_normal(COLUMNS, np.float32) for _ in range(2))
    return versus("layernorm", dict(shape=[ROWS, COLUMNS]),
                  gradient_step(lambda x, w, b: ag.layer_norm(x, w, b), dict(x=x, w=w, b=b, g=g), ["x", "w", "b"]),
                  {"torch": tr and tr.loss_and_grads(tr.layer_norm, x, w, b, g, wrt=3),
                   "numpy": lambda: npr.layer_norm(x, w, b, g)}, rounds, *ratio_at_most("torch", 1.0))


@case
def softmax(rounds: int) -> dict:
    rng = np.random.default_rng(0)
    x, g = (rng.standard_normal((ROWS, COLUMNS), np.float32) for _ in range(2))
    return versus("softmax", dict(shape=[ROWS, COLUMNS]),
                  gradient_step(lambda x: ag.softmax(x), dict(x=x, g=g), ["x"]),
                  {"torch": tr and tr.loss_and_grads(tr.softmax, x, g, wrt=1),
                   "numpy": lambda: npr.softmax(x, g)}, rounds, *ratio_at_most("torch", 1.0))


@case
def cross_entropy(rounds: int) -> dict:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((ROWS, COLUMNS), np.float32)
    targets = rng.integers(0, COLUMNS, ROWS)
    step = ag.trace(lambda logits, targets: ag.cross_entropy(logits, targets), logits=logits,
                    targets=targets).grad(wrt=["logits"]).compile()
    return versus("cross_entropy", dict(shape=[ROWS, COLUMNS]), lambda: step(logits=logits, targets=targets),
                  {"torch": tr and tr.cross_entropy(logits, targets),
                   "numpy": lambda: npr.cross_entropy(logits, targets)}, rounds, *ratio_at_most("torch", 1.0))


@case
def matmul(rounds: int) -> dict:
    """1024³ float32: the BLAS rate, NumPy's being the practical ceiling (≥ 0.95 of it)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 1024), np.float32) for _ in range(2))
    product = ag.trace(lambda a, b: a @ b, a=a, b=b).compile()
    limit = 1 / 0.95
    record = versus("matmul", dict(m=1024, k=1024, n=1024, dtype="float32"), lambda: product(a=a, b=b),
                    {"torch": tr and tr.matmul(a, b), "numpy": lambda: a @ b}, 3 * rounds,
                    f"rate >= 0.95 of numpy's (attngraph/numpy <= {limit:.3f})",
                    lambda record: record["ratio"]["numpy"] <= limit)
    record["gflops"] = {side: 2 * 1024 ** 3 / record[side]["median_s"] / 1e9
                        for side in ("attngraph", *record["ratio"])}
    return record


@case
def compile(rounds: int) -> dict:
    """The first training step of a fresh process, with an empty numba cache and then with the cache that run
    filled (``benchmarks.first_step`` times it from before ``import attngraph``), for gpt_step's model and for the
    copy demo. Python's bytecode is cached as a pip install's is (PYTHONDONTWRITEBYTECODE unset)."""
    before = load()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    programs = {}
    for program in ("gpt", "copy"):
        with tempfile.TemporaryDirectory() as cache:
            env["NUMBA_CACHE_DIR"] = cache
            programs[program] = dict(zip(("cold", "warm"), (json.loads(subprocess.run(
                [sys.executable, "-m", "benchmarks.first_step", program], env=env, check=True, capture_output=True,
                text=True).stdout.splitlines()[-1]) for _ in range(2))))
    gpt, copy = programs["gpt"], programs["copy"]
    return {"name": "compile", "config": {"cases": "gpt_step's model, the copy demo", "NUMBA_CACHE_DIR":
                                          "fresh, then warm"},
            "load": [round(before, 2), round(load(), 2)], **programs,
            "target": "gpt: cold <= 60 s, warm <= 3 s; copy demo: cold <= 10 s, warm <= 1 s",
            "met": gpt["cold"]["seconds"] <= 60 and gpt["warm"]["seconds"] <= 3 and copy["cold"]["seconds"] <= 10
            and copy["warm"]["seconds"] <= 1}


for launched in (ring.ring, ring.ring_long, distributed.distributed):   # the MPI cases, last: modules of their own
    case(launched)
