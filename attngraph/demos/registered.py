"""``attngraph train MODEL``: train a registered model on its task, as the demos train theirs.

The data (``--data``) is, by default, the model's own task (``ModelSpec.batch``: a seeded synthetic task that
needs its mechanism), or:

- a sequence task of ``attngraph.train.data`` by name (copy, reverse, sort, addition, dates), for a model that
  reads ``src, tgt_in, tgt_out`` (an encoder-decoder, its registered loss) or ``tokens, targets`` (decoder-only:
  the sequences x <s> y </s>, the loss on y </s> only); the model's vocabulary settings are the task's;
- a UTF-8 text file, for a model that reads ``tokens, targets``: a character language model on windows of
  ``BLOCK`` characters (at most the model's ``max_length``), its vocabulary the text's characters.

Training: Adam at ``--lr`` with a linear warm-up over the first 10% of the steps and cosine decay to 1% of it,
gradients clipped at norm 1, ``--batch`` examples a step. Every ``--checkpoint-every`` steps and at the end the
run's state is saved to OUT/checkpoint.npz; ``--resume`` continues from it to ``--steps`` in all, with the same
model and data settings (those of the checkpoint's model are checked), and the resumed run repeats the
uninterrupted one (``Trainer``). The output folder gets what a demo's gets (``Run``): train.jsonl, loss.svg,
metrics.json, graph.svg, and attention-N.svg, the attention maps of up to ``PICTURES`` modules on the first
example of a batch; at every checkpoint the first module's map on that example is drawn too
(attention-0-stepS.svg), which ``attngraph view OUT``'s dashboard shows in step order.
"""
from __future__ import annotations

import numpy as np

from ..core import Input
from ..core import functional as F
from ..core.api import trace
from ..errors import DataError, RenderError
from ..inspect import attention_maps
from ..train import Adam, CosineDecay
from ..train.data import TASKS, CharCorpus
from ..train.data.tasks import IGNORE
from .common import Run

BLOCK = 64              # characters a window of a text file holds, at most
PICTURES = 4            # attention modules drawn
VOCABULARY_SETTINGS = ("vocab", "src_vocab", "tgt_vocab")
ENCODER_DECODER = {"src", "tgt_in", "tgt_out"}
DECODER_ONLY = {"tokens", "targets"}


class Data:
    """What ``--data`` gives a model of ``spec`` that reads the batch keys ``keys``: the settings it imposes on
    the model (its vocabulary), ``batches(model, rng, size)``, the loss, and the ``Input`` specs to trace it on
    (None: the first batch's shapes). A name or file that does not fit the model raises ``DataError``."""

    def __init__(self, spec, data: str | None, keys: set[str]):
        self.name, self.settings, self.inputs, self.loss, self.text = data or "task", {}, None, spec.loss, None
        if data is None or data == "task":
            self.batches = spec.batch
            return
        if keys not in (ENCODER_DECODER, DECODER_ONLY) or (data not in TASKS and keys != DECODER_ONLY):
            raise DataError(f"--data {data}: {spec.name} (reading {', '.join(sorted(keys))}) trains on its own task"
                            + (f" or one of {', '.join(TASKS)}" if keys == ENCODER_DECODER else "")
                            + ("; a task or a text file feeds a model reading src, tgt_in, tgt_out or tokens, "
                               "targets" if keys not in (ENCODER_DECODER, DECODER_ONLY) else ""))
        task = TASKS[data]() if data in TASKS else None
        self.text = None if task else CharCorpus.from_file(data)
        self.settings = {k: len(task.vocab if task else self.text.vocab) for k in VOCABULARY_SETTINGS
                         if k in spec.defaults}
        if keys == ENCODER_DECODER:
            self.batches = lambda model, rng, size: task.batch(task.pairs(rng, size))
            self.inputs = dict(src=Input(("B", "S"), "int64"), tgt_in=Input(("B", "T"), "int64"),
                               tgt_out=Input(("B", "T"), "int64"))
            return
        self.loss = lambda model, tokens, targets: F.cross_entropy(model(tokens), targets, ignore_index=IGNORE)
        self.inputs = dict(tokens=Input(("B", "T"), "int64"), targets=Input(("B", "T"), "int64"))
        if task:
            self.batches = lambda model, rng, size: task.decoder_batch(task.pairs(rng, size))
        else:
            self.batches = lambda model, rng, size: _renamed(self.text.batch(rng, size, _block(model)))

    def check(self, model) -> None:
        """Raise ``DataError`` now if a text is too short for ``model``'s windows (before any training)."""
        if self.text is not None:
            self.text.check(_block(model))


def train(run: Run, spec, model, data: Data, batch: int, lr: float, checkpoint_every: int,
          resume: bool, model_info: dict) -> dict:
    """Train ``model`` (of ``spec``) on ``data`` in ``run`` (module docstring); returns the metrics."""
    steps = run.args.steps
    checkpoint = run.out / "checkpoint.npz"
    example = data.batches(model, np.random.default_rng([run.seed, 2]), 1)
    feeds = {k: v for k, v in example.items() if k in spec.inputs(model)}
    run.train(model, data.loss, Adam(model, lr=lr), lambda rng: data.batches(model, rng, batch),
              inputs=data.inputs, clip=1.0, schedule=CosineDecay(lr, steps, min(steps // 10, steps - 1), lr / 100),
              checkpoint_every=checkpoint_every, checkpoint_path=checkpoint, model_info=model_info,
              resume=checkpoint if resume else None, callbacks=[_snapshots(run, model, feeds, checkpoint_every)])
    run.trainer.save(checkpoint)
    run.path(checkpoint.name)
    model.eval()
    run.graph(trace(model, **spec.inputs(model)))
    _pictures(run, model, feeds)
    return run.finish(task=data.name, model=spec.name, config=model_info["config"],
                      metrics={"checkpoint": checkpoint.name},
                      extra={"batch": batch, "lr": lr})


def _pictures(run: Run, model, feeds: dict, modules: int = PICTURES, suffix: str = "") -> None:
    """attention-N{suffix}.svg: the maps of the first ``modules`` attention modules with one map each on ``feeds``."""
    maps = [(scope, value[0]) for scope, value in attention_maps(trace(model, **feeds), **feeds).items()
            if isinstance(value, np.ndarray) and value.ndim in (3, 4)]
    for i, (scope, weights) in enumerate(maps[:modules]):
        filename = f"attention-{i}{suffix}.svg"
        try:
            run.heatmap(filename, weights, range(weights.shape[-1]), range(weights.shape[-2]),
                        title=f"{scope or 'model'}: attention{suffix.replace('-step', ' at step ')}")
        except RenderError:
            run.files.remove(filename)


def _snapshots(run: Run, model, feeds: dict, every: int | None):
    """A Trainer callback drawing the first attention module's map on ``feeds`` at every checkpoint (in
    evaluation mode: no dropout), so that the dashboard shows attention over training."""
    def snapshot(trainer, record) -> None:
        if every and record["kind"] == "train" and trainer.step % every == 0:
            mode = model.training
            _pictures(run, model.eval(), feeds, modules=1, suffix=f"-step{trainer.step}")
            model.train(mode)
    return snapshot


def _block(model) -> int:
    """The window of a character language model: ``BLOCK``, or its position table's length if shorter."""
    positions = getattr(model, "max_length", None)
    return min(BLOCK, positions) if positions else BLOCK


def _renamed(windows: dict) -> dict:
    return {"tokens": windows["x"], "targets": windows["y"]}
