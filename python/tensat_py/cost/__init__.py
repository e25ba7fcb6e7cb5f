"""Cost models: map (op, attributes, input types, device) to seconds.

Every model implements :class:`~tensat_py.cost.base.CostModel` (``docs/cost-models.md``):

* ``roofline`` (:mod:`tensat_py.cost.roofline`): analytic and deterministic, the default;
* ``profile`` (:mod:`tensat_py.cost.profile`): each distinct operator measured once on the
  device (onnxruntime or NumPy on CPU, CuPy on GPU) and cached in SQLite;
* ``learned`` (:mod:`tensat_py.cost.learned`): gradient-boosted trees (LightGBM) fitted to
  the profile cache, predicting shapes never measured;
* ``xla`` (:mod:`tensat_py.cost.xla`): XLA's CPU backend measured through jaxlib, its loop
  fusions included (library calls per signature, fused kernels per element and per pass),
  cached in the same SQLite file; the default for HLO programs on ``device="cpu"``.

The registry maps a name to a factory ``factory(device) -> CostModel``; a new model is one
:func:`register_cost_model` call.
"""

from __future__ import annotations

from collections.abc import Callable

from tensat_py.cost.base import CostContext, CostModel, GpuUnavailableError, OpCostModel
from tensat_py.cost.roofline import PRESETS, DevicePreset, RooflineCostModel

__all__ = [
    "PRESETS",
    "CostContext",
    "CostModel",
    "DevicePreset",
    "OpCostModel",
    "RooflineCostModel",
    "COST_MODELS",
    "get_cost_model",
    "register_cost_model",
]

#: A factory: ``factory(device) -> CostModel``.
Factory = Callable[[str], CostModel]


def _profile(device: str) -> CostModel:
    from tensat_py.cost.profile import ProfileCostModel

    return ProfileCostModel(device)


def _learned(device: str) -> CostModel:
    from tensat_py.cost.learned import LearnedCostModel

    return LearnedCostModel.for_device(device)


def _xla(device: str) -> CostModel:
    """XLA's CPU backend on this machine, measured (see cost/xla.py)."""
    from tensat_py.cost.xla import XlaCostModel

    return XlaCostModel(device)


def _rlo(device: str) -> CostModel:
    """RLO's cost model for Knossos programs (device-independent; see cost/rlo.py)."""
    from tensat_py.cost.rlo import RloCostModel

    return RloCostModel()


#: Cost models by name (lower case) -> factory.
COST_MODELS: dict[str, Factory] = {
    "roofline": RooflineCostModel,
    "profile": _profile,
    "learned": _learned,
    "rlo": _rlo,
    "xla": _xla,
}


def register_cost_model(name: str, factory: Factory) -> None:
    """Make ``get_cost_model(name, device)`` return ``factory(device)``.

    Raises:
        ValueError: ``name`` is taken.
    """
    key = name.lower()
    if key in COST_MODELS:
        raise ValueError(f"cost model '{name}' is already registered")
    COST_MODELS[key] = factory


def get_cost_model(name: str = "roofline", device: str = "t4") -> CostModel:
    """The cost model called ``name`` for ``device`` (see :data:`COST_MODELS`).

    Every model has ``cost(ctx)``, ``node_cost(op, params, input_shapes, output_shape,
    constant)``, ``graph_cost(graph)`` and ``costs_for_export(export)``, all in seconds.

    Raises:
        ValueError: unknown model name or device; a model that cannot be built here (for
            ``learned``: no trained model and too few measurements, saying what to run; for
            a measured model on a GPU device without CuPy or a GPU: the model's name and
            how to measure on this machine's CPU instead).
    """
    from tensat_py.options import spell

    try:
        factory = COST_MODELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown cost model '{name}'; known: {', '.join(COST_MODELS)}") from None
    try:
        return factory(device)
    except GpuUnavailableError as e:
        raise ValueError(
            f"{name}: device '{device}' is a GPU, measured through CuPy: {e}; to measure on "
            f"this machine's CPU pass {spell('device', 'cpu')}"
        ) from None
