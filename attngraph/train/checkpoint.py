"""Checkpoints: a model's parameters, an optimizer's state and metadata in one ``.npz`` file.

    run/step1000.npz    param/<name>   every parameter, by its dotted name (``Module.state_dict``)
                        optim/<key>    the optimizer's ``state_dict`` (lr, betas, ..., steps, m/<name>, ...)
                        meta.json      the metadata, strict JSON as UTF-8 bytes

Parameters and optimizer state are saved from NumPy copies wherever they live (``Parameter.numpy``,
``Optimizer.state_dict``) and restored onto the devices where the model's parameters live now: a run on
"cuda" saves and resumes as one on "cpu" does.

The metadata holds the format version, the attngraph version, the model's class and parameter shapes, the
optimizer's type and hyper-parameters, and whatever the caller adds (the ``Trainer`` adds the model's name
and config, the step, the schedule, early stopping and the RNG state). JSON has no NaN or infinity: a
non-finite float (an evaluation metric of a diverged run) is stored as ``{"$float": "nan"}`` (or "inf",
"-inf") and read back as that float, so that strict JSON readers (jq, JavaScript) can read the metadata.

The file is one atomic unit: it is written to a temporary file in the same folder
(``.step1000.npz.<pid>.<random>.tmp``), synced to disk, and renamed over the target (``os.replace`` is atomic):
a crash, even ``kill -9`` in the middle of a save, leaves the previous checkpoint or the new one, never a mix.
The temporary file of a save whose process has died is deleted by the next save or load of that checkpoint.
Reading uses ``allow_pickle=False``, and any damage — a truncated file, flipped bytes (the zip's CRC-32
covers every array), metadata that does not describe the arrays — raises ``CheckpointError``, as does a
model or optimizer that does not fit; loading checks everything before it changes anything.

Format 1 (attngraph 0.1.0) kept the optimizer's hyper-parameters in the metadata only, and a copy of the
metadata in a ``.json`` file beside the ``.npz`` (which a crash could leave describing another step): it is
still read, its hyper-parameters taken from the metadata.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import CheckpointError
from ..version import __version__
from . import files

FORMAT = 2
FLOAT = "$float"        # the key of a non-finite float in the metadata: {"$float": "nan"}


class Checkpoint(NamedTuple):
    params: dict[str, np.ndarray]
    optimizer: dict[str, np.ndarray]
    metadata: dict


def file_of(path) -> Path:
    """The file of the checkpoint ``path``: ``path`` with ``.npz`` added when it has another suffix or none."""
    path = Path(path)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def save(path, model, optimizer=None, metadata: dict | None = None) -> Path:
    """Write ``model``'s parameters, ``optimizer``'s state and ``metadata`` (JSON-able; NaN and infinity
    allowed) to ``path`` (``.npz`` added when missing), atomically; returns the file's path. A file that
    cannot be written (a folder without write permission, a full disk, a path through a file) raises
    ``CheckpointError`` naming it and the cause, and leaves the previous checkpoint as it was."""
    npz = file_of(path)
    params = model.state_dict()
    meta = {"format": FORMAT, "attngraph_version": __version__,
            "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
            "parameters": _described(params), "optimizer": None if optimizer is None else optimizer.config()}
    if reserved := sorted(meta.keys() & (metadata or {}).keys()):
        raise CheckpointError(f"checkpoint metadata cannot set {', '.join(reserved)}: attngraph writes those; "
                              "choose other names")
    try:
        text = json.dumps(_strict({**meta, **(metadata or {})}), indent=2, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint metadata must be JSON-able: {e}") from None
    arrays = {f"param/{name}": a for name, a in params.items()}
    if optimizer is not None:
        arrays.update({f"optim/{key}": a for key, a in optimizer.state_dict().items()})
    arrays["meta.json"] = np.frombuffer(text.encode(), np.uint8)
    try:
        files.write_atomically(npz, lambda f: np.savez(f, **arrays))
    except OSError as e:
        raise CheckpointError(f"cannot write the checkpoint {npz}: {e}") from e
    return npz


def read(path) -> Checkpoint:
    """The parameters, optimizer state and metadata stored at ``path``, without loading them anywhere."""
    npz = file_of(path)
    files.remove_stale_temporaries(npz)
    if not npz.is_file():
        raise CheckpointError(f"no checkpoint at {npz}")
    try:
        file = npz.open("rb")
    except OSError as e:
        raise CheckpointError(f"cannot read the checkpoint {npz}: {e}") from None
    with file:
        try:
            with np.load(file, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
            meta = json.loads(arrays.pop("meta.json").tobytes(), object_hook=_float_of)
        # A damaged zip or .npy raises any of BadZipFile, ValueError, OSError, EOFError, KeyError,
        # NotImplementedError (a flipped compression method), RuntimeError (a flipped "encrypted" flag),
        # MemoryError (a flipped size), ...: all of them mean that the file cannot be trusted.
        except Exception as e:
            raise CheckpointError(f"{npz} is truncated or corrupted and cannot be read "
                                  f"({type(e).__name__}: {e}); use an earlier checkpoint") from None
    found = meta.get("format") if isinstance(meta, dict) else None
    if found not in (1, FORMAT):
        newer = isinstance(found, int) and found > FORMAT
        advice = "upgrade attngraph to read it" if newer else "it was not written by attngraph"
        raise CheckpointError(f"{npz} has format {found!r}, and this attngraph reads formats 1 and {FORMAT}: {advice}")
    params = {key.removeprefix("param/"): a for key, a in arrays.items() if key.startswith("param/")}
    optimizer = {key.removeprefix("optim/"): a for key, a in arrays.items() if key.startswith("optim/")}
    described = meta.get("optimizer")
    optimizer_fits = (described is None if not optimizer else
                      isinstance(described, dict) and isinstance(described.get("type"), str))
    every_array_named = len(params) + len(optimizer) == len(arrays)
    if meta.get("parameters") != _described(params) or not optimizer_fits or not every_array_named:
        raise CheckpointError(f"{npz}'s metadata does not describe its arrays: the file is damaged or was not "
                              "written by attngraph")
    if meta["format"] == 1 and optimizer:
        optimizer.update({name: np.asarray(value) for name, value in described.items() if name != "type"})
    return Checkpoint(params, optimizer, meta)


def load(path, model, optimizer=None) -> dict:
    """Load the checkpoint at ``path`` into ``model`` (and ``optimizer``: its state and hyper-parameters, as
    PyTorch's ``load_state_dict`` restores them); returns its metadata.

    Everything is checked first — the optimizer's type, names, shapes, dtypes and hyper-parameters: a mismatch
    raises ``CheckpointError`` listing every difference and leaves the model and the optimizer as they were."""
    return restore(read(path), model, optimizer)


def restore(checkpoint: Checkpoint, model, optimizer=None) -> dict:
    """Load a checkpoint already ``read`` into ``model`` (and ``optimizer``), as ``load`` does."""
    if optimizer is not None:
        saved = checkpoint.metadata["optimizer"]
        if saved is None:
            raise CheckpointError("the checkpoint holds no optimizer state")
        if saved["type"] != type(optimizer).__name__:
            raise CheckpointError(f"the checkpoint's optimizer is {saved['type']}, not {type(optimizer).__name__}: "
                                  f"load it into an optimizer of type {saved['type']}")
        optimizer.check_state_dict(checkpoint.optimizer)
    backup = model.state_dict()
    model.load_state_dict(checkpoint.params)
    if optimizer is not None:
        try:                # checked already: only a device that runs out of memory can fail here
            optimizer.load_state_dict(checkpoint.optimizer)
        except BaseException:
            model.load_state_dict(backup)
            raise
    return checkpoint.metadata


def _described(params: dict[str, np.ndarray]) -> dict:
    return {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in params.items()}


def _strict(value):
    """``value`` for strict JSON: each non-finite float as ``{"$float": "nan" | "inf" | "-inf"}``, NumPy
    scalars as Python ones, containers walked."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT: repr(value)}
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def _float_of(obj: dict):
    """``json.loads``'s object hook that undoes ``_strict``'s tags."""
    return float(obj[FLOAT]) if obj.keys() == {FLOAT} else obj
