"""Captions: Show, Attend and Tell (Xu et al. 2015) learns to describe generated pictures of coloured shapes.

    python demos/train_captions.py                 # 1,200 steps, about a minute
    python demos/train_captions.py --tiny --steps 5

Pictures and captions come from attngraph.models.captions ("red circle top-left blue cross center </s>"); the
LSTM attends over the picture's cells before each word. Writes OUT/graph.svg and OUT/attention.svg (each
word's attention over the first held-out picture's cells), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.models import captions
from attngraph.models.show_attend_tell import ShowAttendTell, objective
from attngraph.render import attention_panels
from attngraph.train import Adam, CosineDecay, Trainer

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=1200)
parser.add_argument("--tiny", action="store_true", help="a small model and evaluation (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/captions-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

heldout = captions.batch(np.random.default_rng(1), 20 if args.tiny else 1000)
length = heldout["captions_out"].shape[1]
size = dict(channels=(4, 8), embed_dim=8, hidden=16, attention_dim=8) if args.tiny else \
    dict(channels=(16, 32), embed_dim=32, hidden=64, attention_dim=32)
model = ShowAttendTell(captions.VOCAB, image_size=24, **size)

inputs = dict(images=ag.Input(("B", 3, 24, 24)), captions_in=ag.Input(("B", length), "int64"))
trainer = Trainer(model, lambda model, **batch: objective(model, **batch, penalty=0.01), Adam(model, lr=2e-2),
                  inputs={**inputs, "captions_out": ag.Input(("B", length), "int64")}, clip=1.0, progress=False,
                  schedule=CosineDecay(2e-2, args.steps, warmup=min(30, args.steps - 1), min_lr=1e-4))
trainer.fit(lambda rng: captions.batch(rng, 32), steps=args.steps)

model.eval()
tokens, alpha = model.greedy_decode(heldout["images"], length)
metrics = captions.evaluate(tokens, alpha, heldout["captions_out"])
ag.trace(model, **inputs).render(args.out / "graph.svg")
words = captions.decode(tokens[0]).split()
side = int(np.sqrt(model.locations))
maps = alpha[0, :len(words)].reshape(len(words), side, side)
(args.out / "attention.svg").write_text(attention_panels(heldout["images"][0], maps, words), encoding="utf-8")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"], **metrics}))
