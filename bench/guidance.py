"""Learned guidance benchmark (issue 16): writes bench/guidance.md and bench/results/guidance.json.

Parts (``--part``, default all):

* ``multi``: per zoo model, leave-one-model-out: cost-model speedup and optimise seconds
  (exploration + ILP extraction) for the default policy at k_multi=1 and k_multi=2, for
  the in-window learned policy (``LearnedMultiPolicy``, classifier trained on the seven
  other models' k_multi=2 runs) and for the recorded labels as the policy. Also trains
  its classifier on all eight (``python/tensat_py/policies/multi_policy.json``).
* ``staged``: the same for the ``learned`` policy (``tensat_py.policies.staged``: k_multi=1,
  then one learned multi-pattern iteration on the extracted program), with the rule priors
  and classifier trained on the seven other models' second stages; uses the ``multi``
  part's k_multi=2 figures. Trains the shipped model on all eight
  (``python/tensat_py/policies/staged_policy.json``).
* ``value``: the A* value function on RLO's value_dataset.json plus search traces:
  held-out error (expressions split 80/20 by a hash of their text). Writes the shipped
  model (``python/tensat_py/policies/value_function.txt.gz``).
* ``astar``: A* with the learned and the untrained value function against equality
  saturation on held-out RLO expressions and on blas_train.kso's functions: cost reached
  and value-function evaluations spent until the best cost; first, the sweep of the
  learned value's discount on training expressions that chose ``LearnedValue.discount``.

Usage::

    python bench/guidance.py                    # everything (~20-30 min on 2 busy cores)
    python bench/guidance.py --part value --part astar
    python bench/guidance.py --train-only       # only (re)train the shipped models (~10 min)

Needs the ``learn`` extra (LightGBM, Gymnasium) and ../shared/data/rlo for the value parts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RLO = ROOT.parent / "shared" / "data" / "rlo"
if not RLO.is_dir():
    RLO = Path(os.environ.get("TENSAT_RLO_DATA", "/work/shared/data/rlo"))
OUT_JSON = ROOT / "bench" / "results" / "guidance.json"
OUT_MD = ROOT / "bench" / "guidance.md"
SOLVER = "highs"
PKG = ROOT / "python" / "tensat_py" / "policies"
#: Runs per k_multi=1 and learned-policy timing (the median is reported).
REPEATS = 5


# --- multi-pattern policy ---------------------------------------------------------------


def run_model(graph: Any, k_multi: int, policy: Any = None, time_limit: float = 60.0) -> dict:
    """Explore + ILP-extract ``graph`` (the pipeline's steps, keeping the e-graph and the
    choice for labelling); seconds exclude the time a recording policy spent recording."""
    from tensat_py import _core
    from tensat_py.cost import get_cost_model
    from tensat_py.egraph import ExtractionProblem
    from tensat_py.extract import extract
    from tensat_py.graph import Graph
    from tensat_py.pipeline import load_rules
    from tensat_py.policies import best_program

    model = get_cost_model("roofline", "t4")
    rules = load_rules("taso")
    before = model.graph_cost(graph)
    eg = _core.EGraph(graph.to_flat())
    st = eg.saturate(rules, k_multi=k_multi, time_limit=time_limit, policy=policy)
    overhead = getattr(policy, "seconds", 0.0)
    t = time.perf_counter()
    export = eg.export()
    costs = model.costs_for_export(export)
    problem = ExtractionProblem.from_export(export, costs)
    res = extract(problem, extractor="ilp", solver=SOLVER, time_limit=time_limit)
    cand = Graph.from_choices(export, res.choices)
    after = model.graph_cost(cand)
    extract_s = time.perf_counter() - t
    status = res.status
    if after > before:
        after, status = before, "fallback-input"
    used = {c for c in res.choices}
    _, _ = best_program, used
    return {
        "cost_before": before,
        "cost_after": after,
        "speedup_pct": (before / after - 1) * 100,
        "explore_s": st["explore_seconds"] - overhead,
        "extract_s": extract_s,
        "seconds": st["explore_seconds"] - overhead + extract_s,
        "enodes": st["enodes"],
        "stop": st["stop_reason"],
        "status": status,
        "graph": cand,
        "egraph": eg,
        "export": export,
        "used": used,
        "admitted": getattr(policy, "admitted", None),
        "offered": getattr(policy, "offered", None),
    }


def _fit(data: dict[str, tuple[np.ndarray, np.ndarray, list[str]]], names: list[str]) -> Any:
    """A :class:`~tensat_py.policies.multi.MultiModel` trained on the recorded features,
    labels and rule names of the models ``names``."""
    from tensat_py.policies.multi import train

    x = np.concatenate([data[o][0] for o in names])
    y = np.concatenate([data[o][1] for o in names])
    return train(x, y, [r for o in names for r in data[o][2]])


class _LabelPolicy:
    """The recorded labels as a policy: in iteration ``k_multi`` (the first past it), the
    multi-pattern rules of the useful matches are searched and exactly the matches labelled
    useful (and their mirror images, :func:`mirror_key`) are admitted. The upper bound of
    what a policy admitting only useful matches reaches, and at what cost in seconds."""

    def __init__(self, keys: set, rules: list[int], multi: set[int]) -> None:
        self.keys, self.rules, self.multi = keys, rules, multi
        self.admitted = self.offered = 0

    def search_multi(self, iteration: int, k_multi: int) -> bool:
        return iteration <= k_multi and (iteration < k_multi or bool(self.rules))

    def multi_rules(self, iteration: int) -> list[int] | None:
        return self.rules if iteration >= 1 else None

    def selects(self, iteration: int) -> bool:
        return iteration == 1

    def select(self, view: Any) -> list[bool]:
        from tensat_py.policies.multi import mirror_key

        keep = []
        for r, c, s in zip(view["rules"], view["classes"], view["substs"], strict=True):
            ok = r not in self.multi or mirror_key(r, c, s) in self.keys
            self.admitted += r in self.multi and ok
            keep.append(ok)
        return keep


def _look_alikes(x: np.ndarray, y: np.ndarray, rules: list[str]) -> int:
    """Recorded matches (useful or not) whose rule and classifier features
    (:data:`MODEL_FEATURES` but the prior) equal those of a useful match."""
    from tensat_py.policies.multi import FEATURES, MODEL_FEATURES

    cols = [FEATURES.index(f) for f in MODEL_FEATURES if f != "rule_prior"]
    keys = [(*row, r) for row, r in zip(np.round(x[:, cols], 6).tolist(), rules, strict=True)]
    useful = {k for k, u in zip(keys, y, strict=True) if u}
    return sum(k in useful for k in keys)


class _Timed:
    """Wraps a recording policy, timing its select()."""

    def __init__(self, inner: Any, only: int) -> None:
        self.inner, self.only, self.seconds = inner, only, 0.0

    def selects(self, it: int) -> bool:
        return it == self.only

    def wants_export(self, it: int) -> bool:
        return it == self.only

    def select(self, view: Any) -> Any:
        t = time.perf_counter()
        out = self.inner.select(view)
        self.seconds += time.perf_counter() - t
        return out


def part_multi(
    results: dict, models: list[str], threshold: float, max_admit: int, reuse: bool = False
) -> None:
    from tensat_py import models as zoo
    from tensat_py.cost import get_cost_model
    from tensat_py.pipeline import load_rules
    from tensat_py.policies.multi import (
        FEATURES,
        LearnedMultiPolicy,
        RecordingPolicy,
        label_matches,
        mirror_key,
    )

    rules = load_rules("taso")
    cm = get_cost_model("roofline", "t4")
    rows: dict[str, dict] = {}
    data: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}
    cache = Path(os.environ.get("TENSAT_GUIDANCE_CACHE", "/tmp/tensat-guidance-cache"))
    cache.mkdir(parents=True, exist_ok=True)
    for m in models:
        g = zoo.get(m)
        if reuse and (cache / f"{m}.npz").is_file():
            z = np.load(cache / f"{m}.npz")
            data[m] = (z["x"], z["y"], list(z["r"]))
            rows[m] = json.loads((cache / f"{m}.json").read_text())
            continue
        k1 = _median_run(lambda g=g: run_model(g, 1))
        rec = RecordingPolicy(rules, cm, record_from=1)
        k2 = run_model(g, 2, _Timed(rec, 1))
        x = np.concatenate(rec.rows) if rec.rows else np.zeros((0, len(FEATURES)))
        y = label_matches(rec, rules, k2["egraph"], k2["export"], k2["used"])
        data[m] = (x, y, rec.rules)
        keys = {mirror_key(r, c, s) for (r, s, c), u in zip(rec.matches, y, strict=True) if u}
        useful_rules = sorted({r for (r, _, _), u in zip(rec.matches, y, strict=True) if u})
        lab = _median_run(
            lambda g=g, k=keys, u=useful_rules, ms=rec.multi_set: run_model(
                g, 1, _LabelPolicy(k, u, ms)
            )
        )
        rows[m] = {
            "k1": _strip(k1),
            "k2": _strip(k2),
            "labels": _strip(lab),
            "look_alikes": _look_alikes(x, y, rec.rules),
            "matches": len(y),
            "useful": int(y.sum()),
        }
        np.savez(cache / f"{m}.npz", x=x, y=y, r=np.asarray(rec.rules))
        (cache / f"{m}.json").write_text(json.dumps(rows[m], default=float))
        print(
            f"{m}: k1 {k1['speedup_pct']:.1f}% {k1['seconds']:.2f}s; k2 "
            f"{k2['speedup_pct']:.1f}% {k2['seconds']:.2f}s; matches {len(y)} useful "
            f"{int(y.sum())}",
            flush=True,
        )
    for m in models:
        booster = _fit(data, [o for o in models if o != m])
        pol = LearnedMultiPolicy(booster, threshold=threshold, max_admit=max_admit)
        rows[m]["useful_top"] = _useful_in_top(booster, *data[m], threshold, max_admit)
        pol.bind(rules, cm, 1)
        lr = _median_run(lambda m=m, p=pol: run_model(zoo.get(m), 1, p.bind(rules, cm, 1)))
        rows[m]["learned"] = _strip(lr)
        print(
            f"{m}: learned {lr['speedup_pct']:.1f}% {lr['seconds']:.2f}s admitted "
            f"{lr['admitted']}/{lr['offered']}",
            flush=True,
        )
    _fit(data, models).save(PKG / "multi_policy.json")
    results["multi"] = {
        "rows": rows,
        "threshold": threshold,
        "max_admit": max_admit,
        "repeats": REPEATS,
    }


def staged_run(graph: Any, policy: Any) -> dict:
    """The staged ``learned`` policy's steps (:mod:`tensat_py.policies.staged`): the
    k_multi=1 run (:func:`run_model`), then the second stage on its program with
    ``policy``; seconds are both stages' (no verification, as in :func:`run_model`)."""
    from tensat_py.cost import get_cost_model
    from tensat_py.pipeline import load_rules
    from tensat_py.policies.staged import refine

    rules, cm = load_rules("taso"), get_cost_model("roofline", "t4")
    r1 = run_model(graph, 1)
    ref = refine(
        r1["graph"],
        rules,
        cm,
        policy.bind(rules, cm),
        solver=SOLVER,
        program_cost=r1["cost_after"],
    )
    after = min(r1["cost_after"], ref.cost)
    return {
        "cost_before": r1["cost_before"],
        "cost_after": after,
        "speedup_pct": (r1["cost_before"] / after - 1) * 100,
        "seconds": r1["seconds"] + ref.seconds,
        "stage2_s": ref.seconds,
        "status": ref.status,
        "admitted": ref.admitted,
        "offered": ref.offered,
    }


