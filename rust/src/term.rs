//! One rewrite at a time on a term (RLO's setting, not an e-graph): every way one
//! single-pattern rule can rewrite one node of a program tree.
//!
//! Knossos RLO (Microsoft, knossos-ksc `rlo/`) searches sequences of rewrites, each an
//! action `(node_index, rule)` with `node_index` the node's pre-order position in the term;
//! [`rewrites`] lists exactly those actions and their results, so that a search over
//! rewrite sequences (A* in `tensat_py.policies.astar`) can run with the same rule files,
//! conditions and type rules as equality saturation. Matching and conditions run on an
//! e-graph holding only the term (no unions), so each e-class has one e-node and every
//! variable of a match stands for one sub-term; a result must type-check and keep the
//! rewritten node's type, as in [`crate::saturate`].
//!
//! ```
//! use _core::term::rewrites;
//! let rules = _core::rules::parse("comm: (ewadd ?a ?b) => (ewadd ?b ?a)", "inline").unwrap();
//! let expr = "(ewadd (input x@2) (input y@2))".parse().unwrap();
//! let out = rewrites(&expr, &rules);
//! assert_eq!(out.len(), 1);
//! assert_eq!(out[0].2.to_string(), "(ewadd (input y@2) (input x@2))");
//! ```

use crate::analysis::TensorAnalysis;
use crate::lang::Mdl;
use crate::rules::RuleSet;
use crate::saturate::{plan, same_type};
use egg::{EGraph, ENodeOrVar, Id, Language, RecExpr, Searcher, Subst};

type EG = EGraph<Mdl, TensorAnalysis>;

/// Every one-step rewrite of `expr` (its last node is the root) by the single-pattern rules
/// of `rules`: `(rule index, pre-order position of the rewritten node, new term)`, in rule
/// order, then by position. Multi-pattern rules are skipped. A result that does not
/// type-check or changes the node's type is left out.
pub fn rewrites(expr: &RecExpr<Mdl>, rules: &RuleSet) -> Vec<(usize, usize, RecExpr<Mdl>)> {
    let nodes = expr.as_ref();
    if nodes.is_empty() {
        return vec![];
    }
    let mut egraph = EG::default();
    let mut class: Vec<Id> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let id = egraph.add(n.clone().map_children(|c| class[usize::from(c)]));
        class.push(id);
    }
    egraph.rebuild();
    // Pre-order positions of the tree below the root, each with its node index.
    let root = nodes.len() - 1;
    let mut order: Vec<usize> = Vec::new();
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        order.push(i);
        for c in nodes[i].children().iter().rev() {
            stack.push(usize::from(*c));
        }
    }
    // One node index per e-class (any occurrence: equal sub-terms share an e-class).
    let mut rep: rustc_hash::FxHashMap<Id, usize> = Default::default();
    for (i, &c) in class.iter().enumerate() {
        rep.entry(egraph.find(c)).or_insert(i);
    }
    let mut out = Vec::new();
    for (ri, rule) in rules.rules.iter().enumerate() {
        if rule.is_multi() {
            continue;
        }
        let mut matches: Vec<(Id, Subst)> = Vec::new();
        for m in rule.sources[0].search(&egraph) {
            for s in m.substs {
                if rule.check(&egraph, &s) {
                    matches.push((m.eclass, s));
                }
            }
        }
        let mut results: Vec<(usize, RecExpr<Mdl>)> = Vec::new();
        for (eclass, subst) in &matches {
            let target = &rule.targets[0];
            match plan(&egraph, target, subst) {
                Some(p) if same_type(&egraph[*eclass].data, p.root_data(&egraph)) => {}
                _ => continue,
            }
            for (pos, &i) in order.iter().enumerate() {
                if egraph.find(class[i]) != *eclass {
                    continue;
                }
                let mut new = RecExpr::default();
                copy(nodes, root, pos, &mut 0, &mut new, &mut |new| {
                    instantiate(target.ast.as_ref(), subst, nodes, &rep, &egraph, new)
                });
                results.push((pos, new));
            }
        }
        results.sort_by_key(|(pos, _)| *pos);
        out.extend(results.into_iter().map(|(pos, e)| (ri, pos, e)));
    }
    out
}

/// Copy the tree below node `i` into `new`, calling `at_target` in place of the node at
/// pre-order position `target` (`pos` counts the positions visited so far).
fn copy(
    nodes: &[Mdl],
    i: usize,
    target: usize,
    pos: &mut usize,
    new: &mut RecExpr<Mdl>,
    at_target: &mut dyn FnMut(&mut RecExpr<Mdl>) -> Id,
) -> Id {
    let here = *pos;
    *pos += 1;
    if here == target {
        return at_target(new);
    }
    let n = nodes[i]
        .clone()
        .map_children(|c| copy(nodes, usize::from(c), target, pos, new, at_target));
    new.add(n)
}

fn instantiate(
    ast: &[ENodeOrVar<Mdl>],
    subst: &Subst,
    nodes: &[Mdl],
    rep: &rustc_hash::FxHashMap<Id, usize>,
    egraph: &EG,
    new: &mut RecExpr<Mdl>,
) -> Id {
    let mut ids: Vec<Id> = Vec::with_capacity(ast.len());
    for node in ast {
        let id = match node {
            ENodeOrVar::Var(v) => {
                let i = rep[&egraph.find(subst[*v])];
                copy_plain(nodes, i, new)
            }
            ENodeOrVar::ENode(n) => new.add(n.clone().map_children(|c| ids[usize::from(c)])),
        };
        ids.push(id);
    }
    *ids.last().expect("non-empty target")
}

fn copy_plain(nodes: &[Mdl], i: usize, new: &mut RecExpr<Mdl>) -> Id {
    let n = nodes[i]
        .clone()
        .map_children(|c| copy_plain(nodes, usize::from(c), new));
    new.add(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;

    fn texts(rules: &str, prog: &str) -> Vec<(usize, usize, String)> {
        let rs = parse(rules, "t.rules").unwrap();
        rewrites(&prog.parse().unwrap(), &rs)
            .into_iter()
            .map(|(r, p, e)| (r, p, e.to_string()))
            .collect()
    }

    #[test]
    fn each_occurrence_of_a_shared_subterm_is_its_own_action() {
        let got = texts(
            "relu2: (relu (relu ?x)) => (relu ?x)",
            "(ewadd (relu (relu (input x@2))) (relu (relu (input x@2))))",
        );
        assert_eq!(
            got,
            vec![
                (
                    0,
                    1,
                    "(ewadd (relu (input x@2)) (relu (relu (input x@2))))".into()
                ),
                (
                    0,
                    5,
                    "(ewadd (relu (relu (input x@2))) (relu (input x@2)))".into()
                ),
            ]
        );
    }

    #[test]
    fn ill_typed_rewrites_are_left_out() {
        let got = texts(
            "bad: (matmul 0 ?x ?y) => (ewadd ?x ?y)",
            "(matmul 0 (input x@2_3) (input y@3_4))",
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn multi_pattern_rules_are_skipped() {
        let got = texts(
            "m: (relu ?x), (tanh ?x) => (relu ?x), (tanh ?x)",
            "(ewadd (relu (input x@2)) (tanh (input x@2)))",
        );
        assert!(got.is_empty());
    }
}
