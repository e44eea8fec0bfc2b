"""A Python program run in a fresh process from the repository's root, for what a process settles once, at import
(thread policies, numba's settings, the modules loaded): ``python(program, *args, unset=(...), **env)`` runs
``python -c program args`` with the test's environment less the variables in ``unset``, plus ``env``; a non-zero
exit fails the test with the program's output."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python(program: str, *args: str, unset: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    done = subprocess.run([sys.executable, "-c", program, *args], env={**environment, **env}, capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0, f"the program exited with {done.returncode}:\n{done.stdout}{done.stderr}"
    return done
