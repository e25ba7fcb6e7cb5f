"""The ``learned`` cost model: gradient-boosted trees fitted to the profile cache.

AutoTVM (Chen et al., "Learning to Optimize Tensor Programs", NeurIPS 2018) fits a
statistical cost model to measured run times and uses it to rank candidates it never ran,
training the trees with a *rank* objective (pairwise, XGBoost ``rank:pairwise``): what the
search needs is the order of candidates, not their absolute times. Here the same idea
predicts the time of operator shapes never measured:

* **data**: every measurement of one device in the profile database
  (:mod:`tensat_py.cost.database`), each record's signature parsed back into an operator
  application;
* **features** (:func:`features`): the operator (a categorical feature), its numeric
  parameters (strides, kernel, padding, activation, axis, groups...), log2 of FLOPs and
  bytes from the operator's declaration (the roofline figures; a view onnxruntime runs as
  a copy, ``split``, reads and writes its operand), the output's and each of
  the first three operands' element counts, ranks and dimensions, and the operands'
  constant flags;
* **objective** ``"rank"`` (default): LightGBM trees with a pairwise logistic (RankNet)
  objective over random pairs of measurements, as AutoTVM's ``rank:pairwise``; a score
  orders operators, and a monotone (isotonic, pool-adjacent-violators) map fitted on the
  training set turns scores into seconds, so costs add up across a program. The
  alternative ``"regression"`` fits log-seconds directly (L2);
* **held-out check**: a random fifth of the signatures (seed 0) is left out; the
  Spearman rank correlation between predicted and measured times on it is printed by
  ``tensat profile --train`` and stored with the model.

Priced like ``profile``: the predicted one-operator figure less the calibrated call
overhead, the per-node cost for what onnxruntime fuses, the NCHWc reorders around a split
of a convolution and, for a whole program, those of its NCHWc layout
(:class:`tensat_py.cost.layout.ReorderCurves`: a cached reorder at its own figure, others
on a power law of their bytes), 0 for constant nodes and operators that launch no kernel
(on CPU: no onnxruntime node; a reshape there costs the per-node cost,
``profile.ort_node``). A signature the profile cache holds is priced with its measured figure (as
``profile`` prices it); the trees predict only what was never measured
(``for_device(..., measured=False)``: the trees alone). A stored model made with another
version of the features (:data:`FEATURES`) or another operator set
(:func:`operator_set`) is retrained on first use. Needs LightGBM
(``pip install 'tensat-py[learn]'``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.cost import layout
from tensat_py.cost.base import CostContext, OpCostModel, opdef, operand_flags
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.ort_program import OrtProgram, ReorderPrice
from tensat_py.cost.profile import (
    FUSED_ACTIVATIONS,
    GPU_DEVICES,
    ORT_KERNELS,
    OVERHEAD_SIGNATURE,
    OrtBackend,
    cached_bandwidth,
    canonical,
    cupy_backend,
    figure,
    fingerprint,
    fused_share_signature,
    is_calibration,
    numpy_backend,
    ort_adjust,
    ort_kernels,
    ort_priced,
    signature,
)
from tensat_py.cost.residency import BandwidthCurve, ColdWeights, last_level_cache_bytes
from tensat_py.graph import TensorType

__all__ = [
    "LearnedCostModel",
    "TrainReport",
    "features",
    "operator_set",
    "spearman",
    "train",
    "MIN_RECORDS",
    "KIND",
    "require_lightgbm",
]

#: Fewest measurements :func:`train` fits a model to.
MIN_RECORDS = 40
#: The ``models`` table's kind for this model.
KIND = "learned"
#: Version of :func:`features`; a stored model of another version is retrained on use.
#: 2: an operator onnxruntime runs as a copy (``profile.ORT_KERNELS``) reads and writes
#: its operand's bytes.
FEATURES = 2
#: Numeric parameters read as features (absent: -1).
PARAMS = (
    "act",
    "stride_h",
    "stride_w",
    "pad",
    "kernel_h",
    "kernel_w",
    "axis",
    "count",
    "keepdims",
    "ndim",
)
#: Operands described one by one.
OPERANDS = 3
#: Dimensions described per operand and for the output.
DIMS = 4


def require_lightgbm() -> Any:
    """The ``lightgbm`` module.

    Raises:
        ValueError: LightGBM is not installed (says how to install it).
    """
    try:
        import lightgbm
    except ImportError:
        raise ValueError(
            "the learned cost model needs LightGBM: pip install 'tensat-py[learn]'"
        ) from None
    return lightgbm


def _op_codes() -> dict[str, int]:
    return {name: k for k, name in enumerate(sorted(ops.all_ops()))}


def operator_set() -> str:
    """A digest of the registered operators' names: the operator feature's codes are their
    sorted positions, so a model trained before an operator was added (or removed) would
    read shifted codes; a stored model of another operator set is retrained on use."""
    import hashlib

    return hashlib.sha256(",".join(sorted(ops.all_ops())).encode()).hexdigest()[:16]


def _log2(x: float) -> float:
    return math.log2(x + 1.0)


def _dims(shape: Sequence[int]) -> list[float]:
    s = [float(d) for d in shape][-DIMS:]
    return [-1.0] * (DIMS - len(s)) + s


def features(ctx: ops.OpContext) -> list[float]:
    """The feature vector of one operator application (see the module docstring).

    Raises:
        ValueError: the operator is unknown or declares no cost.
    """
    ctx = canonical(ctx)  # commuted and same-kernel applications: one feature vector
    d = opdef(ctx.op, "learned")
    flops, nbytes = d.cost(ctx)
    if ctx.op in ORT_KERNELS and not nbytes:  # a view in the language, a copy on onnxruntime
        nbytes = 2 * sum(t.nbytes for t in ctx.inputs if isinstance(t, TensorType))
    out = ctx.output
    out_t = out if isinstance(out, TensorType) else out[0]
    row: list[float] = [float(_op_codes().get(ctx.op, -1)), _log2(flops), _log2(nbytes)]
    for p in PARAMS:
        v = ctx.params.get(p, -1)
        row.append(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else -1.0)
    # groups of a convolution: input channels / weight's input channels
    groups = -1.0
    if ctx.op == "conv2d" and len(ctx.inputs) == 2:
        x, w = ctx.inputs
        if isinstance(x, TensorType) and isinstance(w, TensorType) and w.shape[1]:
            groups = float(x.shape[1] // w.shape[1])
    row.append(groups)
    row += [_log2(out_t.numel), float(len(out_t.shape)), *_dims(out_t.shape)]
    flags = operand_flags(ctx)
    for k in range(OPERANDS):
        if k < len(ctx.inputs) and isinstance(ctx.inputs[k], TensorType):
            t = ctx.inputs[k]
            row += [_log2(t.numel), float(len(t.shape)), *_dims(t.shape), float(flags[k])]
        else:
            row += [-1.0, -1.0, *([-1.0] * DIMS), -1.0]
    row.append(float(len(ctx.inputs)))
    return row


def context_of(sig: str) -> CostContext:
    """The operator application a profile signature describes."""
    doc = json.loads(sig)

    def typ(x: Any) -> Any:
        if isinstance(x[0], list) and x[0] and isinstance(x[0][0], list):  # a pair
            return tuple(typ(p) for p in x)
        return TensorType(tuple(int(d) for d in x[0]), str(x[1]))

    params = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["params"].items()}
    return CostContext(
        op=doc["op"],
        params=params,
        inputs=[typ(t) for t, _ in doc["inputs"]],
        output=typ(doc["output"]),
        operand_constant=tuple(bool(c) for _, c in doc["inputs"]),
    )


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equal-length samples (average ranks for ties).

    Raises:
        ValueError: fewer than two values, or different lengths.
    """
    x, y = np.asarray(a, float), np.asarray(b, float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError("spearman: need two samples of equal length >= 2")

    def rank(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        _, inv = np.unique(v, return_inverse=True)
        return (np.bincount(inv, weights=r) / np.bincount(inv))[inv]

    rx, ry = rank(x), rank(y)
    rx -= rx.mean()
    ry -= ry.mean()
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else 0.0


def _isotonic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots of the non-decreasing least-squares fit of y on x (pool adjacent violators)."""
    order = np.argsort(x, kind="mergesort")
    xs, ys = x[order], y[order]
    vals: list[float] = []
    wts: list[float] = []
    ends: list[int] = []
    for i, v in enumerate(ys):
        vals.append(float(v))
        wts.append(1.0)
        ends.append(i)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            w = wts[-2] + wts[-1]
            v2 = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / w
            vals[-2:] = [v2]
            wts[-2:] = [w]
            ends[-2:] = [ends[-1]]
        # (blocks are contiguous runs of xs)
    fitted = np.empty(len(ys))
    start = 0
    for v, e in zip(vals, ends, strict=True):
        fitted[start : e + 1] = v
        start = e + 1
    return xs, fitted


def _pairwise_objective(y: np.ndarray, pairs_per_item: int, seed: int) -> Any:
    """A LightGBM custom objective: RankNet's pairwise logistic loss over random pairs
    (AutoTVM's ``rank:pairwise``); gradient and hessian per item."""
    rng = np.random.default_rng(seed)
    n = len(y)

    def fobj(preds: np.ndarray, data: Any) -> tuple[np.ndarray, np.ndarray]:
        i = np.repeat(np.arange(n), pairs_per_item)
        j = rng.integers(0, n, len(i))
        keep = y[i] != y[j]
        i, j = i[keep], j[keep]
        sign = np.where(y[i] > y[j], 1.0, -1.0)  # i should score above j when sign > 0
        diff = sign * (preds[i] - preds[j])
        p = 1.0 / (1.0 + np.exp(np.clip(diff, -50, 50)))  # d loss / d diff = -p
        g = np.zeros(n)
        h = np.zeros(n)
        np.add.at(g, i, -sign * p)
        np.add.at(g, j, sign * p)
        hh = p * (1.0 - p)
        np.add.at(h, i, hh)
        np.add.at(h, j, hh)
        return g, np.maximum(h, 1e-6)

    return fobj


@dataclass
class TrainReport:
    """What :func:`train` did.

    Attributes:
        spearman: held-out Spearman rank correlation, predicted vs measured seconds.
        n_train: measurements trained on.
        n_test: held-out measurements.
        objective: ``"rank"`` or ``"regression"``.
        fingerprint: the device's fingerprint.
        by_op: held-out measurement count per operator.
    """

    spearman: float
    n_train: int
    n_test: int
    objective: str
    fingerprint: str
    by_op: dict[str, int] = field(default_factory=dict)


def _dataset(records: Sequence[Record]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    xs, ys, opnames = [], [], []
    for r in records:
        if r.signature == OVERHEAD_SIGNATURE or is_calibration(r.op) or r.low <= 0:
            continue
        ctx = context_of(r.signature)
        try:
            xs.append(features(ctx))
        except (ValueError, KeyError, TypeError):
            continue  # an operator this build no longer declares
        ys.append(math.log(r.low))
        opnames.append(r.op)
    return np.asarray(xs, float), np.asarray(ys, float), opnames


class _Predictor:
    """Booster plus calibration: features -> raw one-operator seconds."""

    def __init__(self, booster: Any, knots_x: np.ndarray, knots_y: np.ndarray, objective: str):
        self.booster = booster
        self.kx = knots_x
        self.ky = knots_y
        self.objective = objective

    def __call__(self, x: np.ndarray) -> np.ndarray:
        s = self.booster.predict(x)
        if self.objective == "regression":
            return np.exp(s)
        return np.exp(np.interp(s, self.kx, self.ky))

    def dumps(self) -> str:
        return json.dumps(
            {
                "booster": self.booster.model_to_string(),
                "kx": self.kx.tolist(),
                "ky": self.ky.tolist(),
                "objective": self.objective,
                "ops": sorted(ops.all_ops()),
            }
        )

    @classmethod
    def loads(cls, blob: str) -> _Predictor:
        lgb = require_lightgbm()
        doc = json.loads(blob)
        booster = lgb.Booster(model_str=doc["booster"])
        return cls(booster, np.asarray(doc["kx"]), np.asarray(doc["ky"]), doc["objective"])


def _fit(x: np.ndarray, y: np.ndarray, objective: str, seed: int) -> _Predictor:
    lgb = require_lightgbm()
    params: dict[str, Any] = {
        "learning_rate": 0.1,
        "num_leaves": 31,
        "min_data_in_leaf": 3,
        "feature_fraction": 0.9,
        "verbosity": -1,
        "seed": seed,
        "deterministic": True,
        "num_threads": 1,
    }
    data = lgb.Dataset(x, y, categorical_feature=[0], free_raw_data=False)
    if objective == "regression":
        params["objective"] = "regression"
        booster = lgb.train(params, data, num_boost_round=300)
        return _Predictor(booster, np.zeros(1), np.zeros(1), objective)
    params["objective"] = _pairwise_objective(y, pairs_per_item=16, seed=seed)
    booster = lgb.train(params, data, num_boost_round=300)
    kx, ky = _isotonic(booster.predict(x), y)
    return _Predictor(booster, kx, ky, objective)


def train(
    db: ProfileDatabase,
    fp: str,
    *,
    objective: str = "rank",
    test_fraction: float = 0.2,
    seed: int = 0,
) -> tuple[_Predictor, TrainReport]:
    """Fit the model to the device's measurements and store it (with its held-out
    Spearman correlation) in ``db``.

    Raises:
        ValueError: LightGBM missing; fewer than :data:`MIN_RECORDS` measurements (says to
            run ``tensat profile``); an unknown objective.
    """
    if objective not in ("rank", "regression"):
        raise ValueError(f"learned: unknown objective {objective!r}; known: rank, regression")
    require_lightgbm()
    x, y, opnames = _dataset(db.records(fp))
    if len(y) < MIN_RECORDS:
        raise ValueError(
            f"learned: only {len(y)} measurements for this device in {db.path} (need "
            f"{MIN_RECORDS}); run `tensat profile MODEL --device ...` first"
        )
    rng = np.random.default_rng(seed)
    test = rng.random(len(y)) < test_fraction
    model = _fit(x[~test], y[~test], objective, seed)
    rho = spearman(model(x[test]), np.exp(y[test]))
    by_op: dict[str, int] = {}
    for o, t in zip(opnames, test, strict=True):
        if t:
            by_op[o] = by_op.get(o, 0) + 1
    report = TrainReport(rho, int((~test).sum()), int(test.sum()), objective, fp, by_op)
    db.save_model(
        fp,
        KIND,
        model.dumps(),
        spearman=rho,
        n_train=report.n_train,
        n_test=report.n_test,
        meta={
            "objective": objective,
            "seed": seed,
            "test_fraction": test_fraction,
            "features": FEATURES,
            "operators": operator_set(),
        },
    )
    return model, report


def _device_info(device: str) -> dict[str, Any]:
    dev = device.lower()
    if dev == "cpu":
        return OrtBackend().info()
    if dev == "cpu-numpy":
        return numpy_backend().info()
    if dev in GPU_DEVICES:
        return cupy_backend().info()
    raise ValueError(f"learned: unknown device '{device}'; known: cpu, {', '.join(GPU_DEVICES)}")


class LearnedCostModel(ColdWeights, OrtProgram, OpCostModel):
    """Predicted seconds per operator (see the module docstring).

    On the CPU, a program whose weights outgrow the last-level cache is priced with cold
    weights, as ``profile`` prices it (:mod:`tensat_py.cost.residency`), with the memory
    bandwidth the profile cache holds for the device (none calibrated: no adjustment).

    Build one with :meth:`for_device` (loads the stored model, or trains one from the
    profile cache on first use).

    Args:
        predictor: the fitted model.
        device: the device name.
        fp: the device fingerprint.
        overhead: ``(call overhead, per-node cost)`` seconds, as in ``profile``.
        spearman: the stored held-out rank correlation.
        fusion: the onnxruntime (CPU) pricing rules: what it fuses costs the per-node
            cost, the views it runs as kernels (``profile.ORT_KERNELS``) are priced, and
            a program's chains it runs as one kernel are priced as that kernel, with
            the NCHWc reorders its layout adds
            (:class:`~tensat_py.cost.ort_program.OrtProgram`).
        bandwidth: memory bandwidth by weight size for cold weights (CPU), or ``None``.
        nchwc: onnxruntime's NCHWc block size and the reorder prices from the profile
            cache (:class:`~tensat_py.cost.layout.ReorderCurves`: with ``measured``, the
            copies it holds at their own figures), or ``None`` (none cached: not priced).
        measured: the profile cache whose figures price the signatures it holds (as
            ``profile`` would: lower quartile less the call overhead), or ``None`` to
            predict every operator (the trees alone, as validated by the held-out check).
        cache: the profile cache to read the bandwidth from when it is first needed and
            ``bandwidth`` is ``None`` (a curve ``profile`` or ``tensat profile`` calibrates
            after this model was built is used, as in one process pricing with both).
        shares: what each activation costs fused into the convolution before it, as a
            share of its own figure (``ProfileCostModel.fused_share``; the ones the
            profile cache holds); an activation without one costs the per-node cost.
    """

    name = "learned"
    needs_producers = True

    def __init__(
        self,
        predictor: _Predictor,
        device: str,
        fp: str,
        overhead: tuple[float, float] = (0.0, 0.0),
        spearman: float | None = None,
        fusion: bool = True,
        bandwidth: BandwidthCurve | None = None,
        nchwc: tuple[int, layout.ReorderCurves] | None = None,
        measured: ProfileDatabase | None = None,
        cache: ProfileDatabase | None = None,
        shares: Mapping[str, float] | None = None,
    ) -> None:
        self.predictor = predictor
        self.shares = dict(shares or {})
        self._cache = cache
        self.nchwc = nchwc
        self.measured = measured
        self._figures: dict[str, float | None] = {}
        self._bandwidth = bandwidth
        self.cold_weights = device.lower() == "cpu"
        self.llc = last_level_cache_bytes()
        self.device = device
        self.fingerprint = fp
        self.overhead = overhead
        self.spearman = spearman
        self.fusion = fusion
        self._memo: dict[tuple[Any, ...], float] = {}

    def __repr__(self) -> str:
        return f"LearnedCostModel(device={self.device!r}, spearman={self.spearman})"

    @classmethod
    def for_device(
        cls, device: str = "cpu", db: ProfileDatabase | str | None = None, measured: bool = True
    ) -> LearnedCostModel:
        """The stored model for ``device``'s fingerprint, trained from the profile cache
        on first use; with ``measured`` (default) the cache's own figure prices a
        signature it holds (the trees predict the rest).

        Raises:
            ValueError: LightGBM missing, or no stored model and too few measurements (one
                line saying to run ``tensat profile MODEL --device ...`` then
                ``tensat profile --train``).
        """
        require_lightgbm()
        database = db if isinstance(db, ProfileDatabase) else ProfileDatabase(db)
        fp = fingerprint(_device_info(device))
        stored = database.load_model(fp, KIND)
        meta = stored.get("meta", {}) if stored is not None else {}
        if meta.get("features") != FEATURES or meta.get("operators") != operator_set():
            stored = None  # made by another version of the features or operators: retrain
        if stored is not None:
            predictor = _Predictor.loads(stored["blob"])
            rho = stored["spearman"]
        else:
            n = len(database.records(fp))
            if n < MIN_RECORDS:
                raise ValueError(
                    f"learned cost model: no trained model for device '{device}' and only {n} "
                    f"measurements in {database.path}; run `tensat profile MODEL --device "
                    f"{device}` then `tensat profile --train --device {device}`"
                )
            predictor, report = train(database, fp)
            rho = report.spearman
        got = database.get(fp, [OVERHEAD_SIGNATURE]).get(OVERHEAD_SIGNATURE)
        overhead = (got.low, got.spread) if got is not None else (0.0, 0.0)
        block = database.get(fp, [layout.BLOCK_SIGNATURE]).get(layout.BLOCK_SIGNATURE)
        curves = layout.ReorderCurves.from_records(database.records(fp), *overhead, exact=measured)
        sigs = {fused_share_signature(op): op for op in FUSED_ACTIVATIONS}
        shares = {sigs[k]: r.low for k, r in database.get(fp, list(sigs)).items()}
        return cls(
            predictor,
            device.lower(),
            fp,
            overhead,
            rho,
            fusion=device.lower() == "cpu",
            nchwc=(int(block.low), curves) if block is not None and curves.curves else None,
            measured=database if measured else None,
            cache=database,
            shares=shares,
        )

    def bandwidth(self) -> BandwidthCurve | None:
        """Memory bandwidth by weight size from the profile cache (read again while none
        is calibrated), or ``None``."""
        if self._bandwidth is None and self._cache is not None:
            self._bandwidth = cached_bandwidth(self._cache, self.fingerprint)
        return self._bandwidth

    def costs(self, ctxs: Sequence[ops.OpContext]) -> list[float]:
        """Predicted seconds for each of ``ctxs`` (one batch through the trees).

        Raises:
            ValueError: an operator that is unknown or declares no cost (names it).
        """
        todo: list[int] = []
        rows: list[list[float]] = []
        keys: list[tuple[Any, ...]] = []
        given = ctxs
        if self.fusion:  # one onnxruntime kernel, one figure (profile.ort_kernel_of)
            ctxs, fused, after = ort_kernels(ctxs)
        out = [0.0] * len(ctxs)
        priced = []
        for k, c in enumerate(ctxs):
            d = opdef(c.op, "learned")
            if ort_priced(c) if self.fusion else not c.constant and d.launches_kernel:
                priced.append(k)
        known = self._cached(ctxs, priced)
        for k in priced:
            c = ctxs[k]
            if known[k] is not None:
                out[k] = known[k]
                continue
            row = features(c)
            key = tuple(row)
            if key in self._memo:
                out[k] = self._memo[key]
                continue
            todo.append(k)
            rows.append(row)
            keys.append(key)
        if rows:
            raw = self.predictor(np.asarray(rows, float))
            call, per_node = self.overhead
            for k, key, t in zip(todo, keys, raw, strict=True):
                self._memo[key] = figure(float(t), call, per_node)
                out[k] = self._memo[key]
        if self.fusion:
            out = ort_adjust(out, given, fused, after, self.overhead[1], self.shares)
            if self.nchwc is not None:
                block, curves = self.nchwc
                out = layout.adjust(out, given, block, curves.price)
        return self.cold_weights_adjust(out, given)

    def reorder_price(self) -> tuple[int, ReorderPrice] | None:
        """The NCHWc block size and a reorder's price from the cached reorders
        (:class:`~tensat_py.cost.layout.ReorderCurves`), for
        :meth:`~tensat_py.cost.ort_program.OrtProgram.layout_cost`; None without fusion
        or without cached reorders."""
        if not self.fusion or self.nchwc is None or self.nchwc[0] <= 0:
            return None
        block, curves = self.nchwc
        return block, curves.price

    def _cached(
        self, ctxs: Sequence[ops.OpContext], which: Sequence[int]
    ) -> dict[int, float | None]:
        """For each index of ``which``, the figure the profile cache holds for that
        context's signature (``None``: not measured, or no cache given)."""
        if self.measured is None:
            return dict.fromkeys(which)
        sigs = {k: signature(ctxs[k]) for k in which}
        new = {v for v in sigs.values() if v not in self._figures}
        if new:
            got = self.measured.get(self.fingerprint, new)
            for sig in new:
                r = got.get(sig)
                self._figures[sig] = None if r is None else figure(r.low, *self.overhead)
        return {k: self._figures[v] for k, v in sigs.items()}

    def cost(self, ctx: ops.OpContext) -> float:
        """Predicted seconds for one operator application."""
        return self.costs([ctx])[0]


def stored_summary(db: ProfileDatabase) -> list[Mapping[str, Any]]:
    """The stored learned models (fingerprint, spearman, sizes)."""
    return [m for m in db.models() if m["kind"] == KIND]
