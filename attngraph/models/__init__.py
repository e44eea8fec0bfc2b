"""Whole architectures built from ``nn`` and ``attention``, and their registry."""
from .registry import ModelSpec, get, names, register, spec
