"""What :func:`tensat_py.optimize` returns: :class:`OptimizeResult`, its JSON form, and the
labels that say what a predicted figure comes from.

Every cost in a result is the cost model's prediction, in ``unit`` (seconds), for
``device``; a speedup measured on a runtime is reported beside it, labelled with that
runtime (``stats["measured_speedup"]``, ``stats["measured_on"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tensat_py.graph import Graph
from tensat_py.verify import VerifyReport

__all__ = [
    "FALLBACKS",
    "OptimizeResult",
    "finite",
    "model_name",
    "prediction_basis",
    "report_json",
]

#: Statuses that mean the input was kept instead of the candidate.
FALLBACKS = ("fallback-unverified", "fallback-not-cheaper", "fallback-not-faster")


def finite(x: Any) -> Any:
    """``x`` for JSON: non-finite floats become ``None``; dicts and lists recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def report_json(report: VerifyReport | None) -> dict[str, Any] | None:
    """A :class:`VerifyReport` as a JSON object (infinite errors become ``null``)."""
    if report is None:
        return None
    return finite(
        {
            "passed": report.passed,
            "runner": report.runner,
            "max_abs_error": float(report.max_abs_error),
            "max_rel_error": float(report.max_rel_error),
            "tolerance": report.tolerance,
            "message": report.message,
        }
    )


