"""Devices by name, or by the array they hold: each one's Backend (ops/backend.py), with attngraph's errors."""
from __future__ import annotations

import ops
from ops.backend import Backend, Unavailable

from ..errors import DeviceError

DEVICES = ops.DEVICES


def backend(device: str) -> Backend:
    """The Backend of ``device``. DeviceError for an unknown device, or for "cuda" where it cannot run, saying
    what is missing and how to install it."""
    if device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}; available: {', '.join(DEVICES)}")
    try:
        return ops.get_backend(device)
    except Unavailable as reason:
        raise DeviceError(f"device {device!r} is not available: {reason}") from None


def backend_of(array) -> Backend:
    """The Backend where ``array`` lives."""
    return ops.backend_of(array)


def host(array):
    """``array`` as a NumPy array, copied back from the device it lives on."""
    return backend_of(array).get(array)
