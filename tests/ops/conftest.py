"""Helpers shared by the kernel tests."""
import numpy as np
import pytest


@pytest.fixture
def numeric_grad():
    """Central-difference gradient of the scalar f at x (float64)."""
    def grad(f, x, h=1e-6):
        out = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            step = np.zeros_like(x)
            step[i] = h
            out[i] = (f(x + step) - f(x - step)) / (2 * h)
        return out
    return grad
