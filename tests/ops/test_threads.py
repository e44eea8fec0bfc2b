"""Idle-thread policies set on import (ops/cpu/threads.py): defaults only, never over the user's choice."""
import os
import subprocess
import sys

import pytest

SHOW = "import os, ops.cpu.threads; print(os.environ['OMP_WAIT_POLICY'], os.environ['OPENBLAS_THREAD_TIMEOUT'])"


@pytest.mark.parametrize("given, expected", [({}, "passive 4"),
                                             ({"OMP_WAIT_POLICY": "active", "OPENBLAS_THREAD_TIMEOUT": "20"},
                                              "active 20")])
def test_idle_threads_sleep_unless_the_environment_says_otherwise(given, expected):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")}
    out = subprocess.run([sys.executable, "-c", SHOW], env={**env, **given}, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.split() == expected.split()
