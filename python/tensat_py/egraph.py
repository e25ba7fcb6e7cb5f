"""Flat e-graphs for extraction, and egraph-serialize JSON input/output.

An :class:`ExtractionProblem` is the e-graph as the extractors see it: e-classes are dense
indices ``0..num_classes-1``, e-nodes are ``0..n-1``; node ``i`` belongs to class
``node_eclass[i]``, its operands are the *classes* ``node_children[i]`` and it costs
``node_cost[i]`` (seconds for Tensat's cost models; any finite unit works, negative costs
included: :mod:`tensat_py.extract.signed`). Nodes in
``forbidden`` (Tensat's cycle filter list) may never be chosen.

A *choice* maps a class to the node picked for it. The helpers here find cycles in a choice
and check it; its DAG cost (every distinct chosen node reachable from the roots paid once)
is computed by ``rust/src/extract.rs`` (``tensat_py._core.dag_cost``), the one place that
defines it for the greedy extractors, the ILP and the statistics alike.

The JSON format is egraph-serialize's (as used by extraction-gym)::

    {"nodes": {"<node id>": {"op": str, "children": [<node id>, ...],
                              "eclass": "<class id>", "cost": float}},
     "root_eclasses": ["<class id>", ...]}

A child names a *node*, and means "the class of that node". ``cost`` defaults to 1.0 as in
egraph-serialize. Forbidden nodes are written under an extra key ``"tensat_forbidden"``
(a list of node ids), which other readers ignore.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensat_py import _core
from tensat_py._files import atomic_write

__all__ = ["ExtractionProblem", "load_json", "save_json"]


@dataclass
class ExtractionProblem:
    """A flat e-graph to extract from.

    Attributes:
        node_op: operator text of each node (leaves carry their literal).
        node_eclass: class index of each node.
        node_children: child class indices of each node, in operand order.
        node_cost: cost of each node (finite; seconds, non-negative, for Tensat's cost
            models; negative costs, as in extraction-gym's ``maxsat`` e-graphs, go through
            :mod:`tensat_py.extract.signed`).
        num_classes: number of classes (ids are ``0..num_classes-1``).
        roots: root classes; every one of them must be built.
        forbidden: nodes that may not be chosen, as a set of node ids or one bool per node.
        node_names: original node ids (egraph-serialize) for round trips, or ``None``.
        class_names: original class ids (egraph-serialize) for round trips, or ``None``.
    """

    node_op: list[str]
    node_eclass: list[int]
    node_children: list[list[int]]
    node_cost: list[float]
    num_classes: int
    roots: list[int]
    forbidden: set[int] | list[bool] = field(default_factory=set)
    node_names: list[str] | None = None
    class_names: list[str] | None = None

    @property
    def num_nodes(self) -> int:
        """Number of e-nodes."""
        return len(self.node_eclass)

    @classmethod
    def from_export(
        cls, export: dict[str, Any], node_cost: list[float] | None = None
    ) -> ExtractionProblem:
        """Builds a problem from ``tensat_py._core.EGraph.export()``'s dictionary.

        Args:
            export: the exported e-graph (``node_op``, ``node_eclass``, ``node_children``,
                ``num_classes``, ``root``, optional ``filtered``).
            node_cost: cost per node (seconds); defaults to 1.0 for every node.

        Raises:
            ValueError: if the problem is malformed (see :meth:`validate`).
        """
        n = len(export["node_op"])
        problem = cls(
            node_op=list(export["node_op"]),
            node_eclass=list(export["node_eclass"]),
            node_children=[list(c) for c in export["node_children"]],
            node_cost=list(node_cost) if node_cost is not None else [1.0] * n,
            num_classes=int(export["num_classes"]),
            roots=[int(export["root"])],
            forbidden=set(export.get("filtered", ())),
        )
        problem.validate()
        return problem

    def forbidden_mask(self) -> list[bool]:
        """One bool per node: whether it may not be chosen."""
        if isinstance(self.forbidden, list | tuple) and (
            len(self.forbidden) == self.num_nodes
            and all(isinstance(f, bool) for f in self.forbidden)
        ):
            return list(self.forbidden)
        mask = [False] * self.num_nodes
        for i in self.forbidden:
            mask[int(i)] = True
        return mask

    def forbidden_set(self) -> set[int]:
        """The forbidden node ids as a set."""
        return {i for i, f in enumerate(self.forbidden_mask()) if f}

    def validate(self, source: str = "problem") -> None:
        """Checks lengths, index ranges and costs.

        Args:
            source: a name for messages (a file path, say).

        Raises:
            ValueError: naming ``source`` and the first offending node or root.
        """
        n = self.num_nodes
        for name in ("node_op", "node_children", "node_cost"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"{source}: {name} has {len(getattr(self, name))} entries, node_eclass has {n}"
                )
        if not (
            isinstance(self.forbidden, list | tuple)
            and len(self.forbidden) == n
            and all(isinstance(f, bool) for f in self.forbidden)
        ):
            bad = [i for i in self.forbidden if isinstance(i, bool) or not 0 <= int(i) < n]
            if bad:
                raise ValueError(
                    f"{source}: forbidden entry {bad[0]!r} is not a node id "
                    f"(expected node ids or {n} bools)"
                )
        for i in range(n):
            if not 0 <= self.node_eclass[i] < self.num_classes:
                raise ValueError(
                    f"{source}: node {self._name(i)}: class {self.node_eclass[i]} out of range "
                    f"(num_classes {self.num_classes})"
                )
            for c in self.node_children[i]:
                if not 0 <= c < self.num_classes:
                    raise ValueError(
                        f"{source}: node {self._name(i)}: child class {c} out of range "
                        f"(num_classes {self.num_classes})"
                    )
            cost = self.node_cost[i]
            if not (isinstance(cost, int | float) and math.isfinite(cost)):
                raise ValueError(
                    f"{source}: node {self._name(i)}: cost {cost!r} is not a finite number"
                )
        if not self.roots:
            raise ValueError(f"{source}: no root classes")
        for r in self.roots:
            if not 0 <= r < self.num_classes:
                raise ValueError(f"{source}: root class {r} out of range")

    def _name(self, i: int) -> str:
        if self.node_names is not None:
            return repr(self.node_names[i])
        return str(i)

    def class_nodes(self) -> list[list[int]]:
        """For each class, its node ids in order."""
        out: list[list[int]] = [[] for _ in range(self.num_classes)]
        for i, c in enumerate(self.node_eclass):
            out[c].append(i)
        return out

    def reachable(self, choices: dict[int, int]) -> dict[int, int]:
        """The part of ``choices`` reachable from the roots through chosen nodes."""
        out: dict[int, int] = {}
        stack = list(self.roots)
        while stack:
            c = stack.pop()
            if c in out or c not in choices:
                continue
            out[c] = choices[c]
            stack.extend(self.node_children[choices[c]])
        return out

    def dag_cost(self, choices: dict[int, int]) -> float:
        """DAG cost of a choice: each distinct chosen node reachable from the roots once.

        Computed in Rust (``tensat_py._core.dag_cost``, ``rust/src/extract.rs``).

        Args:
            choices: class -> chosen node.

        Returns:
            the summed cost (the problem's unit, seconds for Tensat's cost models);
            ``math.inf`` when a class reached from the roots has no choice.

        Raises:
            ValueError: on a malformed problem, or a class or node id out of range.
        """
        raw = [-1] * self.num_classes
        for c, node in choices.items():
            if not 0 <= c < self.num_classes:
                raise ValueError(f"choice for class {c}: no such class ({self.num_classes})")
            raw[c] = node
        return _core.dag_cost(
            self.node_eclass,
            self.node_children,
            self.node_cost,
            self.num_classes,
            self.roots,
            raw,
        )

    def find_cycle(self, choices: dict[int, int]) -> list[int] | None:
        """A cycle of classes in the chosen graph reachable from the roots, or ``None``.

        The cycle is returned as the list of classes ``[c0, c1, ...]`` where the chosen node
        of each has the next (and the last has ``c0``) as a child.
        """
        colour: dict[int, int] = {}  # 1 on stack, 2 done
        for r in self.roots:
            if r in colour:
                continue
            colour[r] = 1
            path = [r]
            iters = [iter(self.node_children[choices[r]]) if r in choices else iter(())]
            while path:
                d = next(iters[-1], None)
                if d is None:
                    colour[path.pop()] = 2
                    iters.pop()
                    continue
                state = colour.get(d, 0)
                if state == 1:
                    return path[path.index(d) :]
                if state == 0:
                    colour[d] = 1
                    path.append(d)
                    iters.append(iter(self.node_children[choices[d]]) if d in choices else iter(()))
        return None

    def check_choice(self, choices: dict[int, int]) -> str | None:
        """Why ``choices`` is not a valid extraction, or ``None`` when it is.

        Valid means: every class reached from the roots has a choice, the node belongs to that
        class and is not forbidden, and the chosen graph is acyclic.
        """
        forbidden = self.forbidden_mask()
        reach = self.reachable(choices)
        for c, node in reach.items():
            if not 0 <= node < self.num_nodes or self.node_eclass[node] != c:
                return f"class {c}: node {node} is not in that class"
            if forbidden[node]:
                return f"class {c}: node {node} is forbidden"
            for d in self.node_children[node]:
                if d not in choices:
                    return f"class {d} (child of node {node}) has no choice"
        cycle = self.find_cycle(choices)
        if cycle is not None:
            return f"cycle through classes {cycle}"
        return None


def _fail(path: Path | str, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


def load_json(path: str | os.PathLike[str]) -> ExtractionProblem:
    """Reads an egraph-serialize JSON file.

    Classes are numbered in order of first appearance among the nodes; nodes keep file order.
    The original ids are kept in ``node_names`` / ``class_names``.

    Args:
        path: the JSON file.

    Raises:
        ValueError: on malformed input, naming the file and the node (missing ``eclass``,
            a child that is not a node, a bad cost, an unknown root class, ...).
        OSError: when the file cannot be read.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as e:
        raise _fail(path, f"not JSON: {e}") from e
    except UnicodeDecodeError as e:
        raise _fail(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from e
    except RecursionError:
        raise _fail(path, "JSON nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise _fail(path, 'expected an object with a "nodes" object')
    nodes: dict[str, Any] = data["nodes"]
    node_names = list(nodes)
    node_index = {name: i for i, name in enumerate(node_names)}
    class_index: dict[str, int] = {}
    node_op: list[str] = []
    node_eclass: list[int] = []
    node_cost: list[float] = []
    for name, node in nodes.items():
        if not isinstance(node, dict):
            raise _fail(path, f"node {name!r}: expected an object")
        if "eclass" not in node:
            raise _fail(path, f'node {name!r}: missing "eclass"')
        eclass = str(node["eclass"])
        node_eclass.append(class_index.setdefault(eclass, len(class_index)))
        node_op.append(str(node.get("op", "")))
        cost = node.get("cost", 1.0)
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
            raise _fail(path, f"node {name!r}: cost {cost!r} is not a finite number")
        node_cost.append(float(cost))
    node_children: list[list[int]] = []
    for name, node in nodes.items():
        children = node.get("children", [])
        if not isinstance(children, list):
            raise _fail(path, f'node {name!r}: "children" must be a list of node ids')
        kids = []
        for child in children:
            j = node_index.get(str(child))
            if j is None:
                raise _fail(path, f"node {name!r}: child {child!r} is not a node")
            kids.append(node_eclass[j])
        node_children.append(kids)
    roots_raw = data.get("root_eclasses")
    if not isinstance(roots_raw, list) or not roots_raw:
        raise _fail(path, 'missing or empty "root_eclasses"')
    roots = []
    for r in roots_raw:
        if str(r) not in class_index:
            raise _fail(path, f"root class {r!r} has no nodes")
        roots.append(class_index[str(r)])
    forbidden: set[int] = set()
    for f in data.get("tensat_forbidden", []):
        if str(f) not in node_index:
            raise _fail(path, f"forbidden node {f!r} is not a node")
        forbidden.add(node_index[str(f)])
    class_names = [""] * len(class_index)
    for name, i in class_index.items():
        class_names[i] = name
    problem = ExtractionProblem(
        node_op=node_op,
        node_eclass=node_eclass,
        node_children=node_children,
        node_cost=node_cost,
        num_classes=len(class_index),
        roots=roots,
        forbidden=forbidden,
        node_names=node_names,
        class_names=class_names,
    )
    problem.validate(str(path))
    return problem


def save_json(problem: ExtractionProblem, path: str | os.PathLike[str]) -> None:
    """Writes ``problem`` as egraph-serialize JSON, atomically (temp file + ``os.replace``;
    the file follows the umask).

    Node and class ids are ``node_names`` / ``class_names`` when set, else the indices as
    strings. A child class is written as the id of the first node of that class, which
    reloads to the same class. Forbidden nodes go to ``"tensat_forbidden"``.

    Args:
        problem: the e-graph.
        path: destination file.

    Raises:
        ValueError: if the problem is malformed, or a child class has no node.
        OSError: when the file cannot be written (the message names ``path``).
    """
    path = Path(path)
    problem.validate(str(path))
    n = problem.num_nodes
    node_names = problem.node_names or [str(i) for i in range(n)]
    class_names = problem.class_names or [str(c) for c in range(problem.num_classes)]
    if len(set(node_names)) != n or len(class_names) != problem.num_classes:
        raise _fail(path, "node_names / class_names must be unique and match the counts")
    first = [-1] * problem.num_classes
    for i in range(n - 1, -1, -1):
        first[problem.node_eclass[i]] = i
    nodes: dict[str, Any] = {}
    for i in range(n):
        kids = []
        for c in problem.node_children[i]:
            if first[c] < 0:
                raise _fail(path, f"node {node_names[i]!r}: child class {c} has no nodes")
            kids.append(node_names[first[c]])
        nodes[node_names[i]] = {
            "op": problem.node_op[i],
            "children": kids,
            "eclass": class_names[problem.node_eclass[i]],
            "cost": problem.node_cost[i],
        }
    data: dict[str, Any] = {
        "nodes": nodes,
        "root_eclasses": [class_names[r] for r in problem.roots],
    }
    forbidden = sorted(problem.forbidden_set())
    if forbidden:
        data["tensat_forbidden"] = [node_names[i] for i in forbidden]
    atomic_write(path, lambda f: json.dump(data, f))
