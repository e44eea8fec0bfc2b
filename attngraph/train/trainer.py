"""``Trainer``: trace a model's loss once, compile forward and backward, and run the training loop.

    trainer = Trainer(model, loss_fn, AdamW(model, lr=3e-4), schedule=CosineDecay(3e-4, 2000, 100),
                      clip=1.0, eval_every=100, eval_fn=evaluate, patience=5, metrics_path="run/metrics.jsonl")
    history = trainer.fit(batches, steps=2000)      # batches(rng) -> {input name: array}
    trainer.save("run/last")                        # resume later: trainer.load("run/last"); trainer.fit(...)

``loss_fn(model, **batch)`` returns the scalar loss, or a dict holding ``"loss"`` and other scalars to log
(an accuracy, a penalty). It is traced once — on ``inputs`` (``ag.Input`` specs, for batches whose sizes
vary) or else on the first batch's shapes — differentiated with respect to the optimizer's parameters,
and compiled for ``device``.

Devices: the Trainer moves the model to ``device`` ("cpu" or "cuda") once, when it is made (``Module.to``).
On "cuda" the parameters, activations, gradients and optimizer state then stay on the GPU for the whole run:
each micro-batch's inputs are copied there, the gradients are accumulated, clipped and applied there
(attngraph/train/optim.py), and only the logged scalars (the loss, the loss_fn's other outputs, the gradient
norm) come back to the host; a checkpoint copies the parameters and the optimizer state to the host, and
``load`` puts them back on the GPU. The same seed gives the same run on either device, up to rounding.

Randomness is a function of (seed, step, micro-batch): micro-batch k of optimizer step t is drawn by
``batches(np.random.default_rng(s))`` and dropout's masks are seeded by ``s'``, where s and s' are
children of ``np.random.SeedSequence([seed, t, k])``. So the same seed gives the same loss curve, and a
run resumed from a checkpoint (which stores the seed and the step) repeats the uninterrupted run exactly.

Each step appends a JSON line to ``metrics_path`` (``kind`` "train": step, loss, lr, grad_norm, seconds,
examples or tokens per second, the loss_fn's other scalars; ``kind`` "eval": step and ``eval_fn``'s
metrics) and passes the same record to every callback, ``callback(trainer, record)``; a callback may call
``trainer.request_stop()``. Every ``eval_every`` steps ``eval_fn(model)`` runs with the model in eval mode
(and once, unrecorded, before the trainer's first step: an ``eval_fn`` returning anything but a dict of numbers,
or no ``monitor`` under early stopping, fails before the parameters change);
early stopping ends the run after ``patience`` evaluations without improvement of ``monitor`` (a NaN never
improves on anything; an infinite value is a value like any other). Every ``checkpoint_every`` steps, after
the evaluation, the checkpoint at ``checkpoint_path`` is replaced (atomically).

Progress (``progress``): by default (None), when stderr is a terminal, a tqdm bar shows loss, lr and
throughput, and when it is not (a CI log, ``nohup``), a line on stderr every ``log_every`` steps (default:
20 lines per ``fit``) and at the last step gives the same, and each evaluation gets a line too. ``True``
always draws the bar, ``False`` shows nothing. The kernels numba compiles during a step (the first step of a
cold cache; ``CompileProgress``) are shown the same way unless ``compile_progress=False``. Apart from these
displays the trainer only logs (``logging``); it never prints.

A diverging run (a loss or gradient norm that is NaN or infinite, e.g. from too large a learning rate) is
handled as ``on_nonfinite`` says; the step's record is logged with its loss and norm in every case:
"continue" (the default, as a PyTorch loop does): apply the update anyway and go on; the parameters usually
become NaN, evaluations then never improve and early stopping, if any, ends the run. A warning is logged at
the first such step of each ``fit``. "skip": leave the parameters and the optimizer's state as they are and
go on with the next batch (the step still counts, and a warning is logged each time): one bad batch
cannot ruin the model. "raise": stop with ``NonFiniteError`` before the update, leaving the model, the
optimizer and ``step`` as after the last good step (so that ``save`` writes a usable checkpoint).

Several processes (``comm``, attngraph/train/distributed.py): launched by ``mpiexec -n W`` (or ``srun``), W
trainers, one per rank, split each step's W·a global micro-batches (a = ``accumulate``): rank r runs micro-batches
r·a .. r·a + a − 1, seeded by their global index as above, and the gradients, the loss, the other scalars and the
example counts are summed over the ranks before the norm is taken and clipping applied. So W ranks with
``accumulate=a`` take the steps of one process with ``accumulate=W·a`` (bit for bit for W=2, a=1; otherwise the
sums' order differs, ~1e-7 relative), every rank decides ``on_nonfinite``, early stopping and what it logs from the
same numbers, and a checkpoint resumes on any number of ranks (with the same W·a, exactly). Rank 0's parameters
are broadcast when the trainer is made, after a check that every rank has the same parameters, model, attngraph
version and gradient schedule; before each step's sums the ranks check that they are at the same step of the same
``fit`` with the same batch layout (``DistributedError`` on every rank otherwise). Only rank 0 writes the metrics
file and checkpoints and shows progress; callbacks run on every rank. ``eval_fn`` runs on every rank and its
metrics are averaged over the ranks, weighted by its ``examples`` entry when it returns one: an ``eval_fn`` that
evaluates only ``trainer.world.shard(n)`` of its n examples (and returns ``examples``) is sharded (it calls no
collective itself). The first step, evaluation and update run on rank 0 first, so that numba's kernels are
compiled into the cache once.
"""
from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..core.api import trace
from ..core.device import backend
from ..core.tracing import UPDATE_PREFIX, Input
from ..errors import AttnGraphError, CheckpointError, DataError, NonFiniteError
from ..nn import checks
from ..version import __version__
from . import checkpoint, distributed
from .optim import GradientAccumulator, Optimizer, clip_factor, compile_ahead, global_norm
from .progress import CompileProgress, StepClock
from .schedules import Schedule, from_config

