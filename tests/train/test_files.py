"""Atomic writes leave the permissions that ``open()`` would."""
import os
import stat

import pytest

from attngraph.train.files import write_atomically


@pytest.fixture
def umask():
    def set_umask(mask):
        previous.append(os.umask(mask))
    previous = []
    yield set_umask
    os.umask(previous[0])


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_umask(tmp_path, umask, mask):
    umask(mask)
    write_atomically(tmp_path / "a.bin", lambda f: f.write(b"x"))
    with open(tmp_path / "b.bin", "wb") as f:
        f.write(b"x")
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "a.bin").stat().st_mode) == stat.S_IMODE((tmp_path / "b.bin").stat().st_mode)


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomically(target, lambda f: f.write(b"new"))
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
