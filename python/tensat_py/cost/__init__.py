"""Cost models: map (op, attributes, input types, device) to seconds.

``roofline`` (analytic, deterministic) is built in; ``profile`` and ``learned`` live in
their own modules and are imported on demand when present.
"""

from __future__ import annotations

import importlib
from typing import Any

from tensat_py.cost.roofline import PRESETS, DevicePreset, RooflineCostModel

__all__ = ["PRESETS", "DevicePreset", "RooflineCostModel", "get_cost_model"]


def get_cost_model(name: str = "roofline", device: str = "t4") -> Any:
    """A cost model by name for ``device``.

    Every model has ``node_cost(op, params, input_shapes, output_shape, constant)``,
    ``graph_cost(graph)`` and ``costs_for_export(export)``, all in seconds.

    Raises:
        ValueError: unknown model name or device preset.
    """
    key = name.lower()
    if key == "roofline":
        return RooflineCostModel(device)
    if key == "rlo":
        from tensat_py.cost.rlo import RloCostModel

        return RloCostModel()
    if key in ("profile", "learned"):
        try:
            mod = importlib.import_module(f"tensat_py.cost.{key}")
        except ModuleNotFoundError:
            raise ValueError(f"cost model '{name}' is not available in this build") from None
        factory = getattr(mod, "get_cost_model", None) or getattr(mod, "CostModel", None)
        if factory is None:
            raise ValueError(f"tensat_py.cost.{key} has no get_cost_model/CostModel")
        return factory(device)
    raise ValueError(f"unknown cost model '{name}'; known: roofline, rlo, profile, learned")
