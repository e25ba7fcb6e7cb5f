"""Front ends: each format to a :class:`tensat_py.graph.Graph` (and back, where supported)."""
