"""Refinement of an extracted program against a whole-program price
(``tensat_py.extract.refine``): the input's own e-nodes are found in the e-graph, a switch
back to them is kept exactly when the program it builds is cheaper, and ``optimize`` runs
it for a cost model that prices whole programs."""

from __future__ import annotations

from tensat_py import _core
from tensat_py.extract.refine import input_choices, refine
from tensat_py.graph import Graph

# relu(x) + relu(exp(x)); the rule offers tanh for each relu (the e-graph does not check
# meaning, and nothing here is run).
RULES = _core.RuleSet.parse("r: (relu ?x) => (tanh ?x)", "refine.rules")


def _program() -> Graph:
    g = Graph()
    x = g.add_input("x", (2, 2), "float32")
    a = g.add_node("relu", {}, [x])
    b = g.add_node("relu", {}, [g.add_node("exp", {}, [x])])
    g.outputs = [g.add_node("ewadd", {}, [a, b])]
    return g


def _saturated(g: Graph) -> dict:
    eg = _core.EGraph(g.to_flat())
    eg.saturate(RULES)
    return eg.export()


def _all_tanh(export: dict, toward: dict[int, int]) -> dict[int, int]:
    """The input's choice with every relu class choosing its tanh instead."""
    ops, eclass = export["node_op"], export["node_eclass"]
    out = dict(toward)
    for n, op in enumerate(ops):
        if op == "tanh":
            out[eclass[n]] = n
    return out


def _price(g: Graph) -> float:
    """1 per relu, 5 per tanh of the input itself, 0 for any other tanh."""
    cost = 0.0
    live = g.live()
    for i, node in enumerate(g.nodes):
        if not live[i]:
            continue
        if node.op == "relu":
            cost += 1.0
        elif node.op == "tanh":
            cost += 5.0 if g.nodes[node.inputs[0]].op == "input" else 0.0
    return cost


def _ops(g: Graph) -> list[str]:
    live = g.live()
    return sorted(n.op for i, n in enumerate(g.nodes) if live[i] and n.op in ("relu", "tanh"))


def test_the_input_choice_rebuilds_the_input_program() -> None:
    g = _program()
    export = _saturated(g)
    toward = input_choices(export, g.to_flat())
    assert Graph.from_choices(export, toward).to_flat() == g.to_flat()
    assert sorted(export["node_op"][n] for n in toward.values()).count("relu") == 2


def test_a_switch_back_is_kept_only_where_the_program_gets_cheaper() -> None:
    g = _program()
    export = _saturated(g)
    toward = input_choices(export, g.to_flat())
    r = refine(export, _all_tanh(export, toward), toward, _price)
    assert (r.start_cost, r.cost) == (5.0, 1.0)
    # relu(x) came back (5 -> 1); tanh(exp(x)) stayed (reverting it costs 1 more)
    assert _ops(r.graph) == ["relu", "tanh"]
    assert r.switched == 1 and r.complete
    assert _price(Graph.from_choices(export, r.choices)) == r.cost


def test_refinement_keeps_the_extraction_when_nothing_pays() -> None:
    g = _program()
    export = _saturated(g)
    toward = input_choices(export, g.to_flat())
    r = refine(export, _all_tanh(export, toward), toward, lambda p: float(len(p.nodes)))
    assert r.switched == 0 and r.cost == r.start_cost
    assert _ops(r.graph) == ["tanh", "tanh"]


def test_refinement_stops_at_its_deadline() -> None:
    g = _program()
    export = _saturated(g)
    toward = input_choices(export, g.to_flat())
    r = refine(export, _all_tanh(export, toward), toward, _price, deadline=0.0)
    assert not r.complete and r.trials == 1 and r.cost == r.start_cost == 5.0


def test_an_input_e_node_on_the_filter_list_is_never_chosen() -> None:
    g = _program()
    export = dict(_saturated(g))
    toward = input_choices(export, g.to_flat())
    exp = next(n for n in toward.values() if export["node_op"][n] == "exp")
    export["filtered"] = [exp]
    pruned = input_choices(export, g.to_flat())
    assert exp not in pruned.values()
    assert set(toward) - set(pruned) == {export["node_eclass"][exp]}  # its parents stay
    # a switch that would need it is skipped; the rest of the search goes on
    r = refine(export, _all_tanh(export, pruned | toward), pruned, _price)
    assert r.cost == 1.0 and r.switched == 1


def test_a_float_parameter_is_found_whatever_its_spelling() -> None:
    g = Graph()
    x = g.add_input("x", (2, 2), "float32")
    g.outputs = [g.add_node("leaky_relu", {"alpha": 1e-5}, [x])]
    flat = g.to_flat()
    export = _core.EGraph(flat).export()
    assert "1e-05" in [op for op, _ in flat] and "1e-05" not in export["node_op"]
    assert Graph.from_choices(export, input_choices(export, flat)).to_flat() == flat
