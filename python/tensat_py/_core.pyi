"""Type stubs for ``tensat_py._core``, the Rust e-graph core (``rust/src/py.rs``,
``rust/src/py_extract.rs``). Errors are ``ValueError`` with the core's message."""

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

__all__ = [
    "signatures",
    "operators",
    "TypeChecker",
    "RuleSet",
    "EGraph",
    "greedy_tree",
    "greedy_dag",
    "dag_cost",
]

OperandKind = Literal["int", "float", "list", "sym", "tensor", "pair"]
FlatNode = tuple[str, Sequence[int]]
"""``(op, children)``: an operator with child node indices, or a leaf (``"3"``,
``"x@2_3"``, ``"[1,0]"``, ``"0.5"``) with no children."""

class OperatorInfo(TypedDict):
    dialect: str
    operands: list[tuple[str, OperandKind]]
    variadic: tuple[str, OperandKind] | None
    output: Literal["tensor", "pair"]
    summary: str

class SaturateStats(TypedDict):
    enodes: int
    eclasses: int
    iterations: int
    stop_reason: Literal["saturated", "iter_limit", "node_limit", "time_limit"]
    filtered_enodes: int
    applied: int
    rejected_type: int
    rejected_cycle: int
    merge_tree_applied: int
    explore_seconds: float
    search_seconds: float
    apply_seconds: float
    rebuild_seconds: float
    cycle_seconds: float

def signatures() -> dict[str, list[tuple[str, OperandKind]]]:
    """``{op: [(operand name, kind)]}`` in child order (variadic operands left out)."""

def operators() -> dict[str, OperatorInfo]:
    """Every declared operator with its dialect, operands, output kind and summary."""

class TypeChecker:
    """Types programs as they are built (node ids in insertion order)."""

    def __init__(self) -> None: ...
    def add(self, op: str, params: Mapping[str, Any], inputs: Sequence[int]) -> int:
        """Adds a node; returns its id. ``ValueError`` naming the operator on a type error."""
    def dtype(self, id: int) -> str: ...
    def shape(self, id: int) -> list[int]: ...
    def constant(self, id: int) -> bool: ...
    def kind(self, id: int) -> str: ...
    def pair_shapes(self, id: int) -> tuple[list[int], list[int]]: ...
    def __len__(self) -> int: ...

class RuleSet:
    """A parsed rule file; syntax errors raise ``ValueError("file:line:col: message")``."""

    @staticmethod
    def parse(text: str, filename: str) -> RuleSet: ...
    @staticmethod
    def load(path: str) -> RuleSet: ...
    @staticmethod
    def constant_folding() -> RuleSet:
        """The built-in constant-folding rules (RLO's ``cprop_*``: arithmetic, comparisons,
        log and exp) on scalar literals."""
    @staticmethod
    def knossos_binding() -> RuleSet:
        """RLO's ``cse_bind`` for lets of two names: ``(let x e (let y e b))`` becomes
        ``(let x e (let y x b))``, the variable's type a computed leaf."""
    @staticmethod
    def layout() -> RuleSet:
        """The built-in layout rules (``se-gate-upsample``, ``se-gate-upsample-l``): a
        squeeze-excite gate ``[N, C, 1, 1]`` times ``x`` ``[N, C, H, W]`` rewritten with the
        gate resized (nearest) to the shape of ``x``."""
    @staticmethod
    def union(sets: Sequence[RuleSet]) -> RuleSet:
        """The rules of ``sets`` in order; ``ValueError`` when two share a rule name."""
    def names(self) -> list[str]: ...
    def num_multi(self) -> int: ...
    def describe(self) -> list[tuple[str, list[str], list[str], int]]:
        """``[(name, [source text], [target text], line)]`` for every rule."""
    def conditions(self, index: int) -> list[str]: ...
    def mirror_symmetric(self, index: int) -> bool:
        """Whether rule ``index`` is a mirror-symmetric merge, applied once per pair of
        e-classes by ``saturate(mirror_once=True)``."""
    def merge_tree(self, index: int) -> bool:
        """Whether rule ``index`` is also applied as a merge tree: a mirror-symmetric merge
        whose sources share a tensor variable, which ``saturate(merge_trees=True)`` applies
        in the first iteration as a balanced tree over every group of operators sharing
        that input (``docs/exploration.md``, "Merge trees")."""
    def check_conditions(self, index: int, bindings: Mapping[str, Any]) -> bool: ...
    def __len__(self) -> int: ...

