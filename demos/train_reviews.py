"""Reviews: a hierarchical attention network (Yang et al. 2016) classifies whole movie reviews.

    python demos/train_reviews.py --data ../shared/data/movie_reviews.zip                 # 500 steps
    python demos/train_reviews.py --data ../shared/data/movie_reviews.zip --tiny --steps 5

Words are attended within each sentence, sentences within the review. Writes OUT/graph.svg and
OUT/attention.svg (the sentence attention over a held-out review), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.inspect import attention_maps
from attngraph.models import HAN
from attngraph.render import attention_heatmap
from attngraph.train import AdamW, CosineDecay, Trainer
from attngraph.train.data import Vocabulary, pad_documents, read_labelled_text, sentences, tokenize

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--data", type=Path, required=True, help="the movie-review polarity zip or folder")
parser.add_argument("--steps", type=int, default=500)
parser.add_argument("--tiny", action="store_true", help="a small model on 100 short reviews (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/reviews-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

SENTENCES, WORDS = (8, 16) if args.tiny else (32, 32)       # a review's last sentences, their first words
data = read_labelled_text(args.data)
if args.tiny:
    data = data.subset(np.random.default_rng(0).permutation(len(data))[:100])
train, heldout = data.split(0.1, seed=0)


def document(text):
    return [words[:WORDS] for words in map(tokenize, sentences(text)) if words][-SENTENCES:]


vocab = Vocabulary.build((word for s in document(t) for word in s) for t in train.texts)
train_ids, heldout_ids = (pad_documents([[vocab.encode(s) for s in document(t)] for t in part.texts],
                                        SENTENCES, WORDS)[0] for part in (train, heldout))
size = dict(embed_dim=8, word_hidden=8, sentence_hidden=8, attention_dim=8) if args.tiny else \
    dict(embed_dim=64, word_hidden=32, sentence_hidden=32, attention_dim=32)
model = HAN(len(vocab), classes=len(data.classes), **size)


def loss_fn(model, documents, labels):
    return ag.cross_entropy(model(documents), labels)


def batches(rng):
    rows = rng.integers(0, len(train_ids), 32)
    return {"documents": train_ids[rows], "labels": train.labels[rows]}


documents = ag.Input(("B", SENTENCES, WORDS), "int64")
trainer = Trainer(model, loss_fn, AdamW(model, lr=2e-3, weight_decay=0.05), clip=1.0, progress=False,
                  inputs={"documents": documents, "labels": ag.Input(("B",), "int64")},
                  schedule=CosineDecay(2e-3, args.steps, min_lr=1e-4))
trainer.fit(batches, steps=args.steps)

model.eval()
forward = ag.trace(model, documents=documents)
logits = forward.compile()(documents=heldout_ids)
forward.render(args.out / "graph.svg")
shown = document(heldout.texts[0])
weights = attention_maps(forward, documents=heldout_ids[:1])["sentence_attention"][0, 0, :len(shown)]
attention_heatmap(weights[:, None], ["α"], [" ".join(s[:8]) for s in shown], args.out / "attention.svg",
                  title=f"sentence attention over a held-out review: {data.classes[heldout.labels[0]]}")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"],
                  "heldout_accuracy": float(np.mean(logits.argmax(-1) == heldout.labels))}))