def part_staged(results: dict, models: list[str]) -> None:
    """The staged ``learned`` policy, leave-one-model-out: labels from the second stage
    with every multi-pattern match admitted, a model trained on the seven other models,
    and the run of both stages (median of :data:`REPEATS`); also the same with the
    classifier's threshold at 0.5 and with every match admitted (no model). Writes the model
    trained on all of ``models`` to ``staged_policy.json``."""
    from tensat_py import models as zoo
    from tensat_py.cost import get_cost_model
    from tensat_py.pipeline import load_rules
    from tensat_py.policies.multi import FEATURES, label_matches
    from tensat_py.policies.staged import StagedMultiPolicy, StagedRecorder, refine

    rules = load_rules("taso")
    cm = get_cost_model("roofline", "t4")
    rows: dict[str, dict] = {}
    data: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}
    for m in models:
        g = zoo.get(m)
        k1 = _median_run(lambda g=g: run_model(g, 1))
        rec = StagedRecorder(rules, cm)
        ref = refine(k1["graph"], rules, cm, rec, solver=SOLVER)
        x = np.concatenate(rec.rows) if rec.rows else np.zeros((0, len(FEATURES)))
        y = (
            label_matches(rec, rules, ref.egraph, ref.export, set(ref.choices))
            if ref.export is not None
            else np.zeros(len(x), dtype=np.int64)
        )
        data[m] = (x, y, rec.rules)
        new = x[:, FEATURES.index("new_nodes")] > 0
        rows[m] = {
            "k1": _strip(k1),
            "matches": int(new.sum()),
            "useful": int(y[new].sum()),
            "all": _strip(_median_run(lambda g=g: staged_run(g, StagedMultiPolicy(None)))),
        }
        print(f"{m}: stage 2 useful {rows[m]['useful']} of {rows[m]['matches']}", flush=True)
    for m in models:
        model = _fit(data, [o for o in models if o != m])
        g = zoo.get(m)
        lr = _median_run(lambda g=g, mo=model: staged_run(g, StagedMultiPolicy(mo)))
        pr = _median_run(lambda g=g, mo=model: staged_run(g, StagedMultiPolicy(mo, threshold=0.5)))
        rows[m]["learned"], rows[m]["classifier"] = _strip(lr), _strip(pr)
        print(
            f"{m}: staged learned {lr['speedup_pct']:.1f}% {lr['seconds']:.3f}s admitted "
            f"{lr['admitted']}/{lr['offered']}",
            flush=True,
        )
    _fit(data, models).save(PKG / "staged_policy.json")
    defaults = StagedMultiPolicy(None)
    results["staged"] = {
        "rows": rows,
        "threshold": defaults.threshold,
        "max_admit": defaults.max_admit,
        "repeats": REPEATS,
    }


