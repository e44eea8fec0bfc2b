"""Associative recall: additive attention finds the query in a sequence and reads the token after it.

    python demos/train_recall.py                 # 400 steps, seconds
    python demos/train_recall.py --tiny --steps 5

``AdditiveRecall`` (attngraph.models.recall) scores every position with vᵀ tanh(W_q q + W_k hₜ) (Bahdanau et
al. 2015). Writes OUT/graph.svg and OUT/attention.svg (fresh sequences, one per row: the weight sits on the
query), prints the metrics as JSON.
"""
import argparse
import json
from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.models.recall import AdditiveRecall, make_batch
from attngraph.render import attention_heatmap
from attngraph.train import Adam, Trainer

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--tiny", action="store_true", help="a small model and evaluation (smoke test)")
parser.add_argument("--out", type=Path, default=Path("runs/recall-script"))
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

VOCAB, LENGTH = 24, 8
model = AdditiveRecall(VOCAB, dim=8, hidden=8) if args.tiny else AdditiveRecall(VOCAB)


def batches(rng):
    inputs, answer, _ = make_batch(rng, 64, LENGTH, VOCAB)
    return {**inputs, "answer": answer}


def loss_fn(model, tokens, next_tokens, query, answer):
    logits, _ = model(tokens, next_tokens, query)
    return ag.cross_entropy(logits, answer)


trainer = Trainer(model, loss_fn, Adam(model, lr=3e-3), progress=False)
trainer.fit(batches, steps=args.steps)

inputs = dict(tokens=ag.Input(("B", "T"), "int64"), next_tokens=ag.Input(("B", "T"), "int64"),
              query=ag.Input(("B",), "int64"))
forward = ag.trace(model, **inputs)
forward.render(args.out / "graph.svg")
fresh, answer, where = make_batch(np.random.default_rng(1), 100 if args.tiny else 1000, LENGTH, VOCAB)
logits, alpha = forward.compile()(**fresh)
attention_heatmap(alpha[:8], [f"position {t}" for t in range(LENGTH)],
                  [f"{' '.join(map(str, fresh['tokens'][i]))} · query {fresh['query'][i]}" for i in range(8)],
                  args.out / "attention.svg", title="additive attention over the positions")
print(json.dumps({"steps": trainer.step, "loss": trainer.history[-1]["loss"],
                  "heldout_accuracy": float(np.mean(logits.argmax(-1) == answer)),
                  "heldout_attention_on_query": float(np.mean(alpha.argmax(-1) == where))}))
