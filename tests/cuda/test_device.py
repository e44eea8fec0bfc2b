"""The "cuda" device: availability, what attngraph reports about it, and the errors for what it cannot do."""
import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

import attngraph as ag
import ops
from attngraph.core.primitive import REGISTRY
from ops import _cuda


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, check=False)


def test_every_primitive_has_a_cuda_kernel_and_the_cuda_backend_its_cpu_twin_s_names():
    cpu, cuda = ops.get_backend("cpu").kernels, ops.get_backend("cuda").kernels
    assert sorted(set(REGISTRY) - set(cuda)) == []
    assert set(cuda) == set(cpu)


def test_describe_reports_the_simulator_or_the_gpu():
    info = _cuda.describe()
    assert "unavailable" not in info and info["backend"]
    if _cuda.SIMULATOR:
        assert info["simulator"] is True
    else:
        assert info["name"] and len(info["compute_capability"]) == 2 and info["memory"] > 0


def test_without_gpu_or_simulator_cuda_raises_a_device_error_saying_how_to_install_it():
    if _cuda.SIMULATOR is False:
        pytest.skip("this machine has a GPU")
    code = ("import numpy as np, attngraph as ag\n"
            "graph = ag.trace(lambda x: x * 2, x=np.ones(2, np.float32))\n"
            "try:\n    graph.compile('cuda')\nexcept ag.DeviceError as e:\n    print(e)\n")
    result = run_python(code, NUMBA_ENABLE_CUDASIM="0")
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "device 'cuda' is not available" in message and 'pip install "attngraph[cuda]"' in message
    assert "NUMBA_ENABLE_CUDASIM=1" in message and "Traceback" not in result.stderr


def test_importing_and_running_on_the_cpu_never_imports_numba_cuda():
    code = ("import sys, numpy as np, attngraph as ag\n"
            "ag.trace(lambda x: ag.tanh(x), x=np.ones(2, np.float32)).compile()(x=np.ones(2, np.float32))\n"
            "assert 'numba.cuda' not in sys.modules, 'numba.cuda was imported'\n")
    result = run_python(code)
    assert result.returncode == 0, result.stderr


def test_unknown_device_and_missing_kernel_raise_device_errors(monkeypatch):
    graph = ag.trace(lambda x: ag.softmax(x) + 1, x=np.ones(3, np.float32))
    with pytest.raises(ag.DeviceError, match="unknown device 'tpu'"):
        graph.compile("tpu")
    cuda = ops.get_backend("cuda")
    monkeypatch.setitem(ops.BACKENDS, "cuda", dataclasses.replace(
        cuda, kernels={name: kernel for name, kernel in cuda.kernels.items() if name != "softmax"}))
    with pytest.raises(ag.DeviceError, match="op 'softmax' has no cuda kernel"):
        graph.compile("cuda")


@pytest.mark.skipif(not _cuda.SIMULATOR, reason="a quirk of numba's CUDA simulator")
def test_the_threads_of_a_simulated_block_share_one_shared_array():
    """Threads starting together ask for the same line's shared array; all must get the one array."""
    import threading

    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            shared, got, start = FakeCUDAShared(0), [], threading.Barrier(16)

            def ask():
                start.wait()
                got.append(shared.array((4, 4), np.float32))
            threads = [threading.Thread(target=ask) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len({id(a) for a in got}) == 1
    finally:
        sys.setswitchinterval(switch)
