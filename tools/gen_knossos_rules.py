"""Writes the mechanical families of RLO's rules (knossos-ksc ``rlo/src/rlo/rewrites.py``)
for the knossos dialect, one rule per operator (and operand position):

* ``binding``: ``inline_let.<op>`` pushes a ``let`` (an explicit substitution) through
  each operator; with ``let_recover`` at the variable and ``delete_let`` elsewhere this
  is RLO's ``inline_let``. Also ``select_of_tuple.<i>_<n>``, ``sumbuild_of_tuple.<n>``.
* ``lift``: ``lift_bind.<op>.<k>`` lifts a ``let`` out of operand ``k`` (RLO's
  ``lift_bind``, when no renaming is needed: the bound name is not free in the other
  operands) and ``lift_if.<op>.<k>`` an ``if`` (RLO's ``lift_if``).
* ``monomorphic``: RLO's ``monomorphic_rules`` (``$i`` on ``int64``, ``$f`` on
  ``float64`` literals; the monomorphic ``add$ff`` is our ``add``).

Run: ``python tools/gen_knossos_rules.py binding|lift|monomorphic``; the output is pasted
into ``python/tensat_py/rules/knossos_binding.rules`` (its generated part),
``knossos_lift.rules`` and ``knossos_monomorphic.rules``. Kept for regeneration.
"""

import sys

BIN = [
    "add", "sub", "mul", "div", "max", "min", "equal", "greater", "less",
    "greater_equal", "less_equal", "index", "assert",
]  # fmt: skip
UN = ["exp", "log", "neg", "abs", "sqrt", "erf", "size", "sum"]
LOOPS = ["build", "sumbuild"]


def _ops() -> list[tuple[str, str, list[str], int]]:
    """``(rule suffix, head, fixed parameters, operand count)`` per operator form."""
    out = [(op, op, [], 2) for op in BIN] + [(op, op, [], 1) for op in UN]
    out.append(("if", "if", [], 3))
    out.append(("cast", "cast", [], 1))
    out.append(("get", "get", ["?i", "?n"], 1))
    out += [(f"tuple{k}", "tuple", [], k) for k in range(1, 5)]
    out += [(f"call{k}", "call", ["?f", "?t"], k) for k in range(1, 5)]
    return out


def _term(head: str, params: list[str], ops: list[str]) -> str:
    if head == "cast":
        return f"(cast {ops[0]} ?d)"
    return "(" + " ".join([head, *params, *ops]) + ")"


def binding() -> list[str]:
    lines = []
    for name, head, params, n in _ops():
        ops = [f"?a{i}" for i in range(n)]
        src = _term(head, params, ops)
        tgt = _term(head, params, [f"(let ?x ?v {o})" for o in ops])
        lines.append(f"inline_let.{name}: (let ?x ?v {src}) => {tgt}")
    for op in LOOPS:
        lines.append(
            f"inline_let.{op}: (let ?x ?v ({op} ?a0 ?a1)) => ({op} (let ?x ?v ?a0) (let ?x ?v ?a1))"
        )
    for n in range(2, 5):
        parts = [f"?e{i}" for i in range(n)]
        tup = f"(tuple {' '.join(parts)})"
        for i in range(n):
            lines.append(f"select_of_tuple.{i + 1}_{n}: (get {i + 1} {n} {tup}) => {parts[i]}")
    for n in range(2, 5):
        parts = [f"?e{i}" for i in range(n)]
        sums = " ".join(f"(sumbuild ?n (lam ?i ?t {p}))" for p in parts)
        src = f"(sumbuild ?n (lam ?i ?t (tuple {' '.join(parts)})))"
        lines.append(f"sumbuild_of_tuple.{n}: {src} => (tuple {sums})")
    return lines


def _lift(rule: str, child: str, arms: tuple[str, str]) -> list[str]:
    """``rule.<op>.<k>``: the ``child`` form in operand ``k`` moves above the operator."""
    lines = []
    for name, head, params, n in _ops():
        for k in range(n):
            ops = [f"?a{i}" for i in range(n)]
            src = _term(head, params, ops[:k] + [child] + ops[k + 1 :])
            if rule == "lift_bind":
                tgt = f"(let ?x ?v {_term(head, params, ops[:k] + ['?b'] + ops[k + 1 :])})"
                conds = [f"not free(?x, {o})" for i, o in enumerate(ops) if i != k]
                cond = (" if " + " and ".join(conds)) if conds else ""
            else:
                a, b = arms
                ta = _term(head, params, ops[:k] + [a] + ops[k + 1 :])
                tb = _term(head, params, ops[:k] + [b] + ops[k + 1 :])
                tgt = f"(if ?p {ta} {tb})"
                cond = ""
            lines.append(f"{rule}.{name}.{k}: {src} => {tgt}{cond}")
    return lines


