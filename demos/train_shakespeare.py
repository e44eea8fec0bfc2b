"""Shakespeare: a character-level GPT learns tinyshakespeare and writes a few lines of its own.

    python demos/train_shakespeare.py --text ../shared/data/tinyshakespeare.txt                 # 2,000 steps
    python demos/train_shakespeare.py --text ../shared/data/tinyshakespeare.txt --tiny --steps 5

Any UTF-8 text works. Writes OUT/graph.svg and OUT/attention.svg (the last layer's causal heads over a
validation passage), prints a sample and the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.inspect import attention_maps
from attngraph.models import GPT
from attngraph.render import attention_heatmap
from attngraph.train import AdamW, CosineDecay, Trainer
from attngraph.train.data import CharCorpus

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--text", type=Path, required=True, help="a UTF-8 text file")
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--tiny", action="store_true", help="a small model and a short sample (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/shakespeare-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

BLOCK = 16 if args.tiny else 64           # characters a window holds
corpus = CharCorpus.from_file(args.text)
size = dict(d_model=16, heads=2, layers=1, d_ff=32) if args.tiny else dict(d_model=128, heads=4, layers=4, d_ff=512)
model = GPT(len(corpus.vocab), max_length=BLOCK, dropout=0.0, tie_weights=True, **size)


def loss_fn(model, x, y):
    return ag.cross_entropy(model(x), y)


windows = dict(x=ag.Input(("B", BLOCK), "int64"), y=ag.Input(("B", BLOCK), "int64"))
val_loss = ag.trace(lambda x, y: loss_fn(model, x, y), **windows).compile()
trainer = Trainer(model, loss_fn, AdamW(model, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1), clip=1.0,
                  inputs=windows, progress=False,
                  schedule=CosineDecay(1e-3, args.steps, warmup=min(100, args.steps - 1), min_lr=1e-4))
trainer.fit(lambda rng: corpus.batch(rng, 12, BLOCK), steps=args.steps)

model.eval()
loss = float(val_loss(**corpus.batch(np.random.default_rng(1), 64, BLOCK, "val")))
sample = corpus.decode(model.generate(np.zeros((1, 1), np.int64), 50 if args.tiny else 500, temperature=0.8)[0])
print(f"--- sample ---\n{sample}\n--------------")

ag.trace(model, tokens=ag.Input(("B", BLOCK), "int64")).render(args.out / "graph.svg")
passage = corpus.val[:BLOCK][None]
heads = attention_maps(ag.trace(model, tokens=passage), tokens=passage)[f"transformer.layers.{size['layers'] - 1}.self_attn"]
labels = [{"\n": "⏎", " ": "␣"}.get(c, c) for c in corpus.decode(passage[0])]
attention_heatmap(heads[0], labels, labels, args.out / "attention.svg", title="causal self-attention (heads)")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"], "val_loss": loss}))
