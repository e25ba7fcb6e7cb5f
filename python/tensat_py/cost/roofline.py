"""The analytic roofline cost model (the deterministic default).

An operator's time is ``max(FLOPs / peak_flops, bytes / bandwidth) + launch`` seconds:
bound by compute or by memory traffic, plus a fixed per-kernel launch overhead (the
roofline model of Williams, Waterman and Patterson, CACM 2009). FLOPs and bytes per
operator come from the operator's declaration (``tensat_py.ops.get(op).cost(ctx)``, listed
in ``docs/cost-models.md``); bytes count every tensor operand read once and the output
written once, each at its own dtype's itemsize (``TensorType.itemsize``: 4 for float32, 2
for float16/bfloat16, 8 for float64/int64, 1 for bool).

Weight-only (constant) nodes are pre-computed at inference and cost 0, as do operators
declared with ``launches_kernel=False`` (``input``, ``weight``, ``noop``, ``split``,
``split_0``, ``split_1``, ``reshape``: see :data:`ZERO_COST_OPS`). An operator the
registry does not know, or one declared without a cost, is an error (``ValueError`` naming
it), never a silent 0.

Device presets (FP32, dense, no tensor cores; launch overhead is an assumed typical
CUDA kernel-launch / framework dispatch figure, not a datasheet number):

========  ==============  ================  ======  ===========================================
preset    peak FLOP/s     bandwidth (B/s)   launch  source
========  ==============  ================  ======  ===========================================
``t4``    8.1e12          320e9             5 us    NVIDIA T4 datasheet (8.1 TFLOPS FP32,
                                                    320 GB/s GDDR6)
``a100``  19.5e12         1555e9            4 us    NVIDIA A100 datasheet, 40 GB SXM
                                                    (19.5 TFLOPS FP32, 1,555 GB/s HBM2)
``h100``  67e12           3.35e12           4 us    NVIDIA H100 datasheet, SXM5 (67 TFLOPS
                                                    FP32, 3.35 TB/s HBM3)
``cpu``   1.8e11          18e9              2 us    measured on the project's 2-core AMD EPYC
                                                    machines: NumPy float32 2048^3 matmul
                                                    177 GFLOP/s, 256 MiB copy 18 GB/s;
                                                    2 us per onnxruntime kernel (assumed)
========  ==============  ================  ======  ===========================================

Tensat reports its results on a T4, hence the default.

``opaque`` operators (what a front end could not translate) are priced as one
memory-bound kernel that reads its operands and writes its output once, with one FLOP per
output element; they are the same in every program extracted from an e-graph, so this
only shifts the absolute figures, not the choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tensat_py import ops
from tensat_py.cost.base import OpCostModel, Operand, make_context, opdef

__all__ = [
    "DevicePreset",
    "PRESETS",
    "RooflineCostModel",
    "flops_bytes",
    "op_flops_bytes",
    "make_context",
    "Operand",
]
# ``ZERO_COST_OPS`` (operators that launch no kernel) is computed from the registry on
# first access (module ``__getattr__``), so it is not listed in ``__all__``.

#: itemsize -> the float dtype :func:`flops_bytes` assumes for bare shapes.
_DTYPE_OF_ITEMSIZE = {4: "float32", 2: "float16", 8: "float64", 1: "bool"}


def __getattr__(name: str) -> Any:
    if name == "ZERO_COST_OPS":
        #: Operators that launch no kernel (from the registry's ``launches_kernel``).
        return frozenset(n for n, d in ops.all_ops().items() if not d.launches_kernel)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class DevicePreset:
    """A device's roofline figures.

    Attributes:
        name: preset name.
        peak_flops: peak FP32 FLOP/s.
        bandwidth: memory bandwidth in bytes/s.
        launch: per-kernel launch overhead in seconds.
        title: what the preset models, for labels (``"NVIDIA T4 GPU"``).
    """

    name: str
    peak_flops: float
    bandwidth: float
    launch: float
    title: str = ""


#: Built-in presets (see the module docstring for sources).
PRESETS: dict[str, DevicePreset] = {
    "t4": DevicePreset("t4", 8.1e12, 320e9, 5e-6, "NVIDIA T4 GPU"),
    "a100": DevicePreset("a100", 19.5e12, 1555e9, 4e-6, "NVIDIA A100 GPU"),
    "h100": DevicePreset("h100", 67e12, 3.35e12, 4e-6, "NVIDIA H100 GPU"),
    "cpu": DevicePreset("cpu", 1.8e11, 18e9, 2e-6, "2-core AMD EPYC CPU"),
}


def _opdef(op: str) -> ops.OpDef:
    return opdef(op, "roofline")


def op_flops_bytes(ctx: ops.OpContext) -> tuple[float, float]:
    """FLOPs and bytes moved by one operator application (``ops.get(op).cost(ctx)``).

    Operators that launch no kernel give ``(0.0, 0.0)``.

    Raises:
        ValueError: the operator is unknown or declares no cost (message names it).
    """
    d = _opdef(ctx.op)
    if not d.launches_kernel:
        return 0.0, 0.0
    flops, nbytes = d.cost(ctx)
    return float(flops), float(nbytes)


def flops_bytes(
    op: str,
    params: Mapping[str, Any],
    input_shapes: Sequence[Operand],
    output_shape: Operand,
    itemsize: int = 4,
) -> tuple[float, float]:
    """FLOPs and bytes moved by one operator (see ``docs/cost-models.md``).

    Args:
        op: operator name.
        params: its parameters by name.
        input_shapes: shapes (or types) of its tensor operands in signature order.
        output_shape: its output shape (or type).
        itemsize: bytes per element of operands given as bare shapes (4: float32; 2:
            float16; 8: float64; 1: bool).

    Bytes are every operand read once plus the output written once.

    Raises:
        ValueError: unknown operator, or one without a cost; an unsupported ``itemsize``.
    """
    try:
        dtype = _DTYPE_OF_ITEMSIZE[int(itemsize)]
    except KeyError:
        raise ValueError(f"flops_bytes: no dtype has itemsize {itemsize}") from None
    return op_flops_bytes(make_context(op, params, input_shapes, output_shape, dtype=dtype))


class RooflineCostModel(OpCostModel):
    """Roofline cost in seconds for each operator on a device preset (a
    :class:`~tensat_py.cost.base.CostModel`).

    Args:
        device: a preset name (``"t4"``, ``"a100"``, ``"h100"``, ``"cpu"``) or a
            :class:`DevicePreset`.

    Raises:
        ValueError: unknown preset name.
    """

    name = "roofline"

    def __init__(self, device: str | DevicePreset = "t4") -> None:
        if isinstance(device, DevicePreset):
            self.preset = device
        else:
            try:
                self.preset = PRESETS[device.lower()]
            except KeyError:
                from tensat_py.options import GPU_ALIASES, suggest

                why = (
                    " names the GPU at hand, which only the measured cost models (profile, "
                    "learned) price"
                    if device.lower() in GPU_ALIASES
                    else f" is not a preset{suggest(device, PRESETS)}"
                )
                raise ValueError(
                    f"roofline: device '{device}'{why}; roofline presets: {', '.join(PRESETS)}"
                ) from None
        self.device = self.preset.name

    def __repr__(self) -> str:
        return f"RooflineCostModel(device={self.device!r})"

    def cost(self, ctx: ops.OpContext) -> float:
        """Seconds for one operator application: ``max(FLOPs/peak, bytes/bandwidth) +
        launch``; 0 for constant nodes and operators that launch no kernel.

        Raises:
            ValueError: the operator is unknown or declares no cost (message names it).
        """
        d = _opdef(ctx.op)
        if ctx.constant or not d.launches_kernel:
            return 0.0
        flops, nbytes = d.cost(ctx)
        p = self.preset
        return max(flops / p.peak_flops, nbytes / p.bandwidth) + p.launch