def lift() -> list[str]:
    lines = _lift("lift_bind", "(let ?x ?v ?b)", ("", ""))
    # Binders: a let in a let's body / value, a let in a loop's body (the loop's `lam`).
    lines += [
        "lift_bind.let.1: (let ?y (let ?x ?v ?b) ?c) => (let ?x ?v (let ?y ?b ?c))"
        " if not free(?x, ?c) and ?x != ?y",
        "lift_bind.let.2: (let ?y ?w (let ?x ?v ?b)) => (let ?x ?v (let ?y ?w ?b))"
        " if not free(?y, ?v) and not free(?x, ?w) and ?x != ?y",
    ]
    for op in LOOPS:
        lines.append(
            f"lift_bind.{op}.0: ({op} (let ?x ?v ?b) ?f) => (let ?x ?v ({op} ?b ?f))"
            " if not free(?x, ?f)"
        )
        lines.append(
            f"lift_bind.{op}.1: ({op} ?n (lam ?i ?t (let ?x ?v ?b)))"
            f" => (let ?x ?v ({op} ?n (lam ?i ?t ?b)))"
            " if not free(?i, ?v) and not free(?x, ?n) and ?x != ?i"
        )
    lines += _lift("lift_if", "(if ?p ?x ?y)", ("?x", "?y"))
    lines += [
        "lift_if.let.1: (let ?z (if ?p ?x ?y) ?b) => (if ?p (let ?z ?x ?b) (let ?z ?y ?b))"
        " if not free(?z, ?p)",
        "lift_if.let.2: (let ?z ?v (if ?p ?x ?y)) => (if ?p (let ?z ?v ?x) (let ?z ?v ?y))"
        " if not free(?z, ?p)",
    ]
    for op in LOOPS:
        lines.append(
            f"lift_if.{op}.0: ({op} (if ?p ?x ?y) ?f) => (if ?p ({op} ?x ?f) ({op} ?y ?f))"
        )
        lines.append(
            f"lift_if.{op}.1: ({op} ?n (lam ?i ?t (if ?p ?x ?y)))"
            f" => (if ?p ({op} ?n (lam ?i ?t ?x)) ({op} ?n (lam ?i ?t ?y)))"
            " if not free(?i, ?p)"
        )
    return lines


def monomorphic() -> list[str]:
    lines = []
    for r, d in (("$i", "int64"), ("$f", "float64")):
        z, one, m1 = f"(scalar 0.0 {d})", f"(scalar 1.0 {d})", f"(scalar -1.0 {d})"
        rules = [
            ("add_zero", f"(add {z} ?a)", "?a"),
            ("mul_zero", f"(mul {z} ?a)", z),
            ("mul_one", f"(mul {one} ?a)", "?a"),
            ("sub_zero", f"(sub ?a {z})", "?a"),
            ("div_one", f"(div ?a {one})", "?a"),
            ("add_neg_to_sub", f"(add ?a (mul ?b {m1}))", "(sub ?a ?b)"),
            ("commute_mul", "(mul ?a ?b)", "(mul ?b ?a)"),
            ("commute_add", "(add ?a ?b)", "(add ?b ?a)"),
            ("sub_self", "(sub ?a ?a)", z),
            ("assoc_add_add", "(add (add ?a ?b) ?c)", "(add (add ?a ?c) ?b)"),
            ("assoc_sub_add", "(sub (add ?a ?b) ?c)", "(add (sub ?a ?c) ?b)"),
            ("assoc_add_sub", "(add (sub ?a ?b) ?c)", "(sub (add ?a ?c) ?b)"),
            ("assoc_sub_sub", "(sub (sub ?a ?b) ?c)", "(sub (sub ?a ?c) ?b)"),
            ("sub_sub_to_sub_add", "(sub ?a (sub ?b ?c))", "(sub (add ?a ?c) ?b)"),
            ("assoc_mul_mul", "(mul (mul ?a ?b) ?c)", "(mul (mul ?a ?c) ?b)"),
            ("mul_by_add", "(mul ?a (add ?b ?c))", "(add (mul ?a ?b) (mul ?a ?c))"),
            ("mul_by_sub", "(mul ?a (sub ?b ?c))", "(sub (mul ?a ?b) (mul ?a ?c))"),
            ("add_of_muls", "(add (mul ?a ?b) (mul ?a ?c))", "(mul ?a (add ?b ?c))"),
            ("sub_of_muls", "(sub (mul ?a ?b) (mul ?a ?c))", "(mul ?a (sub ?b ?c))"),
        ]
        if r == "$f":
            rules += [
                ("assoc_div_mul", "(div (mul ?a ?b) ?c)", "(mul (div ?a ?c) ?b)"),
                ("assoc_mul_div", "(mul (div ?a ?b) ?c)", "(div (mul ?a ?c) ?b)"),
                ("div_by_div", "(div ?a (div ?b ?c))", "(div (mul ?a ?c) ?b)"),
                ("add_of_divs", "(add (div ?a ?c) (div ?b ?c))", "(div (add ?a ?b) ?c)"),
                ("sub_of_divs", "(sub (div ?a ?c) (div ?b ?c))", "(div (sub ?a ?b) ?c)"),
                ("assoc_div_div", "(div (div ?a ?b) ?c)", "(div (div ?a ?c) ?b)"),
                ("div_of_div", "(div (div ?a ?b) ?c)", "(div ?a (mul ?b ?c))"),
                ("div_by_mul", "(div ?a (mul ?b ?c))", "(div (div ?a ?b) ?c)"),
            ]
        for name, src, tgt in rules:
            # RLO's add$ii takes Integers: every variable must be of the rule's dtype. A
            # literal in the source already fixes it (the operators take one dtype).
            vs = sorted({w.strip("()") for w in src.split() if w.strip("()").startswith("?")})
            cond = " and ".join(f"dtype({v}) == {d}" for v in vs)
            if "scalar" in src:
                cond = ""
            if tgt == z:  # a literal target stands for a scalar: so must the matched term
                cond = " and ".join(c for c in (cond, "rank(?a) == 0") if c)
            lines.append(f"{name}{r}: {src} => {tgt}" + (f" if {cond}" if cond else ""))
    return lines


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "binding"
    print("\n".join({"binding": binding, "lift": lift, "monomorphic": monomorphic}[which]()))
