"""Captions: Show, Attend and Tell (soft attention) learns to describe generated pictures of shapes.

Task: ``attngraph.models.captions`` — 24 × 24 pictures holding one to three coloured shapes (square, circle,
triangle, cross; red, green, blue, yellow) in the cells of a 3 × 3 grid, captioned in reading order:
"red circle top-left blue cross center </s>". Every batch is freshly generated; the held-out pictures are
drawn with a seed of their own.

Model: ``ShowAttendTell`` (Xu et al. 2015) with soft attention: two 3 × 3 convolutions (16 and 32
channels, ReLU, 2 × 2 max pooling) and a third pooling give 3 × 3 = 9 annotation vectors, one per cell; an
LSTM of 64 units, initialized from their mean, attends over them before each word (the attention MLP, the
gating scalar β, the deep output layer) under the doubly stochastic penalty (λ = 0.01). Training: Adam
(lr 2e-2, 30 warm-up steps, cosine decay to 1e-4), batches of 32, gradients clipped at norm 1, 1,200 steps
(the runs that chose them, and the default run's figures: benchmarks/MEASUREMENTS.md). Place words often attend
most to a cell next to their shape's. Evaluation: greedy decoding of the held-out pictures: ``heldout_exact_match`` (whole captions), ``heldout_token_accuracy`` (words in place,
``</s>`` included) and ``heldout_attention_on_shape`` (of the words of the correctly captioned pictures, the
fraction whose largest attention weight lies in the cell of the shape the word is about).

Writes: metrics.json, train.jsonl, loss.svg, graph.svg (+ .dot), and attention-1.svg ... attention-4.svg:
for four held-out pictures, the picture and then one panel per generated word, with its attention map
(3 × 3, bilinearly upsampled to the picture: ``attngraph.render.overlay``) lighting the picture where the
word looked.
"""
from __future__ import annotations

import numpy as np

import attngraph as ag
from attngraph.models import captions
from attngraph.models.show_attend_tell import ShowAttendTell, objective
from attngraph.render.overlay import attention_panels
from attngraph.train import Adam, CosineDecay

from .arguments import positive_int
from .common import HELDOUT_SEED, Run, demo_parser

STEPS = 1200
HELDOUT = 1000
SHOWN = 4
CONFIG = dict(image_size=24, channels=(16, 32), embed_dim=32, hidden=64, attention_dim=32)
TRAINING = dict(batch=32, lr=2e-2, warmup=30, min_lr=1e-4, clip=1.0, penalty=0.01)


def main(argv=None) -> dict:
    parser = demo_parser("captions", __doc__, steps=STEPS)
    parser.add_argument("--heldout", type=positive_int, default=HELDOUT,
                        help=f"held-out pictures (default: {HELDOUT})")
    run = Run(parser, argv)
    heldout = captions.batch(np.random.default_rng(run.seed + HELDOUT_SEED), run.args.heldout)
    length = heldout["captions_out"].shape[1]
    model = ShowAttendTell(captions.VOCAB, rng=run.rng(1), **CONFIG)
    inputs = dict(images=ag.Input(("B", 3, CONFIG["image_size"], CONFIG["image_size"])),
                  captions_in=ag.Input(("B", length), "int64"), captions_out=ag.Input(("B", length), "int64"))
    steps = run.args.steps
    run.train(model, lambda model, **batch: objective(model, **batch, penalty=TRAINING["penalty"]),
              Adam(model, lr=TRAINING["lr"]), lambda rng: captions.batch(rng, TRAINING["batch"]), inputs=inputs,
              clip=TRAINING["clip"],
              schedule=CosineDecay(TRAINING["lr"], steps, min(TRAINING["warmup"], steps - 1), TRAINING["min_lr"]))

    model.eval()
    tokens, alpha = model.greedy_decode(heldout["images"], length)
    metrics = captions.evaluate(tokens, alpha, heldout["captions_out"])
    run.graph(ag.trace(model, images=inputs["images"], captions_in=inputs["captions_in"]))
    side = int(np.sqrt(model.locations))
    for i in range(min(SHOWN, len(tokens))):
        words = captions.decode(tokens[i]).split()
        maps = alpha[i, :len(words)].reshape(len(words), side, side)
        run.path(f"attention-{i + 1}.svg").write_text(attention_panels(heldout["images"][i], maps, words),
                                                      encoding="utf-8")
    return run.finish(task="captions of generated pictures of shapes", model="Show, Attend and Tell (soft attention)",
                      config={"model": {"vocab": captions.VOCAB, **CONFIG}, "training": TRAINING,
                              "heldout": run.args.heldout, "seed": run.seed},
                      metrics=metrics)


if __name__ == "__main__":
    main()