def _useful_in_top(
    model: Any, x: np.ndarray, y: np.ndarray, rules: list[str], threshold: float, top: int
) -> int:
    """How many of the recorded useful matches the model (trained without this model's
    data) ranks among the ``top`` it would admit (prior above 0, score at least
    ``threshold``), counting a match and its mirror image each."""
    if not len(y):
        return 0
    p = model.scores(x, rules)
    order = [j for j in np.argsort(-p, kind="stable") if p[j] >= threshold]
    return int(y[order[:top]].sum())


def _median_run(run: Any, repeats: int = REPEATS) -> dict:
    """The run with the median seconds of ``repeats`` runs (sub-second timings on a shared
    2-core machine move by tens of milliseconds)."""
    runs = sorted((run() for _ in range(repeats)), key=lambda r: r["seconds"])
    return runs[len(runs) // 2]


def _strip(r: dict) -> dict:
    return {k: v for k, v in r.items() if k not in ("graph", "egraph", "export", "used")}


# --- value function and A* ----------------------------------------------------------------


def _value_data(
    rules: Any,
    traces: int,
    seed: int = 0,
    trace_depth: int = 4,
    trace_cap: int = 300,
    blas_traces: bool = False,
    reuse: bool = False,
) -> dict:
    """value_dataset's points (features, targets, split by expression) and search traces
    of training expressions (and, with ``blas_traces``, of the training split of
    blas_train.kso); with ``reuse`` the traces an earlier run stored in the guidance cache
    for the same settings are read back."""
    from tensat_py.policies import astar as A

    data = A.load_value_dataset(RLO / "value_dataset.json")
    terms = {e: A.parse_rlo(e) for e in {e for _, e, _ in data}}
    cost = {e: A.rlo_cost(t) for e, t in terms.items()}
    train = [d for d in data if A.split_of(d[1]) == "train"]
    test = [d for d in data if A.split_of(d[1]) == "test"]

    def feats(rows: list) -> tuple[np.ndarray, np.ndarray]:
        x = np.stack([A.term_features(terms[e], t, cost[e]) for t, e, _ in rows])
        return x, np.asarray([y for *_, y in rows])

    xtr, ytr = feats(train)
    xte, yte = feats(test)
    tx, ty = [], []
    exprs = sorted({e for _, e, _ in train})
    random.Random(seed).shuffle(exprs)
    starts = [terms[e] for e in exprs[:traces]]
    # The vector language (build, index, size, lam) is not in value_dataset: the blas
    # functions of the training split are traced too (the others stay held out).
    blas_train = (
        [name for name, _ in _blas_cases() if _blas_split(name) == "train"] if blas_traces else []
    )
    starts += [t for name, t in _blas_cases() if name in blas_train]
    key = json.dumps([TRACE_VERSION, traces, seed, trace_depth, trace_cap, blas_train])
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    stored = Path(os.environ.get("TENSAT_GUIDANCE_CACHE", "/tmp/tensat-guidance-cache"))
    stored = stored / f"traces-{digest}.npz"
    if reuse and stored.is_file():
        got = np.load(stored)
        tx, ty = list(got["x"]), list(got["y"])
    else:
        for start in starts:
            for s, t, v in A.trace_targets(
                start, rules, A.rlo_cost, depth=trace_depth, cap=trace_cap
            ):
                tx.append(A.term_features(s, t, A.rlo_cost(s)))
                ty.append(v)
        stored.parent.mkdir(parents=True, exist_ok=True)
        np.savez(stored, x=np.asarray(tx), y=np.asarray(ty))
    return {
        "terms": terms,
        "cost": cost,
        "xtr": xtr,
        "ytr": ytr,
        "xte": xte,
        "yte": yte,
        "tx": np.stack(tx) if tx else np.zeros((0, xtr.shape[1])),
        "ty": np.asarray(ty),
        "test_exprs": sorted({e for _, e, _ in test}),
        "blas_train": blas_train,
    }


def part_value(results: dict, rules: Any, args: Any) -> Any:
    from tensat_py.policies import astar as A

    t = time.perf_counter()
    d = _value_data(
        rules,
        args.traces,
        trace_depth=args.trace_depth,
        trace_cap=args.trace_cap,
        blas_traces=args.blas_traces,
        reuse=args.reuse,
    )
    prep = time.perf_counter() - t
    out: dict[str, Any] = {
        "trace_exprs": args.traces,
        "trace_depth": args.trace_depth,
        "trace_cap": args.trace_cap,
        "leaves": args.leaves,
        "rounds": args.rounds,
        "balance": args.balance,
        "train_points": len(d["ytr"]),
        "test_points": len(d["yte"]),
        "trace_points": len(d["ty"]),
        "blas_traced": d["blas_train"],
        "prep_s": prep,
    }

    def err(p: np.ndarray) -> dict:
        return {
            "mae": float(np.abs(p - d["yte"]).mean()),
            "rmse": float(np.sqrt(((p - d["yte"]) ** 2).mean())),
        }

    out["zero"] = err(np.zeros_like(d["yte"]))
    out["mean"] = err(np.full_like(d["yte"], d["ytr"].mean()))
    rel = args.relative
    b_ds = A.fit_value(d["xtr"], d["ytr"], rounds=args.rounds, leaves=args.leaves, relative=rel)
    out["dataset_only"] = err(A.LearnedValue(b_ds, rel).predict_features(d["xte"]))
    x = np.concatenate([d["xtr"], d["tx"]])
    y = np.concatenate([d["ytr"], d["ty"]])
    # --balance: the data set and the traces weigh the same in all; else one point, one weight.
    scale = max(len(d["ty"]), 1) / len(d["ytr"]) if args.balance else 1.0
    w = np.concatenate([np.full(len(d["ytr"]), scale), np.ones(len(d["ty"]))])
    booster = A.fit_value(x, y, weight=w, rounds=args.rounds, leaves=args.leaves, relative=rel)
    value = A.LearnedValue(booster, rel)
    out["dataset_and_traces"] = err(value.predict_features(d["xte"]))
    out["relative"] = rel
    value.save()
    results["value"] = out
    print("value:", json.dumps(out), flush=True)
    return value, d


#: Discounts of the learned value that the sweep tries (0: untrained A*).
DISCOUNTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _discount_sweep(
    rules: Any, learned: Any, d: dict, n: int, budget: int, depth: int
) -> list[dict]:
    """A* on ``n`` training expressions (the ``n+1``-th to ``2n``-th costliest of the
    training split: not the held-out cases) with the learned value discounted by each of
    :data:`DISCOUNTS`: how many reach the best cost any discount found, and the mean
    evaluations they spent to it (the evidence for ``LearnedValue.discount``)."""
    from tensat_py.policies import astar as A

    train = [e for e in d["terms"] if A.split_of(e) == "train"]
    exprs = sorted(train, key=lambda e: (-d["cost"][e], e))[n : 2 * n]

    def value(k: float) -> Any:
        if k == 0:
            return A.ZeroValue()
        return A.LearnedValue(learned.booster, learned.relative, discount=k)

    runs = {
        k: [
            A.astar(d["terms"][e], rules, A.rlo_cost, value(k), depth=depth, budget=budget)
            for e in exprs
        ]
        for k in DISCOUNTS
    }
    best = [min(runs[k][i].best_cost for k in DISCOUNTS) for i in range(len(exprs))]
    out = []
    for k in DISCOUNTS:
        pairs = zip(runs[k], best, strict=True)
        hit = [r.evaluations_to_best for r, b in pairs if r.best_cost <= b + 1e-9]
        out.append(
            {
                "discount": k,
                "cases": len(exprs),
                "reached": len(hit),
                "mean": float(np.mean(hit)) if hit else float("nan"),
                "median": float(np.median(hit)) if hit else float("nan"),
            }
        )
        print("discount:", json.dumps(out[-1]), flush=True)
    return out


def part_astar(
    results: dict, rules: Any, learned: Any, d: dict, n: int, budget: int, depth: int
) -> None:
    from tensat_py.policies import astar as A

    sweep = _discount_sweep(rules, learned, d, n, budget, depth)
    zero = A.ZeroValue()
    exprs = sorted(d["test_exprs"], key=lambda e: (-d["cost"][e], e))[:n]
    cases: list[tuple[str, Any]] = [(e, d["terms"][e]) for e in exprs]
    cases += _blas_cases()
    rows = []
    for name, term in cases:
        t = time.perf_counter()
        eq = A.eqsat_cost(term, rules)
        eq_s = time.perf_counter() - t
        runs = {}
        for tag, v in (("learned", learned), ("untrained", zero)):
            t = time.perf_counter()
            r = A.astar(term, rules, A.rlo_cost, v, depth=depth, budget=budget)
            runs[tag] = {
                "cost": r.best_cost,
                "evals_to_best": r.evaluations_to_best,
                "evals": r.evaluations,
                "seconds": time.perf_counter() - t,
            }
        best = min(eq, runs["learned"]["cost"], runs["untrained"]["cost"])
        rows.append(
            {
                "case": name,
                "start": A.rlo_cost(term),
                "eqsat": eq,
                "eqsat_s": eq_s,
                "best": best,
                **{f"{k}_{f}": v[f] for k, v in runs.items() for f in v},
            }
        )
        print("astar:", json.dumps(rows[-1]), flush=True)
    results["astar"] = {
        "rows": rows,
        "budget": budget,
        "depth": depth,
        "discount": getattr(learned, "discount", 1.0),
        "sweep": sweep,
    }


#: Bump when what a trace holds changes (the moves of ``astar.successors``: inline_let).
TRACE_VERSION = 2

#: Share of blas_train.kso's functions held out of the value function's traces.
BLAS_TEST_FRACTION = 0.5


def _blas_split(name: str) -> str:
    """``"train"`` (traced for the value function) or ``"test"`` (held out), by a hash."""
    from tensat_py.policies.astar import split_of

    return split_of(name, BLAS_TEST_FRACTION)


def _blas_cases() -> list[tuple[str, Any]]:
    """blas_train.kso's translatable functions as Knossos terms."""
    from tensat_py.frontends.knossos.lower import Untranslatable, lower, signatures
    from tensat_py.frontends.knossos.syntax import parse_file
    from tensat_py.policies.astar import as_term

    path = RLO / "blas_train.kso"
    if not path.is_file():
        return []
    prog = parse_file(str(path))
    sigs = signatures(prog)
    out = []
    for dfn in prog.defs:
        try:
            nodes, _ = lower(dfn, sigs)
        except (Untranslatable, ValueError):
            continue
        if "call" in {op for op, _ in nodes}:
            continue
        if dfn.name.startswith("cost$"):
            continue  # RLO's cost annotations: constant bodies, nothing to rewrite
        out.append((f"blas:{dfn.name}", as_term(nodes)))
    return out


# --- report -------------------------------------------------------------------------------


def _offered(multi: dict, model: str) -> str:
    """The matches the learned policy was offered on ``model`` (``?`` when not run)."""
    n = multi["rows"].get(model, {}).get("learned", {}).get("offered")
    return f"{n:,}" if isinstance(n, int) else "?"


def _goal(k1: dict, k2: dict, run: dict) -> tuple[float | None, float, bool]:
    """Share of the k_multi=2 gain that ``run`` reaches (None where k_multi=2 gains
    nothing), its seconds over k_multi=1's, and whether the goal holds: at least 90 % of
    the gain (or no loss) at no more than 2x the seconds."""
    gain = k2["speedup_pct"] - k1["speedup_pct"]
    got = run["speedup_pct"] - k1["speedup_pct"]
    share = got / gain if gain > 1e-6 else None
    ratio = run["seconds"] / k1["seconds"] if k1["seconds"] > 0 else float("inf")
    ok = (share is None and got >= -1e-6 or share is not None and share >= 0.9) and ratio <= 2.0
    return share, ratio, ok


def _goal_line(met: int, total: int) -> str:
    return (
        "Goal (at least 90% of the k_multi=2 gain over k_multi=1 — or no loss where "
        "k_multi=2 gains nothing — at no more than 2x the k_multi=1 seconds): met on "
        f"{met} of {total} models."
    )


def _staged_md(results: dict, origin: Any) -> list[str]:
    """The staged policy's section of guidance.md (empty without its results)."""
    st, mu = results.get("staged"), results.get("multi", {}).get("rows", {})
    if not st:
        return []
    lines = [
        "## Learned multi-pattern rule choice (the `learned` policy, staged), leave-one-model-out",
        "",
        *origin(st),
        "Cost-model speedup (roofline, `t4`: cost before / cost after - 1) and optimise "
        "seconds (exploration + ILP extraction with HiGHS, no verification) per zoo model. "
        "k1 and k2: Tensat's schedule at k_multi=1 and 2 (k2 from the in-window section's "
        "run). `learned`: k_multi=1, then one multi-pattern iteration on the extracted "
        "program, in which the multi-pattern rules with a training prior above 0 are "
        "searched and their matches that add e-nodes admitted, at most "
        f"{st['max_admit']} ranked by a LightGBM classifier (threshold {st['threshold']}), "
        "priors and classifier trained on the seven other models' second stages; then the "
        "ILP again where anything was admitted; seconds are both stages'. `classifier "
        "0.5`: the same admitting only matches the classifier scores at least 0.5; `all "
        "admitted`: every multi-pattern match of every rule, no model. "
        f"Medians of {st.get('repeats', 1)} runs. `useful / offered`: second-stage matches "
        "(that add e-nodes) the ILP used with every match admitted.",
        "",
        "| model | k1 (%) | k1 s | k2 (%) | useful / offered | learned (%) | learned s | "
        "admitted / offered | share of gain | time ratio | goal | classifier 0.5 (%) | "
        "time ratio | all admitted (%) | time ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    met = total = 0
    for name, r in st["rows"].items():
        k1, lr = r["k1"], r.get("learned")
        k2 = mu.get(name, {}).get("k2")
        if lr is None or k2 is None:
            continue
        total += 1
        share, ratio, ok = _goal(k1, k2, lr)
        met += ok
        _, pratio, _ = _goal(k1, k2, r["classifier"])
        _, aratio, _ = _goal(k1, k2, r["all"])
        lines.append(
            f"| {name} | {k1['speedup_pct']:.1f} | {k1['seconds']:.3f} | "
            f"{k2['speedup_pct']:.1f} | {r['useful']} / {r['matches']} | "
            f"{lr['speedup_pct']:.1f} | {lr['seconds']:.3f} | {lr['admitted']} / "
            f"{lr['offered']} | {'—' if share is None else f'{share:.2f}'} | {ratio:.2f} | "
            f"{'met' if ok else 'not met'} | {r['classifier']['speedup_pct']:.1f} | "
            f"{pratio:.2f} | {r['all']['speedup_pct']:.1f} | {aratio:.2f} |"
        )
    return [*lines, "", _goal_line(met, total), ""]


def write_md(results: dict, command: str) -> None:
    lines = [
        "# Learned guidance (issue 16)",
        "",
        "Each section names the command that produced it and the machine's load when it "
        "started (2 shared cores; timings move with the load).",
        "",
    ]

    def origin(part: dict) -> list[str]:
        return [
            f"Command: `{part.get('command', command)}`  ",
            f"Machine: {part.get('machine', results.get('machine', ''))}",
            "",
        ]

    lines += _staged_md(results, origin)
    m = results.get("multi")
    if m:
        lines += [
            "## In-window learned policy (`LearnedMultiPolicy`), leave-one-model-out",
            "",
            "The earlier design, kept as a policy object for comparison: it admits "
            "multi-pattern matches in the saturated e-graph's iteration 2 instead of in the "
            "extracted program.",
            "",
            *origin(m),
            "Cost-model speedup (roofline, `t4`: cost before / cost after - 1) and optimise "
            "seconds (exploration + ILP extraction with HiGHS, 60 s caps) per zoo model. "
            "`learned`: single-pattern rules as always; in iteration 2 the multi-pattern "
            "rules with a training prior above 0 are searched and their matches admitted by a "
            "LightGBM classifier trained on the seven other models' k_multi=2 runs "
            f"(threshold {m['threshold']}, at most {m['max_admit']} a iteration, a match and "
            "its mirror image each); without the fallback guard (which runs the default "
            "too). k1 and "
            f"learned seconds are the median of {m.get('repeats', 1)} runs. `useful in top` = "
            "recorded useful matches (k2, iteration 2) that the held-out classifier ranks "
            "among those it would admit. `share of gain` = (learned - k1) / (k2 - k1) where "
            "k2 gains; `time ratio` = learned / k1 seconds.",
            "",
            "| model | k1 speedup (%) | k1 s | k2 speedup (%) | k2 s | k2 ILP | useful / "
            "matches (k2, iter. 2) | look-alikes | useful in top | learned speedup (%) | "
            "learned s | admitted / offered | share of gain | time ratio | goal |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        met = total = 0
        oracle: list[str] = []
        oracle_met = 0
        ratios: list[float] = []
        for name, r in m["rows"].items():
            k1, k2, lr = r["k1"], r["k2"], r.get("learned")
            if lr is None:
                continue
            total += 1
            share, ratio, ok = _goal(k1, k2, lr)
            ratios.append(ratio)
            met += ok
            if "labels" in r:
                lshare, lratio, lok = _goal(k1, k2, r["labels"])
                oracle_met += lok
                oracle.append(
                    f"| {name} | {r['labels']['speedup_pct']:.1f} | "
                    f"{r['labels']['seconds']:.3f} | {k1['seconds']:.3f} | "
                    f"{r['labels']['admitted']} | "
                    f"{'—' if lshare is None else f'{lshare:.2f}'} | {lratio:.2f} | "
                    f"{'met' if lok else 'not met'} |"
                )
            lines.append(
                f"| {name} | {k1['speedup_pct']:.1f} | {k1['seconds']:.2f} | "
                f"{k2['speedup_pct']:.1f} | {k2['seconds']:.2f} | {k2['status']} | "
                f"{r['useful']} / {r['matches']} | {r.get('look_alikes', '?')} | "
                f"{r.get('useful_top', '—')} | "
                f"{lr['speedup_pct']:.1f} | "
                f"{lr['seconds']:.2f} | {lr['admitted']} / {lr['offered']} | "
                f"{'—' if share is None else f'{share:.2f}'} | {ratio:.2f} | "
                f"{'met' if ok else 'not met'} |"
            )
        lines += ["", _goal_line(met, total), ""]
        if oracle:
            lines += [
                "**The labels as the policy** (the upper bound of admission: in iteration 2 "
                "only the rules of the useful matches are searched and exactly the matches "
                "labelled useful, with their mirror images, are admitted; median of "
                f"{m.get('repeats', 1)} runs). `look-alikes` above counts the recorded "
                "matches whose rule and classifier features equal a useful match's.",
                "",
                "| model | speedup (%) | s | k1 s | admitted | share of gain | time ratio | goal |",
                "|---|---|---|---|---|---|---|---|",
                *oracle,
                "",
                f"With the labels the goal is met on {oracle_met} of {len(oracle)} models: the "
                "e-graph and ILP that the useful matches add fit the time budget; what the "
                "learned policy lacks is telling them from their look-alikes.",
                "",
            ]
        lines += [
            "Why the gain goal is missed: the useful matches are few, come in large groups "
            "of matches with the same features, and differ between models (BERT's are "
            "`matmul-merge-rhs` merges of matmuls that matmul associativity created in "
            "iteration 1, across layers; SqueezeNet's `conv-relu-enlarge-merge` of the fused "
            "expand convolutions; every k_multi=2 ILP is now proved optimal, so the labels "
            "are exact). Held out, the classifier ranks few of them among those it "
            "admits (column `useful in top`): eight training models do not teach which of "
            "hundreds of look-alike merges the ILP will use. The features come from the "
            "greedy best program, which never uses a merge. Time is not what misses: "
            "searching only the rules with a prior and offering only matches that add "
            "e-nodes (NasRNN: "
            f"{_offered(m, 'nasrnn')} `matmul-merge-rhs` pairs offered of "
            f"{m['rows'].get('nasrnn', {}).get('matches', '?')} recorded) keeps the learned "
            f"policy at {min(ratios):.2f}-{max(ratios):.2f}x the k_multi=1 seconds.",
            "",
        ]
    v = results.get("value")
    if v:
        weighing = (
            "weighted as much as the traces"
            if v.get("balance")
            else "and traces at one weight per point"
        )
        traced_blas = [n.removeprefix("blas:") for n in v.get("blas_traced", [])]
        blas_part = (
            f" and {len(traced_blas)} blas_train.kso functions ({', '.join(traced_blas)}; "
            "the others held out)"
            if traced_blas
            else ""
        )
        lines += [
            "## Value function: held-out error",
            "",
            *origin(v),
            f"RLO's value_dataset.json ({v['train_points']} training / {v['test_points']} "
            "held-out points, expressions split 80/20 by a hash of their text) plus "
            f"{v['trace_points']} search-trace points ({v.get('trace_exprs')} training "
            f"expressions{blas_part}, neighbourhoods of at most "
            f"{v.get('trace_cap')} terms within "
            f"{v.get('trace_depth')} rewrites). LightGBM, {v.get('rounds')} rounds of "
            f"{v.get('leaves')} leaves, data set {weighing}. "
            "Target: best cost reduction within t rewrites (RLO cost units)"
            + ("; fitted as its share of the term's cost." if v.get("relative") else "."),
            "",
            "| predictor | MAE | RMSE |",
            "|---|---|---|",
        ]
        for k, label in (
            ("zero", "zero (untrained)"),
            ("mean", "training mean"),
            ("dataset_only", "LightGBM, value_dataset only"),
            ("dataset_and_traces", "LightGBM, value_dataset + traces (shipped)"),
        ):
            lines.append(f"| {label} | {v[k]['mae']:.3f} | {v[k]['rmse']:.3f} |")
        lines.append("")
    a = results.get("astar")
    if a:
        rows = a["rows"]
        traced = set((v or {}).get("blas_traced", []))
        lines += [
            "## A* over rewrite sequences against equality saturation",
            "",
            *origin(a),
            f"Budget {a['budget']} value-function evaluations, at most {a['depth']} "
            "rewrites; rules knossos_simplify + knossos_binding and RLO's inline_let "
            "(`tensat_py.policies.binding`); RLO cost. Learned A* takes the value "
            f"function's estimate times {a.get('discount', 1.0):g} (`LearnedValue.discount`, "
            "weighted A*). `best` is the "
            "least cost any of the three found; `evals` = evaluations spent when that "
            "search first reached its own best cost.",
            "",
            "| case | start | eq-sat | A* learned (evals) | A* untrained (evals) | best |",
            "|---|---|---|---|---|---|",
        ]
        sweep_lines = []
        if a.get("sweep"):
            sw = a["sweep"]
            sweep_lines = [
                f"**The discount** (`LearnedValue.discount`), chosen on {sw[0]['cases']} "
                f"training expressions (the {sw[0]['cases'] + 1}th to {2 * sw[0]['cases']}th "
                "costliest of value_dataset's training split, not the held-out cases below): "
                "A* with the learned value times each discount (0: untrained); `reached` = "
                "cases at the best cost any discount found, `evals` over those.",
                "",
                "| discount | reached | mean evals | median evals |",
                "|---|---|---|---|",
                *(
                    f"| {r['discount']:g} | {r['reached']} / {r['cases']} | {r['mean']:.1f} | "
                    f"{r['median']:.1f} |"
                    for r in sw
                ),
                "",
            ]
            lines[-2:-2] = sweep_lines
        for r in rows:
            lines.append(
                f"| `{r['case'][:60]}`{' (traced)' if r['case'] in traced else ''} | "
                f"{r['start']:.1f} | {r['eqsat']:.1f} | "
                f"{r['learned_cost']:.1f} ({r['learned_evals_to_best']}) | "
                f"{r['untrained_cost']:.1f} ({r['untrained_evals_to_best']}) | "
                f"{r['best']:.1f} |"
            )
        lines.append("")
        groups = (
            ("held-out RLO expressions", [r for r in rows if not r["case"].startswith("blas:")]),
            (
                "blas_train.kso functions, held out",
                [r for r in rows if r["case"].startswith("blas:") and r["case"] not in traced],
            ),
            (
                "blas_train.kso functions, traced for the value function",
                [r for r in rows if r["case"] in traced],
            ),
        )
        for label, grp in groups:
            if not grp:
                continue
            lb = [r for r in grp if r["learned_cost"] <= r["best"] + 1e-9]
            ub = [r for r in grp if r["untrained_cost"] <= r["best"] + 1e-9]
            both = [r for r in lb if r in ub]
            fewer = sum(r["learned_evals_to_best"] < r["untrained_evals_to_best"] for r in both)
            more = sum(r["learned_evals_to_best"] > r["untrained_evals_to_best"] for r in both)
            ml = np.mean([r["learned_evals_to_best"] for r in both]) if both else float("nan")
            mu = np.mean([r["untrained_evals_to_best"] for r in both]) if both else float("nan")
            eqb = sum(r["eqsat"] <= r["best"] + 1e-9 for r in grp)
            lines.append(
                f"**{label}** ({len(grp)}): reached the best cost: learned A* {len(lb)}, "
                f"untrained A* {len(ub)}, equality saturation {eqb}. Where both A* reached it "
                f"({len(both)}): learned used fewer evaluations in {fewer}, more in {more}; "
                f"mean evaluations {ml:.1f} (learned) against {mu:.1f} (untrained)."
            )
            lines.append("")
    OUT_MD.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", action="append", choices=["multi", "staged", "value", "astar"])
    ap.add_argument("--models", default=None, help="comma list (default: the zoo)")
    ap.add_argument("--train-only", action="store_true")
    ap.add_argument(
        "--report-only", action="store_true", help="rewrite guidance.md from guidance.json"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the k_multi 1/2 runs and match data cached by an earlier run "
        "($TENSAT_GUIDANCE_CACHE, default /tmp/tensat-guidance-cache)",
    )
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--max-admit", type=int, default=64)
    ap.add_argument("--traces", type=int, default=400, help="training expressions traced")
    ap.add_argument("--trace-depth", type=int, default=5)
    ap.add_argument("--trace-cap", type=int, default=600, help="terms per trace")
    ap.add_argument("--leaves", type=int, default=31)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument(
        "--balance", action="store_true", help="weigh value_dataset as much as the traces"
    )
    ap.add_argument(
        "--blas-traces",
        action="store_true",
        help="also trace the training half of blas_train.kso (held-out error and A* got "
        "worse with them; see docs/guidance.md)",
    )
    ap.add_argument(
        "--relative",
        action="store_true",
        help="fit the reduction's share of the term's cost, not the reduction itself",
    )
    ap.add_argument("--astar-cases", type=int, default=24)
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=10)
    args = ap.parse_args()
    from tensat_py import models as zoo
    from tensat_py.pipeline import load_rules

    parts = args.part or ["multi", "staged", "value", "astar"]
    if args.train_only:
        parts = ["multi", "staged", "value"]
    models = args.models.split(",") if args.models else list(zoo.ZOO)
    results: dict[str, Any] = json.loads(OUT_JSON.read_text()) if OUT_JSON.is_file() else {}
    if args.report_only:
        write_md(results, "python bench/guidance.py")
        print(f"wrote {OUT_MD}")
        return
    load = os.getloadavg()
    uname = subprocess.run(["uname", "-sr"], capture_output=True, text=True).stdout.strip()
    results["machine"] = (
        f"{os.cpu_count()} cores, load average {load[0]:.1f} at start ({uname}, "
        f"Python {sys.version.split()[0]})"
    )
    kr = load_rules("knossos_simplify+knossos_binding")
    if "multi" in parts:
        part_multi(results, models, args.threshold, args.max_admit, args.reuse)
    if "staged" in parts:
        part_staged(results, models)
    value = d = None
    if "value" in parts or "astar" in parts:
        value, d = part_value(results, kr, args)
    if "astar" in parts and not args.train_only:
        part_astar(results, kr, value, d, args.astar_cases, args.budget, args.depth)
    cmd = ("python bench/guidance.py " + " ".join(sys.argv[1:])).strip()
    for p in ("multi", "staged", "value", "astar"):
        if p in results and (p in parts or p == "value" and "astar" in parts):
            results[p]["command"] = cmd
            results[p]["machine"] = results["machine"]
    OUT_JSON.parent.mkdir(parents=True, exist_ok=True)
    OUT_JSON.write_text(json.dumps(results, indent=1, default=float))
    write_md(results, cmd.strip())
    print(f"wrote {OUT_MD}")


if __name__ == "__main__":
    main()
