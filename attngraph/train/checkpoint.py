"""Checkpoints: a model's parameters and an optimizer's state in one ``.npz``, with a JSON side file.

    run/step1000.npz    param/<name>   every parameter, by its dotted name (``Module.state_dict``)
                        optim/<key>    the optimizer's ``state_dict`` (steps, m/<name>, v/<name>, ...)
                        meta.json      the metadata, as UTF-8 bytes: the copy that ``load`` reads
    run/step1000.json   the same metadata, for people and tools

Parameters and optimizer state are saved from NumPy copies wherever they live (``Parameter.numpy``,
``Optimizer.state_dict``) and restored onto the devices where the model's parameters live now: a run on
"cuda" saves and resumes as one on "cpu" does.

The metadata holds the format version, the attngraph version, the model's class and parameter shapes, the
optimizer's configuration, and whatever the caller adds (the ``Trainer`` adds the model's name and
config, the step, the schedule and the RNG state).

Each file is written to a temporary file in the same folder, flushed to disk, and renamed over the
target (``os.replace`` is atomic): a crash leaves the previous checkpoint or the new one, never a mix.
Reading uses ``allow_pickle=False``, and any damage — a truncated file, flipped bytes (the zip's CRC-32
covers every array) — raises ``CheckpointError``, as does a model or optimizer that does not fit.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import CheckpointError

FORMAT = 1


class Checkpoint(NamedTuple):
    params: dict[str, np.ndarray]
    optimizer: dict[str, np.ndarray]
    metadata: dict


def paths(path) -> tuple[Path, Path]:
    """The ``.npz`` and ``.json`` files of the checkpoint ``path`` (with or without its .npz suffix)."""
    path = Path(path)
    npz = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")
    return npz, npz.with_suffix(".json")


def save(path, model, optimizer=None, metadata: dict | None = None) -> Path:
    """Write ``model``'s parameters, ``optimizer``'s state and ``metadata`` (JSON-able) to ``path``
    (``.npz`` added when missing) and its ``.json`` side file; returns the ``.npz`` path."""
    import attngraph

    npz, side = paths(path)
    params = model.state_dict()
    meta = {"format": FORMAT, "attngraph_version": attngraph.__version__,
            "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
            "parameters": {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in params.items()},
            "optimizer": None if optimizer is None else optimizer.config(), **(metadata or {})}
    try:
        text = json.dumps(meta, indent=2, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint metadata must be JSON-able: {e}") from None
    arrays = {f"param/{name}": a for name, a in params.items()}
    if optimizer is not None:
        arrays.update({f"optim/{key}": a for key, a in optimizer.state_dict().items()})
    arrays["meta.json"] = np.frombuffer(text.encode(), np.uint8)
    npz.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(npz, lambda f: np.savez(f, **arrays))
    _write_atomically(side, lambda f: f.write(text.encode() + b"\n"))
    return npz


def read(path) -> Checkpoint:
    """The parameters, optimizer state and metadata stored at ``path``, without loading them anywhere."""
    npz, _ = paths(path)
    if not npz.is_file():
        raise CheckpointError(f"no checkpoint at {npz}")
    try:
        with np.load(npz, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        meta = json.loads(arrays.pop("meta.json").tobytes())
    # A damaged zip or .npy raises any of BadZipFile, ValueError, OSError, EOFError, KeyError,
    # NotImplementedError (a flipped compression method), RuntimeError (a flipped "encrypted" flag),
    # MemoryError (a flipped size), ...: all of them mean that the file cannot be trusted.
    except Exception as e:
        raise CheckpointError(f"{npz} is truncated or corrupted and cannot be read "
                              f"({type(e).__name__}: {e}); use an earlier checkpoint") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{npz} is not an attngraph checkpoint of format {FORMAT}")
    params = {key.removeprefix("param/"): a for key, a in arrays.items() if key.startswith("param/")}
    optimizer = {key.removeprefix("optim/"): a for key, a in arrays.items() if key.startswith("optim/")}
    return Checkpoint(params, optimizer, meta)


def load(path, model, optimizer=None) -> dict:
    """Load the checkpoint at ``path`` into ``model`` (and ``optimizer``); returns its metadata.

    Names, shapes and dtypes are checked first: a mismatch raises ``CheckpointError`` listing every
    difference and leaves the model and the optimizer as they were."""
    return restore(read(path), model, optimizer)


def restore(checkpoint: Checkpoint, model, optimizer=None) -> dict:
    """Load a checkpoint already ``read`` into ``model`` (and ``optimizer``), as ``load`` does."""
    if optimizer is not None and not checkpoint.optimizer:
        raise CheckpointError("the checkpoint holds no optimizer state")
    backup = model.state_dict()
    model.load_state_dict(checkpoint.params)
    if optimizer is not None:
        try:
            optimizer.load_state_dict(checkpoint.optimizer)
        except CheckpointError:
            model.load_state_dict(backup)
            raise
    return checkpoint.metadata


def _write_atomically(target: Path, write: Callable) -> None:
    """Call ``write(file)`` on a temporary file beside ``target``, sync it, and rename it to ``target``."""
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException as e:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise CheckpointError(f"cannot write {target}: {e}") from e
        raise
