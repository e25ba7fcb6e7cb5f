"""Writes rules/knossos_binding.rules' mechanical part: pushing a `let` (an explicit
substitution) through each operator of the knossos dialect and the scalar operators.

Run: python tools/gen_knossos_rules.py > /tmp/push.rules (the output is pasted into
rules/knossos_binding.rules under "explicit substitution"). Kept for regeneration.
"""

BIN = [
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "equal",
    "greater",
    "less",
    "greater_equal",
    "less_equal",
    "build",
    "sumbuild",
    "index",
    "assert",
]
UN = ["exp", "log", "neg", "abs", "sqrt", "erf", "size", "sum"]


def push(name: str, head: str, params: list[str], n: int) -> str:
    ops = [f"?a{i}" for i in range(n)]
    src = " ".join([head, *params, *ops])
    tgt = " ".join([head, *params, *(f"(let ?x ?v {o})" for o in ops)])
    return f"{name}: (let ?x ?v ({src})) => ({tgt})"


lines = []
for op in BIN:
    lines.append(push(f"let_{op}", op, [], 2))
for op in UN:
    lines.append(push(f"let_{op}", op, [], 1))
lines.append(push("let_if", "if", [], 3))
lines.append("let_cast: (let ?x ?v (cast ?a ?d)) => (cast (let ?x ?v ?a) ?d)")
lines.append(push("let_get", "get", ["?i", "?n"], 1))
for k in range(1, 5):
    lines.append(push(f"let_tuple{k}", "tuple", [], k))
for k in range(0, 5):
    lines.append(push(f"let_call{k}", "call", ["?f", "?t"], k))
print("\n".join(lines))
