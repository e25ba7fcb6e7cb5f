"""The analytic roofline cost model (the deterministic default).

An operator's time is ``max(FLOPs / peak_flops, bytes / bandwidth) + launch`` seconds:
bound by compute or by memory traffic, plus a fixed per-kernel launch overhead. FLOPs and
bytes per operator are listed in ``docs/cost-models.md`` (see :func:`flops_bytes`).
Weight-only (constant) nodes are pre-computed at inference and cost 0, as do nodes that
launch no kernel: ``input``, ``weight``, ``noop``, ``split``, ``split_0``, ``split_1`` and
``reshape`` (a view).

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
from math import prod
from typing import Any

from tensat_py.graph import Graph, TensorType, operand_kinds

__all__ = ["DevicePreset", "PRESETS", "RooflineCostModel", "flops_bytes", "ZERO_COST_OPS"]

#: Operators that launch no kernel.
ZERO_COST_OPS = frozenset({"input", "weight", "noop", "split", "split_0", "split_1", "reshape"})

_ELEMENTWISE = frozenset({"ewadd", "ewmul", "relu", "tanh", "sigmoid"})
_COPIES = frozenset({"concat", "concat3", "concat4", "concat5", "transpose", "enlarge", "merge"})


@dataclass(frozen=True)
class DevicePreset:
    """A device's roofline figures.

    Attributes:
        name: preset name.
        peak_flops: peak FP32 FLOP/s.
        bandwidth: memory bandwidth in bytes/s.
        launch: per-kernel launch overhead in seconds.
    """

    name: str
    peak_flops: float
    bandwidth: float
    launch: float


#: Built-in presets (see the module docstring for sources).
PRESETS: dict[str, DevicePreset] = {
    "t4": DevicePreset("t4", 8.1e12, 320e9, 5e-6),
    "a100": DevicePreset("a100", 19.5e12, 1555e9, 4e-6),
    "h100": DevicePreset("h100", 67e12, 3.35e12, 4e-6),
    "cpu": DevicePreset("cpu", 1.8e11, 18e9, 2e-6),
}


def flops_bytes(
    op: str,
    params: Mapping[str, Any],
    input_shapes: Sequence[Sequence[int] | None],
    output_shape: Sequence[int] | None,
    itemsize: int = 4,
) -> tuple[float, float]:
    """FLOPs and bytes moved by one operator (see ``docs/cost-models.md``).

    Args:
        op: operator name.
        params: its integer / symbol parameters by name.
        input_shapes: shapes of its tensor operands in signature order.
        output_shape: its output shape.
        itemsize: bytes per element (4 for float32).

    Bytes are every operand read once plus the output written once.
    """
    if op in ZERO_COST_OPS:
        return 0.0, 0.0
    ins = [tuple(s) for s in input_shapes if s is not None]
    out = tuple(output_shape or ())
    n_out = prod(out) if out else 1
    nbytes = float(itemsize * (sum(prod(s) for s in ins) + n_out))
    act_flops = n_out if int(params.get("act", 0) or 0) else 0
    if op == "conv2d":
        w = ins[1]
        flops = 2.0 * n_out * w[1] * w[2] * w[3] + act_flops
    elif op == "matmul":
        k = ins[0][-1]
        flops = 2.0 * n_out * k + act_flops
    elif op in ("poolmax", "poolavg"):
        flops = float(n_out * int(params["kernel_h"]) * int(params["kernel_w"]) + act_flops)
    elif op in _ELEMENTWISE:
        flops = float(n_out)
    elif op == "batchnorm":
        flops = 2.0 * n_out  # x * a + b with a, b folded from the constant parameters
    elif op == "opaque":
        flops = float(n_out)
    elif op in _COPIES or op == "dropout":
        flops = 0.0
    else:
        raise ValueError(f"roofline: no cost formula for operator `{op}`")
    return flops, nbytes


class RooflineCostModel:
    """Roofline cost in seconds for each operator on a device preset.

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
                raise ValueError(
                    f"unknown device preset '{device}'; known: {sorted(PRESETS)}"
                ) from None
        self.device = self.preset.name

    def __repr__(self) -> str:
        return f"RooflineCostModel(device={self.device!r})"

    def node_cost(
        self,
        op: str,
        params: Mapping[str, Any],
        input_shapes: Sequence[Sequence[int] | None],
        output_shape: Sequence[int] | None,
        constant: bool = False,
    ) -> float:
        """Seconds for one operator: ``max(FLOPs/peak, bytes/bandwidth) + launch``.

        Constant (weight-only) nodes and :data:`ZERO_COST_OPS` cost 0.
        """
        if constant or op in ZERO_COST_OPS:
            return 0.0
        flops, nbytes = flops_bytes(op, params, input_shapes, output_shape)
        p = self.preset
        return max(flops / p.peak_flops, nbytes / p.bandwidth) + p.launch

    def graph_cost(self, graph: Graph) -> float:
        """Sum of :meth:`node_cost` over the nodes some output depends on (seconds)."""
        keep = graph.live()
        total = 0.0
        for nid, node in enumerate(graph.nodes):
            if not keep[nid]:
                continue
            shapes = []
            for i in node.inputs:
                t = graph.nodes[i].type
                shapes.append(t.shape if isinstance(t, TensorType) else None)
            out = node.type.shape if isinstance(node.type, TensorType) else None
            total += self.node_cost(node.op, node.params, shapes, out, node.constant)
        return total

    def costs_for_export(self, export: Mapping[str, Any]) -> list[float]:
        """Each exported e-node's cost (seconds), indexed like ``export["node_op"]``.

        Parameters come from leaf classes' values, operand shapes from child classes,
        the output shape and constant flag from the node's own class. Leaves cost 0.
        """
        classes = export["classes"]
        costs: list[float] = []
        for op, cls, children in zip(
            export["node_op"], export["node_eclass"], export["node_children"], strict=True
        ):
            try:
                kinds = operand_kinds(op, len(children))
            except KeyError:
                kinds = ()
            if not children or not kinds:
                costs.append(0.0)
                continue
            params: dict[str, Any] = {}
            shapes: list[Sequence[int] | None] = []
            for (pname, kind), cc in zip(kinds, children, strict=True):
                if kind in ("int", "sym"):
                    params[pname] = classes[cc].get("value")
                else:
                    shapes.append(classes[cc].get("shape"))
            c = classes[cls]
            costs.append(
                self.node_cost(op, params, shapes, c.get("shape"), bool(c.get("constant")))
            )
        return costs
