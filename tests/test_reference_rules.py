"""Every rule of Tensat's reference rule set holds in our e-graph under rules/taso.rules.

Each rule in Tensat's converted syntax is instantiated at concrete shapes (every pattern
variable an input of one uniform shape: [4, 4] for matrix rules, [4, 4, 3, 3] for
convolution rules), its source is loaded into an e-graph, one iteration of saturation with
``rules/taso.rules`` runs, and its target must then be in the source's e-class. The rules:
a few written by hand in that syntax (``tests/fixtures/rules``: ``single.txt``, 10 rules,
``multi.txt``, 2 multi-pattern rules) and, beside a development checkout, Tensat's own
(``../shared/data/tensat-rules/converted.txt``: 120 single-pattern,
``converted_multi.txt``: 13 multi-pattern).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from reference_data import fixture, shared, skip_reason
from tensat_py import _core
from tensat_py.pipeline import load_rules

OURS = fixture("rules")
DATA = shared("tensat-rules")


def _tokens(text: str) -> list[str]:
    return re.findall(r"\(|\)|[^\s()]+", text)


def _flat(exprs: list[str], shape: str) -> list[tuple[str, list[int]]]:
    """Flat node list of `exprs` joined by noop; variables become inputs of `shape`."""
    nodes: list[tuple[str, list[int]]] = []
    memo: dict[tuple[str, tuple[int, ...]], int] = {}

    def add(op: str, children: list[int]) -> int:
        key = (op, tuple(children))
        if key not in memo:
            nodes.append((op, children))
            memo[key] = len(nodes) - 1
        return memo[key]

    def parse(toks: list[str], i: int) -> tuple[int, int]:
        tok = toks[i]
        if tok == "(":
            op = toks[i + 1]
            i += 2
            kids = []
            while toks[i] != ")":
                kid, i = parse(toks, i)
                kids.append(kid)
            return add(op, kids), i + 1
        if tok.startswith("?"):
            sym = add(f"{tok[1:]}@{shape}", [])
            return add("input", [sym]), i + 1
        return add(tok, []), i + 1

    roots = [parse(_tokens(e), 0)[0] for e in exprs]
    root = roots[0]
    for r in roots[1:]:
        root = add("noop", [root, r])
    return nodes


def _shape(rule_text: str) -> str:
    return "4_4_3_3" if ("conv2d" in rule_text or " 4 " in rule_text) else "4_4"


def _reference(path: Path) -> list[str]:
    """The non-blank lines of a rule file in Tensat's converted syntax."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def _single_cases(folder: Path | None, name: str) -> list[tuple[str, str]]:
    """``(source, target)`` of each single-pattern rule (one ``lhs=>rhs`` a line)."""
    if folder is None:
        return []
    return [tuple(line.split("=>")) for line in _reference(folder / name)]


def _multi_cases(folder: Path | None, name: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The multi-pattern rules: every two lines form one (two sources, two targets)."""
    if folder is None:
        return []
    pairs = [tuple(line.split("=>")) for line in _reference(folder / name)]
    return [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]


def _params(ours: list, theirs: list) -> list:
    """Our hand-written rules, then Tensat's where present, with ids ``ours-N`` and
    ``tensat-N`` (N the rule's position in its file)."""
    return [pytest.param(c, id=f"ours-{i}") for i, c in enumerate(ours)] + [
        pytest.param(c, id=f"tensat-{i}") for i, c in enumerate(theirs)
    ]


SINGLE = _params(_single_cases(OURS, "single.txt"), _single_cases(DATA, "converted.txt"))
MULTI = _params(_multi_cases(OURS, "multi.txt"), _multi_cases(DATA, "converted_multi.txt"))


@pytest.fixture(scope="module")
def taso_rules() -> _core.RuleSet:
    return load_rules("taso")


def _equal_after_one_iteration(rules, sources, targets, shape) -> list[bool]:
    eg = _core.EGraph(_flat(list(sources), shape))
    eg.saturate(rules, k_multi=1, iter_limit=1, node_limit=20_000, time_limit=20.0)
    return [
        eg.equivalent(_flat([s], shape), _flat([t], shape))
        for s, t in zip(sources, targets, strict=True)
    ]


@pytest.mark.skipif(DATA is None, reason=skip_reason("Tensat's rule set", "tensat-rules", "rules"))
def test_reference_rule_files_have_the_published_counts() -> None:
    assert len(_single_cases(DATA, "converted.txt")) == 120
    assert len(_multi_cases(DATA, "converted_multi.txt")) == 13


def test_our_rule_files_are_read_whole() -> None:
    assert len(_single_cases(OURS, "single.txt")) == 10
    assert len(_multi_cases(OURS, "multi.txt")) == 2


@pytest.mark.parametrize("case", SINGLE)
def test_single_pattern_reference_rule_holds(taso_rules, case: tuple[str, str]) -> None:
    lhs, rhs = case
    shape = _shape(lhs + rhs)
    assert _equal_after_one_iteration(taso_rules, [lhs], [rhs], shape) == [True], f"{lhs}=>{rhs}"


def test_a_false_rule_does_not_hold(taso_rules) -> None:
    # The check can fail: an addition is not a product.
    wrong = ("(ewadd ?input_1 ?input_2)", "(ewmul ?input_1 ?input_2)")
    assert _equal_after_one_iteration(taso_rules, [wrong[0]], [wrong[1]], "4_4") == [False]


@pytest.mark.parametrize("case", MULTI)
def test_multi_pattern_reference_rule_holds(taso_rules, case: tuple) -> None:
    (l1, r1), (l2, r2) = case
    shape = _shape(l1 + r1 + l2 + r2)
    got = _equal_after_one_iteration(taso_rules, [l1, l2], [r1, r2], shape)
    assert got == [True, True], f"{l1}, {l2} => {r1}, {r2}"
