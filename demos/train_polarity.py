"""Polarity: structured self-attention (Lin et al. 2017) classifies movie-review sentences as positive or negative.

    python demos/train_polarity.py --data ../shared/data/sentence_polarity.zip                 # 1,800 steps
    python demos/train_polarity.py --data ../shared/data/sentence_polarity.zip --tiny --steps 5

The corpus (Pang & Lee 2005's sentence polarity) is a zip or folder of labelled texts. Training minimizes the
cross-entropy plus the redundancy penalty ‖AAᵀ − I‖²_F that keeps the attention hops apart. Writes
OUT/graph.svg and OUT/attention.svg (the hops over a held-out sentence), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.attention import redundancy_penalty
from attngraph.models import StructuredClassifier
from attngraph.render import attention_heatmap
from attngraph.train import AdamW, CosineDecay, Trainer
from attngraph.train.data import Vocabulary, pad_sequences, read_labelled_text, tokenize

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--data", type=Path, required=True, help="the sentence-polarity zip or folder")
parser.add_argument("--steps", type=int, default=1800)
parser.add_argument("--tiny", action="store_true", help="a small model on 500 sentences (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/polarity-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

LENGTH = 48                               # words a sentence keeps
data = read_labelled_text(args.data)
if args.tiny:
    data = data.subset(np.random.default_rng(0).permutation(len(data))[:500])
train, heldout = data.split(0.1, seed=0)
vocab = Vocabulary.build((tokenize(t) for t in train.texts), min_count=2)
train_ids, heldout_ids = (pad_sequences([vocab.encode(tokenize(t)) for t in part.texts], LENGTH)[0]
                          for part in (train, heldout))
size = dict(embed_dim=8, hidden=8, attention_dim=8, hops=2, mlp_hidden=8) if args.tiny else \
    dict(embed_dim=64, hidden=64, attention_dim=64, hops=4, mlp_hidden=64)
model = StructuredClassifier(len(vocab), classes=len(data.classes), penalty=0.1, **size)


def loss_fn(model, tokens, labels):
    logits, weights = model(tokens)
    penalty = redundancy_penalty(weights)
    return {"loss": ag.cross_entropy(logits, labels) + model.penalty * penalty, "penalty": penalty}


def batches(rng):
    rows = rng.integers(0, len(train_ids), 32)
    return {"tokens": train_ids[rows], "labels": train.labels[rows]}


trainer = Trainer(model, loss_fn, AdamW(model, lr=2e-3, weight_decay=0.05), clip=1.0, progress=False,
                  inputs={"tokens": ag.Input(("B", LENGTH), "int64"), "labels": ag.Input(("B",), "int64")},
                  schedule=CosineDecay(2e-3, args.steps, min_lr=1e-4))
trainer.fit(batches, steps=args.steps)

model.eval()
forward = ag.trace(model, tokens=ag.Input(("B", LENGTH), "int64"))
logits, weights = forward.compile()(tokens=heldout_ids)
forward.render(args.out / "graph.svg")
words = tokenize(heldout.texts[0])[:LENGTH]
attention_heatmap(weights[0][:, :len(words)], words, [f"hop {h + 1}" for h in range(size["hops"])],
                  args.out / "attention.svg", title=f"held-out sentence: {data.classes[heldout.labels[0]]}")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"],
                  "heldout_accuracy": float(np.mean(logits.argmax(-1) == heldout.labels))}))
