"""Dates: a GRU encoder-decoder with additive (Bahdanau) attention translates dates in 20 formats to ISO 8601.

    python demos/train_dates.py                 # 2,000 steps
    python demos/train_dates.py --tiny --steps 5

Writes OUT/graph.svg and OUT/attention.svg (each output character's attention over the source: the year's
digits read the year), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.models import BahdanauSeq2Seq
from attngraph.render import attention_heatmap
from attngraph.train import Adam, CosineDecay, Trainer
from attngraph.train.data import Dates, pad_sequences

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--tiny", action="store_true", help="a small model and evaluation (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/dates-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

SOURCE, TARGET = 29, 11                   # the longest formatted date; YYYY-MM-DD and </s>
task = Dates()
train, heldout = task.sample(50_000, "train"), task.sample(20 if args.tiny else 2000, "heldout", seed=1, distinct=True)
model = BahdanauSeq2Seq(len(task.vocab), len(task.vocab), **(dict(embed_dim=8, hidden=16) if args.tiny
                                                            else dict(embed_dim=32, hidden=64)))


def encode(pairs):                        # src padded to SOURCE: one compiled graph serves every batch
    batch = task.batch(pairs)
    return {**batch, "src": pad_sequences(batch["src"], SOURCE)[0]}


def loss_fn(model, src, tgt_in, tgt_out):
    return ag.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=0)       # 0: <pad>


inputs = dict(src=ag.Input(("B", SOURCE), "int64"), tgt_in=ag.Input(("B", TARGET), "int64"))
trainer = Trainer(model, loss_fn, Adam(model, lr=3e-3), clip=1.0, progress=False,
                  inputs={**inputs, "tgt_out": ag.Input(("B", TARGET), "int64")},
                  schedule=CosineDecay(3e-3, args.steps, warmup=min(100, args.steps - 1), min_lr=3e-5))
trainer.fit(lambda rng: encode([train[i] for i in rng.integers(0, len(train), 64)]), steps=args.steps)

model.eval()
tokens, alpha = model.greedy_decode(encode(heldout)["src"], max_length=TARGET)
decoded = [task.decode(row) for row in tokens]
exact = float(np.mean([d == target for d, (_, target) in zip(decoded, heldout)]))

ag.trace(model, **inputs).render(args.out / "graph.svg")
source, written = heldout[0][0], task.vocab.decode(tokens[0])
attention_heatmap(alpha[0][:len(written), :len(source)], list(source), written, args.out / "attention.svg",
                  title=f"additive attention: {source!r} → {decoded[0]!r}")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"], "heldout_exact_match": exact}))
