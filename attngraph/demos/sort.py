"""Sort: a GPT-style decoder reads a sequence and writes it sorted, one symbol at a time.

Task: ``Sort(symbols=10, min_length=1, max_length=8)`` — "3814" → "1348", repeats allowed. The model
reads x <s> y </s> left to right; the loss covers only y and </s> (``Task.decoder_batch``). Training pairs
and the 500 evaluation sequences (distinct, own seed) come from disjoint splits of the task.

Model: ``GPT`` (decoder-only, pre-norm, causal self-attention): d_model 64, 4 heads, 2 layers, d_ff 256,
learned positions for 17 tokens, tied embeddings, no dropout. Training: Adam (lr 2e-3, 100 warm-up
steps, cosine decay to 2e-5), batches of 64, gradients clipped at norm 1, 3,000 steps. Evaluation:
the prompt x <s> is continued greedily (``GPT.generate`` with temperature 0) by len(x) + 1 tokens;
``heldout_exact_match`` is the fraction whose continuation is exactly sorted(x) </s>.

Writes: metrics.json, train.jsonl, loss.svg, graph.svg (+ .dot), and attention.svg: the self-attention
of every layer and head on a held-out sequence, from each output position (rows: the symbol read → the
symbol written) to every earlier token (columns): heads look up, in the source, the symbol to write next.
"""
from __future__ import annotations

import numpy as np

import attngraph as ag
from attngraph.core import functional as F
from attngraph.inspect import attention_maps
from attngraph.models import GPT
from attngraph.train.data import IGNORE, Sort

from .arguments import positive_int
from .common import Run, demo_parser, heldout_pairs, train_on_task

STEPS = 3000
HELDOUT = 500
CONFIG = dict(d_model=64, heads=4, layers=2, d_ff=256, dropout=0.0)
TRAINING = dict(batch=64, lr=2e-3, warmup=100, min_lr=2e-5, clip=1.0, train_pool=50_000)


def main(argv=None) -> dict:
    parser = demo_parser("sort", __doc__, steps=STEPS)
    parser.add_argument("--heldout", type=positive_int, default=HELDOUT,
                        help=f"evaluation sequences (default: {HELDOUT})")
    parser.add_argument("--max-length", type=positive_int, default=8, help="longest sequence (default: 8)")
    run = Run(parser, argv)
    args = run.args
    task = Sort(symbols=10, min_length=1, max_length=args.max_length)
    heldout = heldout_pairs(run, task)          # drawn first: too few of them fails at once
    vocab = len(task.vocab)
    model = GPT(vocab, max_length=2 * args.max_length + 1, rng=run.rng(1), **CONFIG)

    def loss_fn(model, tokens, targets):
        return F.cross_entropy(model(tokens), targets, ignore_index=IGNORE)

    tokens = ag.Input(("B", "T"), "int64")
    train_on_task(run, model, loss_fn, task, task.decoder_batch, TRAINING,
                  inputs=dict(tokens=tokens, targets=ag.Input(("B", "T"), "int64")))

    model.eval()
    decoded = task.complete(model, [source for source, _ in heldout])
    exact = float(np.mean([d == target + "</s>" for d, (_, target) in zip(decoded, heldout)]))

    run.graph(ag.trace(model, tokens=tokens))
    source, target = max(heldout, key=lambda pair: (len(set(pair[0])) < len(pair[0]), len(pair[0])))
    sequence = [*source, "<s>", *target, "</s>"]
    ids = task.vocab.encode(sequence[:-1])[None]
    maps = attention_maps(ag.trace(model, tokens=ids), tokens=ids)
    weights = np.stack([maps[f"transformer.layers.{i}.self_attn"][0] for i in range(CONFIG["layers"])])
    start = len(source)                                                  # the rows predicting y and </s>
    run.heatmap("attention.svg", weights[:, :, start:, :], sequence[:-1],
                [f"{a} → {b}" for a, b in zip(sequence[start:-1], sequence[start + 1:])],
                title=f"self-attention (layer × head) sorting {source!r}: row 'a → b' reads a, writes b")

    return run.finish(task="sort", model="GPT-style decoder, greedy decoding",
                      config={"task": task.config(), "model": {"vocab": vocab, "max_length": 2 * args.max_length + 1,
                                                               **CONFIG},
                              "training": TRAINING, "heldout": args.heldout, "seed": args.seed},
                      metrics={"heldout_exact_match": exact},
                      extra={"heldout_errors": [{"source": s, "target": t, "decoded": d}
                                                for d, (s, t) in zip(decoded, heldout) if d != t + "</s>"][:20]})


if __name__ == "__main__":
    main()
