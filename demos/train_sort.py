"""Sort: a GPT-style decoder reads x <s> and writes sorted(x) </s>, one symbol at a time.

    python demos/train_sort.py                 # 3,000 steps
    python demos/train_sort.py --tiny --steps 5

Writes OUT/graph.svg and OUT/attention.svg (the last layer's heads over a held-out sequence: each output
position looks up the next symbol to write), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.inspect import attention_maps
from attngraph.models import GPT
from attngraph.render import attention_heatmap
from attngraph.train import Adam, CosineDecay, Trainer
from attngraph.train.data import IGNORE, Sort

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=3000)
parser.add_argument("--tiny", action="store_true", help="a small model and evaluation (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/sort-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

task = Sort(symbols=10, min_length=1, max_length=8)
train, heldout = task.sample(50_000, "train"), task.sample(20 if args.tiny else 500, "heldout", seed=1, distinct=True)
size = dict(d_model=16, heads=2, layers=1, d_ff=32) if args.tiny else dict(d_model=64, heads=4, layers=2, d_ff=256)
model = GPT(len(task.vocab), max_length=17, dropout=0.0, **size)


def loss_fn(model, tokens, targets):      # targets are IGNORE over the source: only y </s> is learned
    return ag.cross_entropy(model(tokens), targets, ignore_index=IGNORE)


trainer = Trainer(model, loss_fn, Adam(model, lr=2e-3), clip=1.0, progress=False,
                  schedule=CosineDecay(2e-3, args.steps, warmup=min(100, args.steps - 1), min_lr=2e-5))
trainer.fit(lambda rng: task.decoder_batch([train[i] for i in rng.integers(0, len(train), 64)]), steps=args.steps)

model.eval()
answers = task.complete(model, [source for source, _ in heldout])           # greedy: x <s> → y </s>
exact = float(np.mean([a == target + "</s>" for a, (_, target) in zip(answers, heldout)]))

ag.trace(model, tokens=ag.Input(("B", "T"), "int64")).render(args.out / "graph.svg")
source, target = heldout[0]
sequence = [*source, "<s>", *target]
tokens = task.vocab.encode(sequence)[None]
weights = attention_maps(ag.trace(model, tokens=tokens), tokens=tokens)[f"transformer.layers.{size['layers'] - 1}.self_attn"]
attention_heatmap(weights[0], sequence, sequence, args.out / "attention.svg",
                  title=f"self-attention (heads) sorting {source!r}")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"], "heldout_exact_match": exact}))
