"""Run a script on several MPI ranks from an ordinary test: ``mpiexec -n N python [-m mpi4py] SCRIPT ARGS`` as a
subprocess with a time limit, each rank on one numba thread, more ranks than cores allowed (MPICH needs no flag;
Open MPI's variables are set too). Tests using it are marked ``requires_mpi``: they skip, saying why, where
mpi4py or ``mpiexec`` is missing (``pip install -e .[mpi]`` installs both).

    from tests.mpi import launch, requires_mpi

    @requires_mpi
    def test_sum(tmp_path):
        result = launch(Path(__file__).parent / "ranks" / "sums.py", ranks=2, args=[tmp_path])
        assert result.returncode == 0, result.output
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
MISSING = ("mpi4py is not installed (pip install -e '.[mpi]')" if importlib.util.find_spec("mpi4py") is None else
           "mpiexec is not on PATH nor beside the Python executable (pip install -e '.[mpi]')" if MPIEXEC is None else
           None)
requires_mpi = pytest.mark.skipif(MISSING is not None, reason=f"multi-rank test: {MISSING}")

RANK_ENVIRONMENT = {
    "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive",
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",        # Open MPI as root (containers)
    "PRTE_ALLOW_RUN_AS_ROOT": "1", "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
}


@dataclass
class Result:
    returncode: int
    output: str         # stdout and stderr of every rank, interleaved


def launch(script, ranks: int, args=(), timeout: float = 120, runner: bool = True, env: dict | None = None) -> Result:
    """Run ``script`` on ``ranks`` ranks and wait at most ``timeout`` seconds (then the test fails with what the
    ranks printed). ``runner``: through ``python -m mpi4py``, whose uncaught-exception handler aborts every rank;
    False runs plain ``python``, relying on the library's own (``attngraph.train.distributed.init``)."""
    command = [MPIEXEC, "-n", str(ranks), sys.executable, *(["-m", "mpi4py"] if runner else []), str(script),
               *map(str, args)]
    environment = {**os.environ, **RANK_ENVIRONMENT, "PYTHONPATH": str(ROOT), **(env or {})}
    process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)          # mpiexec and its ranks: the session started for them
        output, _ = process.communicate()
        pytest.fail(f"{ranks} ranks of {Path(script).name} ran past {timeout} s:\n{output}")
    return Result(process.returncode, output)
