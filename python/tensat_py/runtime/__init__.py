"""Runners for :class:`tensat_py.graph.Graph`: the NumPy reference executor (always
available) and, from other modules, CuPy / onnxruntime / XLA runners."""

from tensat_py.runtime.numpy_exec import random_feeds, run

__all__ = ["run", "random_feeds"]
