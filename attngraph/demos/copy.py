"""Copy: a Transformer encoder-decoder learns y = x, then copies fresh sequences by greedy decoding.

Task: ``Copy(symbols=10, min_length=1, max_length=10)``, sources of 1-10 digits; training pairs and the
evaluation pairs come from disjoint splits of the task (``attngraph.train.data``), and the 500 evaluation
sequences are distinct and drawn with their own seed. Model: ``Transformer`` (Vaswani et al. 2017),
d_model 64, 4 heads, 2 encoder and 2 decoder layers, d_ff 128, no dropout. Training: Adam (lr 1e-3,
linear warm-up over 100 steps, cosine decay to 1e-5), batches of 64, gradients clipped at norm 1,
1,200 steps. Evaluation: greedy decoding of the 500 held-out sources; ``heldout_exact_match`` is the
fraction decoded exactly (every symbol and the end of sequence).

Writes: metrics.json, train.jsonl, loss.svg, graph.svg (+ .dot), and attention.svg: the cross-attention
of every decoder layer and head on a held-out sequence — the copy's diagonal, target i reading source i.
"""
from __future__ import annotations

import numpy as np

import attngraph as ag
from attngraph.core import functional as F
from attngraph.inspect import attention_maps
from attngraph.models import Transformer
from attngraph.models.tokens import BOS, PAD
from attngraph.train.data import Copy

from .arguments import positive_int
from .common import Run, demo_parser, heldout_pairs, train_on_task

STEPS = 1200
HELDOUT = 500
CONFIG = dict(d_model=64, heads=4, layers=2, d_ff=128, dropout=0.0)
TRAINING = dict(batch=64, lr=1e-3, warmup=100, min_lr=1e-5, clip=1.0, train_pool=50_000)


def main(argv=None) -> dict:
    parser = demo_parser("copy", __doc__, steps=STEPS)
    parser.add_argument("--heldout", type=positive_int, default=HELDOUT,
                        help=f"evaluation sequences (default: {HELDOUT})")
    parser.add_argument("--max-length", type=positive_int, default=10, help="longest source (default: 10)")
    run = Run(parser, argv)
    args = run.args
    task = Copy(symbols=10, min_length=1, max_length=args.max_length)
    heldout = heldout_pairs(run, task)          # drawn first: too few of them fails at once
    vocab = len(task.vocab)
    model = Transformer(vocab, vocab, max_length=args.max_length + 2, rng=run.rng(1), **CONFIG)

    def loss_fn(model, src, tgt_in, tgt_out):
        return F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=PAD)

    sequences = dict(src=ag.Input(("B", "S"), "int64"), tgt_in=ag.Input(("B", "T"), "int64"))
    train_on_task(run, model, loss_fn, task, task.batch, TRAINING,
                  inputs={**sequences, "tgt_out": ag.Input(("B", "T"), "int64")})

    model.eval()
    src = task.batch(heldout)["src"]
    predictions = model.greedy_decode(src, max_length=args.max_length + 1)
    decoded = [task.decode(row) for row in predictions]
    exact = float(np.mean([d == target for d, (_, target) in zip(decoded, heldout)]))

    run.graph(ag.trace(model, **sequences))
    example = max(range(len(heldout)), key=lambda i: len(heldout[i][0]))      # a longest source
    source, _ = heldout[example]
    output = [*decoded[example], "</s>"]
    ids = task.vocab.encode(source)[None]
    tgt_in = np.concatenate([[BOS], task.vocab.encode(decoded[example])])[None]
    maps = attention_maps(ag.trace(model, src=ids, tgt_in=tgt_in), src=ids, tgt_in=tgt_in)
    cross = np.stack([maps[f"decoder.layers.{i}.cross_attn"][0] for i in range(CONFIG["layers"])])
    run.heatmap("attention.svg", cross, list(source), output,
                title=f"cross-attention (layer × head) copying {source!r}")

    return run.finish(task="copy", model="transformer encoder-decoder, greedy decoding",
                      config={"task": task.config(), "model": {"vocab": vocab, **CONFIG}, "training": TRAINING,
                              "heldout": args.heldout, "seed": args.seed},
                      metrics={"heldout_exact_match": exact,
                               "heldout_symbol_accuracy": _symbol_accuracy(decoded, [t for _, t in heldout])})


def _symbol_accuracy(decoded: list[str], targets: list[str]) -> float:
    """The fraction of target symbols decoded right at their position (a missing one counts wrong)."""
    right = sum(sum(a == b for a, b in zip(d, t)) for d, t in zip(decoded, targets))
    return right / sum(len(t) for t in targets)


if __name__ == "__main__":
    main()
