"""A Knossos program as a program of functions for the pipeline's function stage.

:class:`KsFunctions` is what :mod:`tensat_py.def_phases` needs from a program made of
functions, and nothing Knossos-specific leaks past it: which defs there are and which
they call (the call graph), each def's body as a flat knossos-dialect term
(:func:`.lower.lower`) and back (:func:`.lower.raise_term`), the program's own rules (one
``inline_call`` rule per non-recursive def, from the program as optimised so far), the
function costs RLO's cost model takes as data (:func:`function_costs`), the hoisted
variants of a def (:mod:`.hoist`, RLO's ``new_bind``/``lift_bind``/``cse_bind``), a def
with its lets and calls unfolded as a second start for exploration (``normalised``), the
e-graph's term chosen for shared sub-terms with them bound (``shared``) and the
evaluator's check of a candidate against the original def (:func:`.evaluate.compare_defs`).

>>> from tensat_py.frontends.knossos import KsProgram, parse_text
>>> fs = KsFunctions(KsProgram(parse_text(
...     "(def g Float ((x : Float)) (mul x 2.0)) (def f Float ((x : Float)) (add (g x) 1.0))")))
>>> [fs.name(i) for i in fs.functions()], fs.callees(1)
(['g', 'f'], {0})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tensat_py.frontends.knossos.hoist import free_vars
from tensat_py.frontends.knossos.syntax import Def, Program

__all__ = ["KsFunctions"]


class KsFunctions:
    """The defs of a loaded Knossos program (:class:`tensat_py.frontends.knossos.KsProgram`)
    for :func:`tensat_py.def_phases.optimize_functions`.

    Functions are named by their index among the program's items; the original program is
    kept for checking candidates (the evaluator runs callees as they were written), the
    current one (defs replaced as they are optimised) for the ``inline_call`` rules.
    """

    frontend = "knossos"
    runner = "knossos-evaluator"

    def __init__(self, prog: Any) -> None:
        from tensat_py.frontends.knossos.lower import signatures

        self.source = prog
        self.original: Program = prog.program
        self.items = list(self.original.items)
        #: The prelude the program was loaded with (``load(..., prelude=)``), or None.
        self.prelude: Program | None = prog.meta.get("prelude")
        self.sigs = signatures(self.original, self.prelude)
        names = {d.name for d in self.original.defs}
        self._callees: dict[int, set[int]] = {}
        by_name: dict[str, list[int]] = {}
        for i, d in enumerate(self.items):
            if isinstance(d, Def):
                by_name.setdefault(d.name, []).append(i)
        for i in self.functions():
            # Free names with calls: the functions the body calls (a name its own binders
            # shadow is not one of them).
            called = free_vars(self.items[i].body, calls=True) & names
            self._callees[i] = {j for n in called for j in by_name[n]}
        self._rules: Any = None  # the inline_call rules, rebuilt after a replace()
        self._rules_stale = True

    def functions(self) -> list[int]:
        """Indices of the program's defs, in file order."""
        return [i for i, d in enumerate(self.items) if isinstance(d, Def)]

    def name(self, i: int) -> str:
        """Def ``i``'s name as written (``f``, ``[rev f]``)."""
        return str(self.items[i].name)

    def callees(self, i: int) -> set[int]:
        """The defs def ``i`` calls (itself too when it is recursive)."""
        return set(self._callees.get(i, set()))

    def current(self, i: int) -> Def:
        """Def ``i`` as optimised so far (the original until :meth:`replace`)."""
        return self.items[i]

    def lower(self, d: Def) -> list[tuple[str, list[int]]]:
        """``d``'s body as a flat knossos-dialect term (root last).

        Raises:
            ValueError: (``Untranslatable``) a construct the e-graph language lacks.
        """
        from tensat_py.frontends.knossos.lower import lower

        return lower(d, self.sigs)[0]

    def raise_term(self, i: int, term: str) -> Def:
        """Def ``i`` with the extracted ``term`` (s-expression text) as its body."""
        from tensat_py.frontends.knossos.lower import raise_term

        d = self.items[i]
        return Def(d.name, d.ret, d.params, raise_term(term), d.line)

    def function_costs(self) -> dict[str, float]:
        """The original program's function costs (RLO units) for RLO's cost model."""
        from tensat_py.frontends.knossos import function_costs

        return function_costs(self.original, self.prelude)

    def rules(self) -> Any:
        """The program's own rules, from the program as optimised so far: one
        ``inline_call`` rule per non-recursive translatable def; None when there are none."""
        from tensat_py import _core
        from tensat_py.frontends.knossos import _inline_rules

        if self._rules_stale:
            text = _inline_rules(Program(self.items, self.original.file), self.sigs)
            self._rules = _core.RuleSet.parse(text, "<inline_call>") if text.strip() else None
            self._rules_stale = False
        return self._rules

    def variants(self, d: Def) -> list[Def]:
        """``d`` with loop invariants hoisted (RLO's ``new_bind`` + ``lift_bind``), without
        and with common sub-expressions bound (``cse_bind``)."""
        from tensat_py.frontends.knossos.hoist import hoist_def

        return [hoist_def(d, cse=cse) for cse in (False, True)]

    def normalised(self, d: Def) -> Def | None:
        """``d`` with every ``let`` substituted, every call to a non-recursive def of the
        program (as optimised so far) inlined and every ``get`` of a ``tuple`` taken
        (:func:`.hoist.inline_all`): a start for exploration that the ``inline_let`` rules
        need not unfold; None where that does not apply or changes nothing."""
        from tensat_py.frontends.knossos.hoist import inline_all

        by_name: dict[str, list[int]] = {}
        for j in self.functions():
            by_name.setdefault(str(self.items[j].name), []).append(j)
        defs = {
            n: self.items[js[0]]
            for n, js in by_name.items()
            # One def of that name (no overloads), not recursive (nor calling anything
            # that calls it: inline_all inlines through the callees' own calls).
            if len(js) == 1 and not self._reaches(js[0], js[0])
        }
        out = inline_all(d, defs)
        return None if out is None or out.body == d.body else out

    def _reaches(self, i: int, target: int) -> bool:
        """Whether def ``i`` calls ``target``, directly or through other defs."""
        seen: set[int] = set()
        todo = list(self.callees(i))
        while todo:
            j = todo.pop()
            if j == target:
                return True
            if j not in seen:
                seen.add(j)
                todo.extend(self.callees(j))
        return False

    def shared(self, i: int, egraph: Any, costs: Mapping[str, float]) -> list[Def]:
        """Def ``i`` with the term of ``egraph``'s root chosen for shared sub-terms
        (``EGraph.extract_rlo_shared``: DAG-cost greedy extraction under RLO's per-node
        costs, calls priced by ``costs``, :meth:`function_costs`, RLO units) as its body,
        repeated sub-terms bound by ``let`` (:func:`.hoist.hoist_def` with ``cse``, RLO's
        ``new_bind`` + ``cse_bind``); empty when there is none."""
        from tensat_py.frontends.knossos.hoist import hoist_def

        term = egraph.extract_rlo_shared(dict(costs))
        if term is None:
            return []
        return [hoist_def(self.raise_term(i, term), cse=True)]

    def check(self, i: int, cand: Def) -> tuple[bool, str]:
        """Run the original def ``i`` and ``cand`` on the same random arguments
        (:func:`tensat_py.frontends.knossos.evaluate.compare_defs`): ``(ok, message)``,
        message ``"verified"`` or why not."""
        from tensat_py.frontends.knossos import evaluate

        return evaluate.compare_defs(
            self.original, self.original.items[i], cand, prelude=self.prelude
        )

    def replace(self, i: int, d: Def) -> None:
        """Keep ``d`` as def ``i``'s body from now on (the ``inline_call`` rules follow)."""
        self.items[i] = d
        self._rules_stale = True

    def program(self) -> Any:
        """The program with every replaced def (a new ``KsProgram``)."""
        from tensat_py.frontends.knossos import KsProgram

        return KsProgram(Program(list(self.items), self.original.file), dict(self.source.meta))