logger = logging.getLogger(__name__)


class Trainer:
    """Minimizes ``loss_fn(model, **batch)`` with ``optimizer``; the module docstring describes the loop.

    schedule: the learning rate of each step (default: the optimizer's, constant). inputs: ``ag.Input``
    specs of the batch (default: the first batch's shapes). device: "cpu" or "cuda", where the model is moved
    and trained. clip: the largest global gradient norm. accumulate: micro-batches per optimizer step.
    eval_every, eval_fn(model) -> {metric: value}, monitor, mode ("min"/"max"), patience: evaluation and early
    stopping. callbacks: ``callback(trainer, record)``. metrics_path: the JSONL file. checkpoint_every,
    checkpoint_path: periodic checkpoints. tokens(batch): its token count, to report tokens rather than
    examples per second. seed: of batches and dropout. progress, log_every, compile_progress: what is shown
    while training (module docstring). model_info: the model's name and config, stored in checkpoints.
    on_nonfinite: "continue", "skip" or "raise", what a step with a NaN or infinite loss or gradient norm does
    (module docstring). comm: the ranks training together (a ``distributed.World`` or an mpi4py communicator;
    default ``distributed.world()``: MPI's world under ``mpiexec``, else this process alone; ``distributed.SELF``
    trains alone under ``mpiexec`` too). bucket_bytes: the size of the gradients' all-reduce buckets.
    """

    def __init__(self, model, loss_fn: Callable, optimizer: Optimizer, *, schedule: Schedule | None = None,
                 inputs: dict[str, Input] | None = None, device: str = "cpu", clip: float | None = None,
                 accumulate: int = 1, eval_every: int | None = None, eval_fn: Callable | None = None,
                 monitor: str = "val_loss", mode: str = "min", patience: int | None = None,
                 callbacks: Sequence[Callable] = (), metrics_path=None, checkpoint_every: int | None = None,
                 checkpoint_path=None, tokens: Callable | None = None, seed: int = 0,
                 progress: bool | None = None, log_every: int | None = None, compile_progress: bool = True,
                 model_info: dict | None = None, on_nonfinite: str = "continue", comm=None,
                 bucket_bytes: int = distributed.BUCKET_BYTES):
        checks.integer("accumulate", accumulate)
        for name, value in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
            if value is not None:
                checks.integer(name, value)
        if patience is not None:
            checks.integer("patience", patience, minimum=0)
        if clip is not None:
            checks.positive("clip", clip)
        for name, value in [("eval_fn", eval_fn), *((f"callbacks[{i}]", c) for i, c in enumerate(callbacks))]:
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be a function, got {value!r} ({type(value).__name__})")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if (eval_every is not None or patience is not None) and eval_fn is None:
            raise ValueError("eval_every and patience need an eval_fn")
        if (checkpoint_every is None) != (checkpoint_path is None):
            raise ValueError("checkpoint_every and checkpoint_path go together")
        if on_nonfinite not in ("continue", "skip", "raise"):
            raise ValueError(f"on_nonfinite must be 'continue', 'skip' or 'raise', got {on_nonfinite!r}")
        if progress is not None:
            checks.flag("progress", progress)
        if log_every is not None:
            checks.integer("log_every", log_every)
        checks.flag("compile_progress", compile_progress)
        self._to_host = backend(device).get
        self.model, self.loss_fn, self.optimizer, self.schedule = model.to(device), loss_fn, optimizer, schedule
        compile_ahead("sum_of_squares", 1, {}, (p for _, p in optimizer.named))     # the norm of every step
        self.inputs, self.device, self.clip, self.accumulate = inputs, device, clip, accumulate
        self.eval_every, self.eval_fn, self.patience = eval_every, eval_fn, patience
        self.monitor, self.mode = monitor, mode
        self.callbacks, self.tokens, self.seed, self.progress = list(callbacks), tokens, seed, progress
        self.metrics_path = None if metrics_path is None else Path(metrics_path)
        self.checkpoint_every, self.checkpoint_path = checkpoint_every, checkpoint_path
        self.model_info, self.on_nonfinite = model_info, on_nonfinite
        self.world = distributed.as_world(comm)
        self.log_every, self.compile_progress = log_every, compile_progress
        self.history: list[dict] = []
        self.best: dict | None = None          # {"step", "value"} of the best evaluation of `monitor`
        self.evals_without_improvement = 0
        self._stop = False
        self._warned_nonfinite = False         # "continue" warns once per fit
        self._executable = None
        self._metrics: list[str] = []          # names of the loss_fn's other scalars: outputs 1, 2, ...
        self._slots: list[int | None] = []     # per optimizer parameter: its gradient's output index
        self._buckets: distributed.GradientBuckets | None = None
        self._bucket_bytes = checks.integer("bucket_bytes", bucket_bytes)
        self._compiled: set[str] = set()       # what has run once (rank 0 first: numba's cache)
        self._evaluation_checked = False       # the sanity evaluation has run (once per trainer)
        self._join()

    @property
    def step(self) -> int:
        """Optimizer steps taken so far (restored by ``load``)."""
        return self.optimizer.steps

    def request_stop(self) -> None:
        """End ``fit`` after the current step."""
        self._stop = True

    def fit(self, batches: Callable[[np.random.Generator], dict], steps: int) -> list[dict]:
        """Train until ``steps`` optimizer steps have been taken in all (a resumed run continues from its
        step), or early stopping or a callback ends it; returns the records of this call."""
        checks.integer("steps", steps, minimum=0)
        self._writable(self.metrics_path, "metrics_path")
        self._writable(None if self.checkpoint_path is None else checkpoint.file_of(self.checkpoint_path),
                       "checkpoint_path")
        self.world.check_same({"steps": steps, "step": self.step},
                              f"the start of fit(steps={steps}) at step {self.step}")
        self._stop, self._warned_nonfinite, start = False, False, len(self.history)
        shown = self.progress if self.world.rank == 0 else False
        clock = StepClock(self.step, steps)
        bar = tqdm(total=steps, initial=self.step, unit="step", dynamic_ncols=True,
                   disable=None if shown is None else not shown)
        every = (self.log_every or max(1, steps // 20)) if shown is None and bar.disable else None
        compiles = CompileProgress(shown if self.compile_progress else False)
        with bar, compiles:
            if self.eval_every and self.step < steps and not self._evaluation_checked:
                self._check_evaluation()
            while self.step < steps and not self._stop:
                record, finite = self._train_step(batches)
                self._emit(record)
                if not finite:
                    self._report_nonfinite(record)
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.3g}",
                                **{_rate(k): f"{v:.0f}" for k, v in record.items() if k.endswith("_per_second")})
                if every and (self.step % every == 0 or self.step == steps):
                    _line(f"step {self.step}/{steps}", record, clock.text(self.step))
                if self.eval_every and self.step % self.eval_every == 0:
                    evaluation = self.evaluate()
                    if every:
                        _line(f"step {self.step} evaluation", evaluation)
                if self.checkpoint_every and self.step % self.checkpoint_every == 0:
                    self.save(self.checkpoint_path)
                compiles.close()
                if self.world.size > 1:
                    self._stop = self.world.any(self._stop, f"step {self.step}: the agreement to stop")
        return self.history[start:]

    def evaluate(self) -> dict:
        """Run ``eval_fn(model)`` in eval mode, record its metrics, and update early stopping."""
        metrics = self._reduced_metrics(self._evaluated())
        record = {"kind": "eval", "step": self.step, **metrics}
        logger.info("step %d: %s", self.step, ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
        if self.patience is not None:
            self._early_stopping(metrics)
        self._emit(record)
        return record

    def _evaluated(self) -> dict:
        """``eval_fn(model)``'s metrics, run in eval mode, checked to be a dict of numbers."""
        training = self.model.training
        self.model.eval()
        try:
            with distributed.first_time(self.world, self._compiled, "eval", "the first evaluation"):
                return _metrics(self.eval_fn(self.model))
        finally:
            self.model.train(training)

    def _check_evaluation(self) -> None:
        """The sanity evaluation: ``eval_fn`` run once before the first step of a run that evaluates, so that one
        returning anything but a dict of numbers, or no ``monitor`` under early stopping, fails before the
        parameters change. Its metrics are not recorded."""
        metrics = self._evaluated()
        if self.patience is not None:
            _monitored(metrics, self.monitor)
        self._evaluation_checked = True

    def save(self, path) -> Path:
        """A checkpoint of the model, the optimizer and the trainer's state (step, seed, schedule, early
        stopping), from which ``load`` resumes exactly."""
        state = {"step": self.step, "rng": {"seed": self.seed, "scheme": "SeedSequence([seed, step, micro_batch])"},
                 "schedule": None if self.schedule is None else self.schedule.config(),
                 "early_stopping": {"best": self.best, "evals_without_improvement": self.evals_without_improvement},
                 "model": self.model_info, "global_micro_batches": self.accumulate * self.world.size}
        if self.world.rank == 0:
            checkpoint.save(path, self.model, self.optimizer, state)
        self.world.barrier(f"step {self.step}: the checkpoint written by rank 0")
        return checkpoint.file_of(path)

    def load(self, path) -> dict:
        """Restore a checkpoint written by ``save``: the model, the optimizer (its state and hyper-parameters,
        as PyTorch's ``load_state_dict`` does), the schedule, the seed and early stopping; returns its
        metadata. Everything is checked before anything changes: a checkpoint that does not fit raises
        ``CheckpointError`` and leaves this trainer, its model, optimizer and schedule as they were."""
        saved = checkpoint.read(path)
        seed, schedule, stopping = _trainer_state(saved, path)
        total = self.accumulate * self.world.size
        if saved.metadata.get("global_micro_batches", total) != total:
            logger.warning("%s was trained on %d micro-batches a step, this trainer takes %d (accumulate %d x %d "
                           "ranks): the resumed run differs from the original", path, saved.metadata["global_micro_batches"],
                           total, self.accumulate, self.world.size)
        checkpoint.restore(saved, self.model, self.optimizer)
        self.seed, self.schedule = seed, schedule
        self.best, self.evals_without_improvement = stopping["best"], stopping["evals_without_improvement"]
        return saved.metadata

    def _train_step(self, batches) -> tuple[dict, bool]:
        """One optimizer step: its record, and whether its loss and gradient norm are finite."""
        t = self.step + 1
        if self.schedule is not None:
            self.optimizer.lr = self.schedule(t)
        started = time.perf_counter()
        accumulator, losses, extras, count = GradientAccumulator(), [], {}, 0
        total, first = self.accumulate * self.world.size, self.accumulate * self.world.rank
        with distributed.first_time(self.world, self._compiled, "step", "the first training step"):
            for k in range(first, first + self.accumulate):
                batch_seed, dropout_seed = np.random.SeedSequence([self.seed, t, k]).spawn(2)
                batch = _checked_batch(batches(np.random.default_rng(batch_seed)), t, k)
                outputs = self._run(batch, dropout_seed)
                loss, *metrics = (float(self._to_host(value)) for value in outputs[:1 + len(self._metrics)])
                losses.append(loss)
                for name, value in zip(self._metrics, metrics):
                    extras[name] = extras.get(name, 0.0) + value / total
                accumulator.add([None if i is None else outputs[i] for i in self._slots])
                count += self.tokens(batch) if self.tokens else len(next(iter(batch.values())))
        grads, loss, extras, count = self._summed(t, batch, accumulator.grads, losses, extras, count)
        norm = global_norm(grads) / total
        finite = math.isfinite(loss) and math.isfinite(norm)
        if finite or self.on_nonfinite == "continue":
            factor = clip_factor(norm, self.clip) if self.clip is not None else 1.0
            with distributed.first_time(self.world, self._compiled, "update", "the first update"):
                self.optimizer.step(grads, scale=factor / total)
        elif self.on_nonfinite == "skip":
            self.optimizer.step([None] * len(self.optimizer.named))        # the step counts; nothing changes
        seconds = time.perf_counter() - started
        unit = "tokens" if self.tokens else "examples"
        return {"kind": "train", "step": t, "loss": loss, "lr": self.optimizer.lr, "grad_norm": norm, **extras,
                "seconds": seconds, f"{unit}_per_second": count / seconds}, finite

    def _summed(self, t: int, batch: dict, grads: list, losses: list, extras: dict, count: int):
        """The step's gradients, mean loss, other scalars and example count, summed over the ranks; first the
        ranks check that they are at the same step with the same batch layout."""
        if self.world.size == 1:
            return grads, float(np.mean(losses)), extras, count
        self.world.check_same({"step": t, "batch layout": _layout(batch)},
                              f"step {t}, before the sums")
        if self._buckets is None:
            self._buckets = distributed.GradientBuckets(self.world, _like(grads), self._bucket_bytes)
        grads = self._buckets.reduce(grads, f"step {t}: the gradient all-reduce")
        scalars = self.world.allreduce_sum(np.array([np.sum(losses), count, *extras.values()], np.float64),
                                           f"step {t}: the all-reduce of the loss and metrics")
        loss = float(scalars[0] / (self.accumulate * self.world.size))
        return grads, loss, dict(zip(extras, scalars[2:].tolist())), int(scalars[1])

    def _reduced_metrics(self, metrics: dict) -> dict:
        """Every rank's evaluation metrics averaged over the ranks, weighted by ``examples`` when given (summed)."""
        if self.world.size == 1:
            return metrics
        self.world.check_same({"evaluation metrics": sorted(metrics)}, f"step {self.step}: the evaluation")
        weight = metrics.get("examples", 1.0)
        names = [name for name in metrics if name != "examples"]
        sums = self.world.allreduce_sum(np.array([weight, *(metrics[n] * weight for n in names)], np.float64),
                                        f"step {self.step}: the all-reduce of the evaluation")
        reduced = {name: float(value / sums[0]) for name, value in zip(names, sums[1:])}
        return {**reduced, "examples": float(sums[0])} if "examples" in metrics else reduced

    def _join(self) -> None:
        """Check that every rank trains the same parameters of the same model with the same attngraph and
        gradient schedule, then give them rank 0's values."""
        if self.world.size == 1:
            return
        signature = {"attngraph version": __version__,
                     "model": f"{type(self.model).__module__}.{type(self.model).__qualname__}",
                     "model_info": self.model_info,
                     "parameters": [(name, tuple(p.shape), str(p.dtype)) for name, p in self.optimizer.named],
                     "gradient schedule": {"accumulate": self.accumulate, "bucket_bytes": self._bucket_bytes,
                                           "optimizer": type(self.optimizer).__name__, "device": self.device}}
        self.world.check_same(signature, "the start-up check of the trainer")
        distributed.broadcast_parameters(self.world, self.optimizer.named)

    def _writable(self, path: Path | None, name: str) -> None:
        """Fail before training when ``path``'s folder cannot be made (a file on the way)."""
        if path is None or self.world.rank != 0:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise AttnGraphError(f"{name} {str(path)!r} cannot be written: {e.strerror}: {e.filename}") from None

    def _report_nonfinite(self, record: dict) -> None:
        what = f"step {record['step']}: the loss is {record['loss']} and the gradient norm {record['grad_norm']}"
        advice = "lower the learning rate, clip the gradients (clip=...) or look for bad values in the batch"
        if self.on_nonfinite == "raise":
            raise NonFiniteError(f"{what}; the model and the optimizer are as after step {self.step} "
                                 f"(on_nonfinite='raise'): {advice}")
        if self.on_nonfinite == "skip":
            logger.warning("%s: update skipped (on_nonfinite='skip')", what)
        elif not self._warned_nonfinite:
            self._warned_nonfinite = True
            logger.warning("%s; training goes on (on_nonfinite='continue'; further such steps are not reported): %s",
                           what, advice)

    def _run(self, batch: dict, dropout_seed: np.random.SeedSequence) -> tuple:
        if self._executable is None:
            self._compile(batch)
        if "rng_seed" in self._executable.graph.inputs:
            batch = {**batch, "rng_seed": np.int64(dropout_seed.generate_state(1, np.uint64)[0] >> np.uint64(1))}
        return self._executable.run_on_device(**batch)

    def _compile(self, batch: dict) -> None:
        """Trace the objective, differentiate it with respect to the optimizer's parameters, compile."""
        def objective(**inputs):
            result = self.loss_fn(self.model, **inputs)
            result = dict(result) if isinstance(result, dict) else {"loss": result}
            if "loss" not in result:
                raise AttnGraphError(f"loss_fn must return the loss or a dict with a 'loss', not {sorted(result)}")
            return {"loss": result.pop("loss"), **result}

        graph = trace(objective, **(self.inputs or batch))
        outputs = [node for node in graph.outputs if not node.name.startswith(UPDATE_PREFIX)]   # not returned
        for node in outputs:
            if node.shape != ():
                raise AttnGraphError(f"loss_fn's output {node.name!r} has shape {node.shape}; the Trainer logs "
                                     "scalars only (compute other outputs in eval_fn)")
        position = {id(p): i for i, (_, p) in enumerate(self.optimizer.named)}
        wrt = [node for node in graph.parameters.values() if id(node.value) in position]
        if not wrt:
            raise AttnGraphError("the loss uses none of the optimizer's parameters")
        self._executable = graph.grad(wrt, output="loss").compile(self.device)
        self._metrics = [node.name for node in outputs[1:]]
        self._slots = [None] * len(self.optimizer.named)
        for j, node in enumerate(wrt):          # the gradients follow the graph's own outputs, in wrt's order
            self._slots[position[id(node.value)]] = len(outputs) + j

    def _early_stopping(self, metrics: dict) -> None:
        value = _monitored(metrics, self.monitor)
        better = not math.isnan(value) and (self.best is None or (
            value < self.best["value"] if self.mode == "min" else value > self.best["value"]))
        if better:
            self.best, self.evals_without_improvement = {"step": self.step, "value": value}, 0
        else:
            self.evals_without_improvement += 1
            if self.evals_without_improvement >= self.patience:
                logger.info("early stopping at step %d: %s has not improved on %.4g (step %d) for %d evaluations",
                            self.step, self.monitor, self.best["value"], self.best["step"], self.patience)
                self.request_stop()

    def _emit(self, record: dict) -> None:
        self.history.append(record)
        if self.metrics_path is not None and self.world.rank == 0:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with self.metrics_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        for callback in self.callbacks:
            callback(self, record)


def _checked_batch(batch, step: int, micro_batch: int) -> dict:
    """``batches(rng)``'s result, refused when it is not a dict of arrays or holds no example (its loss, a mean
    over nothing, would be NaN)."""
    if not isinstance(batch, dict) or not batch:
        raise DataError(f"step {step}, micro-batch {micro_batch}: batches(rng) must return a dict of input arrays, "
                        f"got {type(batch).__name__}")
    for name, value in batch.items():
        if np.ndim(value) > 0 and len(value) == 0:
            raise DataError(f"step {step}, micro-batch {micro_batch}: the batch's {name!r} holds no example "
                            f"(shape {np.shape(value)}); its loss would be NaN")
    return batch


def _metrics(result) -> dict:
    """``eval_fn``'s metrics as floats, or ``AttnGraphError`` saying what it returned instead."""
    if not isinstance(result, dict):
        raise AttnGraphError(f"eval_fn must return a dict of metric names to numbers, got {type(result).__name__}")
    try:
        return {str(k): float(v) for k, v in result.items()}
    except (TypeError, ValueError):
        raise AttnGraphError(f"eval_fn must return numbers, got {result!r}") from None


def _monitored(metrics: dict, monitor: str) -> float:
    """The value of the metric early stopping monitors, or ``AttnGraphError`` when ``eval_fn`` did not return it."""
    if monitor not in metrics:
        raise AttnGraphError(f"early stopping monitors {monitor!r}, which eval_fn did not return "
                             f"(it returned {sorted(metrics)})")
    return metrics[monitor]


def _layout(batch: dict) -> list:
    """The names and dtypes of a batch's arrays (their shapes may differ between ranks: symbolic lengths)."""
    return [(name, str(np.asarray(v).dtype)) for name, v in batch.items()]


def _like(grads: list) -> list:
    return [None if g is None else (tuple(g.shape), np.dtype(g.dtype)) for g in grads]


def _rate(key: str) -> str:
    """``examples/s`` for the record's ``examples_per_second``."""
    return key.removesuffix("_per_second") + "/s"


def _line(what: str, record: dict, clock: str = "") -> None:
    """The progress line of a record, on stderr: ``step 40/150: loss 0.8123, lr 0.00987, grad_norm 0.412,
    2345 examples/s (elapsed 0:12, ETA 0:33)`` (the loss_fn's other scalars too; not the step's seconds, which
    the rate gives; ``clock``: ``StepClock.text``)."""
    values = [f"{v:.0f} {_rate(k)}" if k.endswith("_per_second") else f"{k} {v:.4g}"
              for k, v in record.items() if k not in ("kind", "step", "seconds")]
    print(f"{what}: {', '.join(values)}" + (f" ({clock})" if clock else ""), file=sys.stderr, flush=True)


def _trainer_state(saved: checkpoint.Checkpoint, path) -> tuple[int, Schedule | None, dict]:
    """The seed, schedule and early-stopping state that ``Trainer.save`` wrote in ``saved``'s metadata, each
    checked: ``CheckpointError`` names every field that is missing or malformed."""
    meta = saved.metadata
    rng, stopping = meta.get("rng"), meta.get("early_stopping")
    if not isinstance(rng, dict) or not isinstance(stopping, dict):
        raise CheckpointError(f"{path} holds no trainer state; load it with attngraph.train.checkpoint.load")
    seed, best, schedule = rng.get("seed"), stopping.get("best"), meta.get("schedule")
    problems = [] if _is_count(seed) else [f"rng seed {seed!r} is not an integer >= 0"]
    if not _is_count(stopping.get("evals_without_improvement")):
        problems.append(f"early_stopping evals_without_improvement {stopping.get('evals_without_improvement')!r} "
                        "is not an integer >= 0")
    if best is not None and not (isinstance(best, dict) and best.keys() == {"step", "value"} and _is_count(best["step"])
                                 and isinstance(best["value"], (int, float)) and not math.isnan(best["value"])):
        problems.append(f"early_stopping best {best!r} is not null or {{'step': count, 'value': number}}")
    steps = np.asarray(saved.optimizer.get("steps")).tolist()
    if not _is_count(steps):
        problems.append(f"the optimizer's step count {steps!r} is not an integer >= 0")
    elif meta.get("step") != steps:
        problems.append(f"step {meta.get('step')!r} is not the optimizer's step count {steps}")
    try:
        schedule = None if schedule is None else from_config(schedule)
    except (TypeError, ValueError) as e:
        problems.append(f"schedule {schedule!r}: {e}")
    if problems:
        raise CheckpointError(f"{path} holds a damaged trainer state: " + "; ".join(problems))
    return seed, schedule, stopping


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