class EGraph:
    """An e-graph holding one program (flat node list, root last)."""

    def __init__(self, nodes: Sequence[FlatNode]) -> None: ...
    def saturate(
        self,
        rules: RuleSet,
        k_multi: int = 1,
        node_limit: int = 50_000,
        iter_limit: int = 15,
        time_limit: float = 60.0,
        cycle_filter: Literal["efficient", "vanilla", "none"] = "efficient",
        policy: Any | None = None,
        mirror_once: bool = True,
        merge_trees: bool = True,
    ) -> SaturateStats:
        """Explores with ``rules``; ``time_limit`` in seconds; ``policy`` chooses the rules
        and matches of each iteration (``tensat_py.policies``); ``mirror_once`` applies a
        mirror-symmetric merge once per pair of e-classes (``False``: both orders, as
        Tensat does); ``merge_trees`` also applies each such merge, in the e-graph's first
        iteration, as a tree over every group of three or more operators it can merge
        (``stats["merge_tree_applied"]``)."""
    def match_counts(self, rules: RuleSet, multi: bool) -> list[int]:
        """Matches per rule of ``rules`` (multi-pattern rules when ``multi``; a
        mirror-symmetric one once per pair of e-classes)."""
    def find(self, ids: Sequence[int]) -> list[int]:
        """Canonical e-class ids of ``ids``."""
    def iterations_done(self) -> int:
        """Exploration iterations run so far."""
    def size(self) -> tuple[int, int]:
        """``(e-nodes, e-classes)``."""
    def equivalent(self, a: Sequence[FlatNode], b: Sequence[FlatNode]) -> bool: ...
    def extract_rlo(self, functions: Mapping[str, float]) -> tuple[float, str]:
        """The cheapest program under RLO's cost model: ``(cost, s-expression)``."""
    def extract_rlo_shared(self, functions: Mapping[str, float]) -> str | None:
        """A term of the root chosen with shared sub-terms counted once (DAG-cost greedy
        extraction under RLO's per-node costs), as s-expression text, or None; the
        caller binds its repeated sub-terms with ``let`` and prices the result."""
    def export(self) -> dict[str, Any]:
        """``root``, ``num_classes``, ``node_op``, ``node_eclass``, ``node_children``,
        ``filtered`` and ``classes`` (each class's analysis data)."""

def rewrites(nodes: Sequence[FlatNode], rules: RuleSet) -> list[tuple[int, int, list[FlatNode]]]:
    """Every one-step rewrite of a term by the single-pattern rules of ``rules``:
    ``(rule index, pre-order position of the rewritten node, new term)``.

    Raises ``ValueError`` on an ill-typed term."""

def rlo_cost(nodes: Sequence[FlatNode], functions: Mapping[str, float]) -> float:
    """RLO's cost of a Knossos term (flat node list); callee costs by function name.

    Raises ``ValueError`` on an ill-typed term."""

def greedy_tree(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    node_cost: Sequence[float],
    num_classes: int,
    roots: Sequence[int],
    forbidden: Sequence[bool],
) -> list[int]:
    """Tree-cost greedy choice per class (``-1`` when not reached)."""

def greedy_dag(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    node_cost: Sequence[float],
    num_classes: int,
    roots: Sequence[int],
    forbidden: Sequence[bool],
) -> list[int]:
    """DAG-cost greedy choice per class (``-1`` when not reached)."""

def beam_dag(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    node_cost: Sequence[float],
    num_classes: int,
    roots: Sequence[int],
    forbidden: Sequence[bool],
    width: int,
) -> list[int]:
    """Beam extraction keeping ``width`` partial DAG solutions per class (``-1`` when not
    reached)."""

def prune(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    num_classes: int,
    roots: Sequence[int],
    forbidden: Sequence[bool],
) -> list[bool]:
    """Nodes that can appear in some acyclic extraction from the roots (not forbidden, no
    self-loop, every child class buildable, class reachable from the roots)."""

def dominated(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    node_cost: Sequence[float],
    num_classes: int,
    keep: Sequence[bool],
) -> list[int]:
    """Per node, the kept node of its class that dominates it (no costlier, a subset of its
    child classes), or ``-1``."""

def class_sccs(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    num_classes: int,
    keep: Sequence[bool],
) -> list[int]:
    """Strongly connected component id per class of the kept nodes' class graph."""

def sccs(edges: Sequence[Sequence[int]]) -> list[int]:
    """Strongly connected component id per vertex of a graph given as successor lists."""

def dag_cost(
    node_eclass: Sequence[int],
    node_children: Sequence[Sequence[int]],
    node_cost: Sequence[float],
    num_classes: int,
    roots: Sequence[int],
    choice: Sequence[int],
) -> float:
    """Summed cost of the distinct chosen nodes reachable from the roots (``inf`` when a
    reached class has no choice)."""