@dataclass
class OptimizeResult:
    """What :func:`optimize` found.

    Attributes:
        graph: the optimised program: the candidate when it is cheaper and (with
            verification on) verified, else the input itself.
        cost_before: cost-model cost of the input, seconds.
        cost_after: cost-model cost of ``graph``, seconds (``<= cost_before``).
        extraction_status: the extractor's status when the candidate was kept
            (``"optimal"``, ``"feasible"``, ``"greedy"``, ``"fallback-greedy"``; see
            :class:`tensat_py.extract.ExtractionResult`), else ``"fallback-unverified"``
            (the candidate failed verification), ``"fallback-not-cheaper"`` (a different
            program that costs at least the input's cost less :data:`ROUNDING`, or gains
            less than ``min_gain``) or ``"fallback-not-faster"`` (confirmation measured it
            no faster); ``message`` says more.
        stats: exploration statistics from the Rust core (``enodes``, ``eclasses``,
            ``iterations``, ``stop_reason``, ``filtered_enodes``, ``explore_seconds``, ...)
            plus ``extract_seconds``, ``verify_seconds``, ``total_seconds``, the budgets
            ``time_limit``, ``explore_time_limit`` and ``extract_time_limit``,
            ``verify_reserve_seconds`` (kept for the candidate's check), ``phase_seconds``
            and ``phase_share`` (each phase's seconds and fraction of ``total_seconds``:
            setup, exploration, extraction, refinement, verification, confirmation),
            ``extraction_message`` and, for a cost model that prices whole programs,
            ``refinement`` (:meth:`tensat_py.extract.refine.Refinement.stats`: trials,
            e-classes switched back to the input's e-node, seconds, costs); for a measured
            cost model (``xla``), ``pricing``: how the programs were priced
            (:class:`tensat_py.cost.provenance.Pricing`: whole or operator by operator,
            and how many operator prices are roofline estimates, not measurements).
        verify: the candidate's own verification report (float64, against the input), or
            ``None`` when verification is off. ``verify.passed`` is false exactly when the
            status is ``"fallback-unverified"``.
        message: a human-readable note about fallbacks.
        candidate: the extracted program (refined, when ``stats["refinement"]`` says it
            switched e-classes), kept or not.
        candidate_cost: its cost-model cost, seconds.
        candidate_status: the extractor's own status for it.
        cost_model: the name of the cost model that priced both programs (``"roofline"``,
            ``"profile"``, ...; a user object's ``name`` attribute or class name).
        device: the device it priced for (a roofline preset such as ``"t4"``, ``"cpu"``).
        unit: the unit of ``cost_before``, ``cost_after`` and ``candidate_cost``
            (``"seconds"``; ``"RLO cost units"`` for Knossos programs).
        defs: for a program made of functions (Knossos ``.ks``), one
            :class:`tensat_py.def_phases.DefResult` per function, in file order (the costs
            above are their sums); empty for tensor programs.

    ``speedup`` is the cost model's *prediction* for ``device``; a measured speedup, when
    confirmation timed the programs, is ``stats["measured_speedup"]`` with its runtime in
    ``stats["measured_on"]`` (``"onnxruntime"``, ``"xla"``; ``stats["measured_runtime"]``
    and ``stats["measured_runtime_version"]`` in full) and the A/A beside it
    (``stats["measured_aa"]``, ``stats["measured_aa_interval"]``).
    """

    graph: Graph
    cost_before: float
    cost_after: float
    extraction_status: str
    stats: dict[str, Any] = field(default_factory=dict)
    verify: VerifyReport | None = None
    message: str = ""
    candidate: Graph | None = None
    candidate_cost: float = math.nan
    candidate_status: str = ""
    cost_model: str = ""
    device: str = ""
    unit: str = "seconds"
    defs: list[Any] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        """``cost_before / cost_after`` (1.0 when nothing changed; ``inf`` when the program
        costs nothing after, as an RLO term that folds to a variable does; ``null`` in
        JSON): the speedup the cost model predicts on ``device``, not a measurement."""
        if self.cost_after > 0:
            return self.cost_before / self.cost_after
        return math.inf if self.cost_before > 0 else 1.0

    @property
    def basis(self) -> str:
        """What ``speedup`` is predicted by, for labels: ``"roofline cost model, device
        t4 (NVIDIA T4 GPU)"``."""
        return prediction_basis(self.cost_model, self.device)

    @property
    def fell_back(self) -> bool:
        """Whether the input was kept instead of the candidate."""
        return self.extraction_status in FALLBACKS

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` object: costs with their ``unit``, ``cost_model`` and
        ``device``; ``speedup`` (predicted by that cost model, ``speedup_kind``
        ``"predicted"``) and, when confirmation timed the programs, ``measured``:
        ``runtime`` (``"onnxruntime"``, ``"xla"``), ``runtime_name`` (``"onnxruntime-cpu"``,
        ``"xla-cpu"``), ``runtime_version``, ``speedup`` (input / candidate latency there)
        and its 95 % ``speedup_interval``, ``rounds``, ``aa`` (input / a second copy of the
        input: the timing noise) and its ``aa_interval``, ``input_ms``, ``candidate_ms``
        (median latencies, milliseconds); status, message, the candidate's cost, status and
        verification report (``verify``: ``passed``, ``runner``, errors, ``message``),
        every statistic (non-finite numbers as ``null``) and, for a program of functions,
        ``defs`` (each function's name, costs, status, seconds and message)."""
        measured = None
        if "measured_speedup" in self.stats:
            measured = {
                "runtime": self.stats.get("measured_on", ""),
                "runtime_name": self.stats.get("measured_runtime", ""),
                "runtime_version": self.stats.get("measured_runtime_version", ""),
                "speedup": self.stats["measured_speedup"],
                "speedup_interval": self.stats.get("measured_speedup_interval"),
                "rounds": self.stats.get("confirm_rounds"),
                "aa": self.stats.get("measured_aa"),
                "aa_interval": self.stats.get("measured_aa_interval"),
                "input_ms": self.stats.get("measured_input_ms"),
                "candidate_ms": self.stats.get("measured_candidate_ms"),
            }
        out = finite(
            {
                "cost_model": self.cost_model,
                "device": self.device,
                "unit": self.unit,
                "speedup": self.speedup,
                "speedup_kind": "predicted",
                "speedup_basis": self.basis,
                "measured": measured,
                "cost_before": self.cost_before,
                "cost_after": self.cost_after,
                "extraction_status": self.extraction_status,
                "message": self.message,
                "candidate": {"cost": self.candidate_cost, "status": self.candidate_status},
                "stats": dict(self.stats),
                "verify": report_json(self.verify),
            }
        )
        if self.defs:
            out["defs"] = finite([d.to_json() for d in self.defs])
        return out


def model_name(model: Any) -> str:
    """A cost model's name for labels: its ``name`` attribute, else its class name."""
    return str(getattr(model, "name", "") or type(model).__name__)


def prediction_basis(cost_model: str, device: str) -> str:
    """``"roofline cost model, device t4 (NVIDIA T4 GPU)"``: what a predicted figure
    comes from, for tables and messages (for the roofline model, the preset's description
    from :data:`tensat_py.cost.roofline.PRESETS`).

    >>> prediction_basis("profile", "cpu")
    'profile cost model, device cpu'
    >>> prediction_basis("rlo", "")
    'rlo cost model, no device'
    """
    from tensat_py.cost.roofline import PRESETS

    if not device:
        return f"{cost_model} cost model, no device"
    preset = PRESETS.get(device) if cost_model == "roofline" else None
    where = f"{device} ({preset.title})" if preset is not None else device
    return f"{cost_model} cost model, device {where}"
