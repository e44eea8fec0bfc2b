"""Checkpoints: round trip, atomic writes, corrupted files and models that do not fit."""
import io
import json
import struct
import zipfile

import numpy as np
import pytest

import attngraph as ag
from attngraph.nn import MLP, init
from attngraph.train import SGD, Adam, checkpoint


@pytest.fixture
def trained(regression, rng):
    """A model and an Adam optimizer after two steps."""
    model = regression.model()
    optimizer = Adam(model, lr=0.01)
    for _ in range(2):
        optimizer.step([rng.standard_normal(p.shape).astype(np.float32) for _, p in optimizer.named])
    return model, optimizer


def test_round_trip_restores_parameters_optimizer_state_and_metadata(trained, regression, tmp_path):
    model, optimizer = trained
    path = checkpoint.save(tmp_path / "run" / "step2", model, optimizer, {"step": 2, "note": "hello"})
    assert path == tmp_path / "run" / "step2.npz"
    assert [p.name for p in path.parent.iterdir()] == ["step2.npz"]       # one file, no temporary left
    fresh = regression.model(seed=1)
    fresh_optimizer = Adam(fresh, lr=0.01)
    assert not np.array_equal(fresh[0].weight.data, model[0].weight.data)
    meta = checkpoint.load(path, fresh, fresh_optimizer)
    for (name, p), (_, q) in zip(model.named_parameters(), fresh.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    for key, value in optimizer.state_dict().items():
        np.testing.assert_array_equal(value, fresh_optimizer.state_dict()[key], err_msg=key)
    assert fresh_optimizer.steps == 2
    assert meta["step"] == 2 and meta["note"] == "hello" and meta["attngraph_version"] == ag.__version__
    assert meta["model_class"] == "attngraph.nn.layers.MLP"
    assert meta["parameters"]["0.weight"] == {"shape": [4, 16], "dtype": "float32"}
    assert meta["optimizer"] == {"type": "Adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}
    with np.load(path) as data:
        assert json.loads(data["meta.json"].tobytes()) == meta


def test_saving_over_a_checkpoint_is_atomic(trained, tmp_path, monkeypatch):
    model, optimizer = trained
    path = checkpoint.save(tmp_path / "last.npz", model, optimizer)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(ag.CheckpointError, match="disk full"):
        checkpoint.save(path, model, optimizer)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["last.npz"]


def test_metadata_must_be_json(trained, tmp_path):
    with pytest.raises(ag.CheckpointError, match="JSON-able"):
        checkpoint.save(tmp_path / "c", *trained, {"when": object()})
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("keep", [0, 10, 0.5, 0.99])
def test_a_truncated_file_raises_checkpoint_error(trained, tmp_path, keep):
    path = checkpoint.save(tmp_path / "c", *trained)
    data = path.read_bytes()
    path.write_bytes(data[:int(keep * len(data)) if isinstance(keep, float) else keep])
    with pytest.raises(ag.CheckpointError, match="truncated or corrupted"):
        checkpoint.load(path, *trained)


def stored_spans(data: bytes) -> list[range]:
    """The byte ranges of the zip members' contents (the .npy files) in ``data``."""
    spans = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_length + extra_length
            spans.append(range(start, start + info.compress_size))
    return spans


def test_flipped_bytes_raise_checkpoint_error_or_change_nothing(trained, tmp_path):
    """Every 7th byte flipped in turn: the load fails with CheckpointError, or — for a header byte no
    reader checks (zip64 placeholders, timestamps) — gives exactly the saved arrays. Every flip inside
    the stored contents fails (the zip's CRC-32), even of a single bit."""
    model, optimizer = trained
    path = checkpoint.save(tmp_path / "c", model, optimizer)
    original, saved = path.read_bytes(), checkpoint.read(path)
    contents = stored_spans(original)
    undetected = []
    for position in range(0, len(original), 7):
        damaged = bytearray(original)
        damaged[position] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            loaded = checkpoint.read(path)
        except ag.CheckpointError:
            continue
        undetected.append(position)
        for key in saved.params:
            np.testing.assert_array_equal(loaded.params[key], saved.params[key])
        for key in saved.optimizer:
            np.testing.assert_array_equal(loaded.optimizer[key], saved.optimizer[key])
    assert len(contents) == len(saved.params) + len(saved.optimizer) + 1        # and meta.json
    assert not [p for p in undetected if any(p in span for span in contents)]
    weights = saved.params["0.weight"].tobytes()
    damaged = bytearray(original)
    damaged[original.index(weights) + 9] ^= 0x01
    path.write_bytes(bytes(damaged))
    with pytest.raises(ag.CheckpointError, match="CRC"):
        checkpoint.read(path)


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, **{"param/x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ag.CheckpointError, match="truncated or corrupted"):
        checkpoint.read(path)


def test_missing_file_and_foreign_npz(tmp_path):
    with pytest.raises(ag.CheckpointError, match="no checkpoint at"):
        checkpoint.read(tmp_path / "nothing")
    np.savez(tmp_path / "plain.npz", x=np.zeros(2))
    with pytest.raises(ag.CheckpointError, match="truncated or corrupted"):     # it has no meta.json
        checkpoint.read(tmp_path / "plain.npz")


def test_a_model_that_does_not_fit_gets_every_difference_listed(trained, tmp_path):
    path = checkpoint.save(tmp_path / "c", *trained)
    init.manual_seed(3)
    other = MLP([4, 8, 1, 1])
    before = other.state_dict()
    with pytest.raises(ag.CheckpointError) as error:
        checkpoint.load(path, other)
    message = str(error.value)
    for line in ("0.weight: expected (4, 8) float32, got (4, 16) float32",
                 "2.weight: expected (8, 1) float32, got (16, 1) float32", "missing: 4.weight", "missing: 4.bias"):
        assert line in message
    for name, value in other.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_an_optimizer_that_does_not_fit_leaves_the_model_unchanged(trained, regression, tmp_path):
    path = checkpoint.save(tmp_path / "c", *trained)
    model = regression.model(seed=5)
    before = model.state_dict()
    with pytest.raises(ag.CheckpointError, match="optimizer is Adam, not SGD: load it into an optimizer of type Adam"):
        checkpoint.load(path, model, SGD(model, lr=0.1, momentum=0.9))
    with pytest.raises(ag.CheckpointError, match="missing: m/w(.|\n)*unexpected: m/0.weight"):
        checkpoint.load(path, model, Adam([("w", model[0].weight)]))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    checkpoint.save(tmp_path / "no_optimizer", trained[0])
    with pytest.raises(ag.CheckpointError, match="holds no optimizer state"):
        checkpoint.load(tmp_path / "no_optimizer", model, Adam(model))
