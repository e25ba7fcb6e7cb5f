"""Every rule of Tensat's reference rule set holds in our e-graph under rules/taso.rules.

Each reference rule (``../shared/data/tensat-rules/converted.txt``: 120 single-pattern,
``converted_multi.txt``: 13 multi-pattern) is instantiated at concrete shapes (every pattern
variable an input of one uniform shape: [4, 4] for matrix rules, [4, 4, 3, 3] for
convolution rules), its source is loaded into an e-graph, one iteration of saturation with
``rules/taso.rules`` runs, and its target must then be in the source's e-class.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tensat_py import _core
from tensat_py.pipeline import load_rules

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "tensat-rules"

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(),
    reason=f"reference rules not found at {DATA} (needs ../shared beside the repo)",
)


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


def _reference(name: str) -> list[str]:
    return [line.strip() for line in (DATA / name).read_text().splitlines() if line.strip()]


def _single_cases() -> list[tuple[str, str]]:
    if not DATA.is_dir():
        return []
    return [tuple(line.split("=>")) for line in _reference("converted.txt")]


def _multi_cases() -> list[tuple[tuple[str, str], tuple[str, str]]]:
    if not DATA.is_dir():
        return []
    lines = _reference("converted_multi.txt")
    pairs = [tuple(line.split("=>")) for line in lines]
    return [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]


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


def test_reference_rule_files_have_the_published_counts() -> None:
    assert len(_single_cases()) == 120
    assert len(_multi_cases()) == 13


@pytest.mark.parametrize("index", range(120))
def test_single_pattern_reference_rule_holds(taso_rules, index: int) -> None:
    lhs, rhs = _single_cases()[index]
    shape = _shape(lhs + rhs)
    assert _equal_after_one_iteration(taso_rules, [lhs], [rhs], shape) == [True], f"{lhs}=>{rhs}"


@pytest.mark.parametrize("index", range(13))
def test_multi_pattern_reference_rule_holds(taso_rules, index: int) -> None:
    (l1, r1), (l2, r2) = _multi_cases()[index]
    shape = _shape(l1 + r1 + l2 + r2)
    got = _equal_after_one_iteration(taso_rules, [l1, l2], [r1, r2], shape)
    assert got == [True, True], f"{l1}, {l2} => {r1}, {r2}"
