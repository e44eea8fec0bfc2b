"""Dates: a GRU encoder-decoder with additive (Bahdanau) attention translates dates into ISO 8601.

Task: ``Dates()`` — a day of 1950-2049 written in one of 20 formats ("3 May 1979", "05/03/79",
"Thursday, May 3, 1979", "the 3rd of May 1979", "19790503", ...) → "1979-05-03". A date's split is
fixed by the date itself, so none of the 2,000 evaluation dates (distinct, own seed) is ever seen in
training, in any format. Sources are padded to 29 characters (the longest format); targets are the 10
characters and </s>.

Model: ``BahdanauSeq2Seq`` (Bahdanau et al. 2015): character embeddings of 32, a bidirectional GRU
encoder and a GRU decoder of 64 units each, additive attention vᵀ tanh(W s + U h) from the previous
decoder state. Training: Adam (lr 3e-3, 100 warm-up steps, cosine decay to 3e-5), batches of 64 pairs
drawn from 50,000 training pairs, gradients clipped at norm 1, 2,000 steps. Evaluation: greedy
decoding of the 2,000 held-out dates; ``heldout_exact_match`` is the fraction decoded exactly.

Writes: metrics.json, train.jsonl, loss.svg, graph.svg (+ .dot), and attention-1.svg ... attention-4.svg:
the attention of every output character over the source for one held-out date in four formats — the
alignment: the year's digits read the year, the month's digits the month name or number, and so on.
"""
from __future__ import annotations

import datetime

import numpy as np

import attngraph as ag
from attngraph.core import functional as F
from attngraph.models import BahdanauSeq2Seq
from attngraph.models.tokens import PAD
from attngraph.train.data import Dates, format_date, pad_sequences

from .arguments import positive_int
from .common import Run, demo_parser, heldout_pairs, train_on_task

STEPS = 2000
HELDOUT = 2000
SOURCE_LENGTH = 29
TARGET_LENGTH = 11
CONFIG = dict(embed_dim=32, hidden=64)
TRAINING = dict(batch=64, lr=3e-3, warmup=100, min_lr=3e-5, clip=1.0, train_pool=50_000)
SHOWN = ("{Weekday}, {Month} {d}, {yyyy}", "the {dth} of {Month} {yyyy}", "{MM}/{dd}/{yy}", "{d}-{Mon}-{yy}")


def main(argv=None) -> dict:
    parser = demo_parser("dates", __doc__, steps=STEPS)
    parser.add_argument("--heldout", type=positive_int, default=HELDOUT, help=f"evaluation dates (default: {HELDOUT})")
    run = Run(parser, argv)
    args = run.args
    task = Dates()
    heldout = heldout_pairs(run, task)          # drawn first: too few of them fails at once
    vocab = len(task.vocab)
    model = BahdanauSeq2Seq(vocab, vocab, rng=run.rng(1), **CONFIG)

    def encode(pairs):
        batch = task.batch(pairs)
        return {**batch, "src": pad_sequences(batch["src"], SOURCE_LENGTH)[0]}

    def loss_fn(model, src, tgt_in, tgt_out):
        return F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=PAD)

    inputs = dict(src=ag.Input(("B", SOURCE_LENGTH), "int64"), tgt_in=ag.Input(("B", TARGET_LENGTH), "int64"),
                  tgt_out=ag.Input(("B", TARGET_LENGTH), "int64"))
    train_on_task(run, model, loss_fn, task, encode, TRAINING, inputs=inputs)

    model.eval()
    tokens, _ = model.greedy_decode(encode(heldout)["src"], max_length=TARGET_LENGTH)
    decoded = [task.decode(row) for row in tokens]
    right = [d == target for d, (_, target) in zip(decoded, heldout)]
    wrong = [(source, target, d) for (source, target), d, ok in zip(heldout, decoded, right) if not ok]

    run.graph(ag.trace(model, src=inputs["src"], tgt_in=inputs["tgt_in"]))
    date = datetime.date.fromisoformat(heldout[0][1])
    sources = [format_date(date, template) for template in SHOWN]
    shown, weights = model.greedy_decode(pad_sequences([task.vocab.encode(s) for s in sources], SOURCE_LENGTH)[0],
                                         max_length=TARGET_LENGTH)
    for i, (source, row, alpha) in enumerate(zip(sources, shown, weights), 1):
        output = task.vocab.decode(row)
        output = output[:output.index("</s>") + 1] if "</s>" in output else output
        run.heatmap(f"attention-{i}.svg", alpha[:len(output), :len(source)], [c.replace(" ", "␣") for c in source],
                    output,
                    title=f"additive attention: {source!r} → {task.decode(row)!r}")

    return run.finish(task="dates", model="GRU encoder-decoder with additive (Bahdanau) attention",
                      config={"task": task.config(), "model": {"vocab": vocab, **CONFIG},
                              "source_length": SOURCE_LENGTH, "training": TRAINING, "heldout": args.heldout,
                              "seed": args.seed},
                      metrics={"heldout_exact_match": float(np.mean(right))},
                      extra={"heldout_errors": [{"source": s, "target": t, "decoded": d} for s, t, d in wrong[:20]]})


if __name__ == "__main__":
    main()
