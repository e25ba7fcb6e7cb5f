"""tensat-py: an e-graph-first superoptimizer for tensor programs."""

from tensat_py import _core

__all__ = ["_core"]
