"""Shakespeare: a character-level GPT learns to write like tinyshakespeare.

Data: ``--text PATH``, any UTF-8 text (default: tinyshakespeare, downloaded once into the cache; offline,
give the path); the first 90% of the characters train, the last 10% validate (``CharCorpus``).

Model and training — the configuration the issue fixes (nanoGPT's "baby GPT" on a CPU): ``GPT`` with 4
layers, 4 heads, width 128 (d_ff 512), block 64, tied embeddings, no dropout; batches of 12 windows of 64
characters, 2,000 iterations; AdamW (lr 1e-3, betas 0.9/0.99, weight decay 0.1 on the matrices only, as
nanoGPT), linear warm-up over 100 iterations then cosine decay to 1e-4 at iteration 2,000, gradients
clipped at norm 1.

Evaluation: ``val_loss`` is the mean cross-entropy (nats per character) over every position of 3,200
random validation windows of 64 characters (204,800 predictions, fixed seed); ``train_loss_eval`` is the
same on training windows. A quick validation loss (20 batches) is also logged every 250 iterations for
the loss curve. ``sample`` in metrics.json is 500 characters generated after a newline (temperature 0.8).

Writes: metrics.json (with the sample), train.jsonl, loss.svg, graph.svg (+ .dot), and attention.svg:
every layer's and head's causal self-attention over a validation passage.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import attngraph as ag
from attngraph.core import functional as F
from attngraph.inspect import attention_maps
from attngraph.models import GPT
from attngraph.train import AdamW, CosineDecay
from attngraph.train.data import CharCorpus, tinyshakespeare

from .arguments import positive_int
from .common import Run, demo_parser

STEPS = 2000
CONFIG = dict(d_model=128, heads=4, layers=4, d_ff=512, max_length=64, dropout=0.0, tie_weights=True)
TRAINING = dict(batch=12, block=64, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, warmup=100, min_lr=1e-4,
                clip=1.0, eval_every=250)
EVAL_WINDOWS, EVAL_BATCH = 3200, 64
SAMPLE = dict(characters=500, temperature=0.8)
SHOWN = 32          # characters of the attention heatmap


class AdamWMatrices(AdamW):
    """AdamW that decays only the matrices (weights and embeddings), not the biases and LayerNorm gains,
    as nanoGPT does."""

    def update(self, param, grad, state, scale):
        m, v = state
        decay = self.weight_decay if param.ndim >= 2 else 0.0
        self.kernel(param, grad, m, v, self.lr, self.steps, self.betas, self.eps, decay, scale)


def main(argv=None) -> dict:
    parser = demo_parser("shakespeare", __doc__, steps=STEPS)
    parser.add_argument("--text", type=Path, help="a UTF-8 text file (default: tinyshakespeare, downloaded once)")
    parser.add_argument("--eval-windows", type=positive_int, default=EVAL_WINDOWS,
                        help=f"validation windows of the final val_loss (default: {EVAL_WINDOWS})")
    parser.add_argument("--sample-length", type=positive_int, default=SAMPLE["characters"],
                        help=f"characters to generate (default: {SAMPLE['characters']})")
    run = Run(parser, argv, paths={"text": "the text file"})
    args, text = run.args, run.args.text
    corpus = CharCorpus.from_file(text or tinyshakespeare())
    block = TRAINING["block"]
    corpus.check(block)
    model = GPT(len(corpus.vocab), rng=run.rng(1), **CONFIG)

    def loss_fn(model, x, y):
        return F.cross_entropy(model(x), y)

    logits = ag.trace(model, tokens=ag.Input(("B", block), "int64"))
    loss_of = ag.trace(lambda x, y: loss_fn(model, x, y), x=ag.Input(("B", block), "int64"),
                       y=ag.Input(("B", block), "int64")).compile()

    def mean_loss(split: str, windows: int, seed: int) -> float:
        rng = np.random.default_rng([run.seed, seed])
        sizes = [EVAL_BATCH] * (windows // EVAL_BATCH) + ([windows % EVAL_BATCH] if windows % EVAL_BATCH else [])
        return float(sum(n * loss_of(**corpus.batch(rng, n, block, split)) for n in sizes) / windows)

    optimizer = AdamWMatrices(model, lr=TRAINING["lr"], betas=TRAINING["betas"], weight_decay=TRAINING["weight_decay"])
    run.train(model, loss_fn, optimizer, lambda rng: corpus.batch(rng, TRAINING["batch"], block),
              clip=TRAINING["clip"], tokens=lambda batch: batch["x"].size,
              schedule=CosineDecay(TRAINING["lr"], args.steps, min(TRAINING["warmup"], args.steps - 1),
                                   TRAINING["min_lr"]),
              eval_every=TRAINING["eval_every"], eval_fn=lambda model: {"val_loss": mean_loss("val", 20 * 12, 2)})

    model.eval()
    val_loss = mean_loss("val", args.eval_windows, 3)
    train_loss = mean_loss("train", args.eval_windows, 4)
    newline = corpus.vocab.index.get("\n", 0)
    generated = model.generate(np.array([[newline]]), args.sample_length, temperature=SAMPLE["temperature"],
                               seed=run.seed)
    sample = corpus.decode(generated[0, 1:])
    print(f"--- sample ---\n{sample}\n--------------")

    run.graph(logits)
    start = len(corpus.val) // 2
    start += int(np.flatnonzero(corpus.val[start:] == newline)[0]) + 1 if newline in corpus.val[start:] else 0
    window = corpus.val[start:start + SHOWN][None]
    maps = attention_maps(ag.trace(model, tokens=window), tokens=window)
    weights = np.stack([maps[f"transformer.layers.{i}.self_attn"][0] for i in range(CONFIG["layers"])])
    labels = [{"\n": "⏎", " ": "␣"}.get(c, c) for c in corpus.decode(window[0])]
    run.heatmap("attention.svg", weights, labels, labels, title="causal self-attention (layer × head) on a "
                "validation passage: row t attends to the characters ≤ t")

    return run.finish(task="character-level language model" + (f" ({text.name})" if text else " (tinyshakespeare)"),
                      model="GPT",
                      config={"text": str(text or "tinyshakespeare"), "vocab": len(corpus.vocab),
                              "train_characters": len(corpus.train), "val_characters": len(corpus.val),
                              "model": CONFIG, "training": TRAINING, "eval_windows": args.eval_windows,
                              "sample": SAMPLE, "seed": run.seed},
                      metrics={"val_loss": val_loss, "train_loss_eval": train_loss},
                      extra={"sample": sample})


if __name__ == "__main__":
    main()
