//! Merge trees: a merge rule applied to every operator of a group at once.
//!
//! A merge rule is a mirror-symmetric multi-pattern rule ([`Rule::is_mirror_symmetric`]),
//! such as Tensat's matmul merge `(matmul ?a ?x ?w1), (matmul ?a ?x ?w2) => (split_0 (split
//! 1 (matmul ?a ?x (concat 1 2 ?w1 ?w2)))), ...`. Applied pairwise for `k_multi` iterations
//! it merges at most `2^k_multi` operators, through every pair, triple, ... of them: the
//! eight matmuls NasRNN's cell reads `x` with (Tensat's largest win) need `k_multi = 3`,
//! where NasRNN's e-graph reaches a 120,000 e-node limit in the third iteration and the
//! best program 300 s of extraction found under a cost model that counts matmuls still
//! holds 13 where 10 would do (`docs/exploration.md`).
//!
//! A merge tree takes the matches of the rule's first source that bind the variables both
//! sources share (the input `?x`, the activation `?a`) alike: a *group*, the operators
//! that can all merge into one. It applies the rule to the group's members in pairs, then
//! to the pairs' merged operators in pairs, and so on: `n - 1` applications for `n`
//! operators, one e-class holding all of them merged (`(matmul ?a ?x (concat 1 2 (concat 1
//! 2 ?w1 ?w2) (concat 1 2 ?w3 ?w4)))`), each member equal to its split part. The merged
//! operator of a pair is the rule's first source with each pair of varying variables
//! replaced by the smallest subterm of its first target holding both (`(concat 1 2 ?w1
//! ?w2)`).
//!
//! ```
//! use _core::merge_tree::MergeForm;
//! let rs = _core::rules::parse(
//!     "m: (matmul ?a ?x ?w1), (matmul ?a ?x ?w2)\n\
//!      \x20 => (split_0 (split 1 (matmul ?a ?x (concat 1 2 ?w1 ?w2)))),\n\
//!      \x20    (split_1 (split 1 (matmul ?a ?x (concat 1 2 ?w1 ?w2))))\n\
//!      fuse: (relu ?x), (relu ?y)\n\
//!      \x20 => (split_0 (split 0 (relu (concat 0 2 ?x ?y)))),\n\
//!      \x20    (split_1 (split 0 (relu (concat 0 2 ?x ?y))))",
//!     "doc.rules",
//! )
//! .unwrap();
//! let form = MergeForm::of(&rs.rules[0]).unwrap();
//! assert_eq!(form.shared().len(), 2); // ?a and ?x
//! assert_eq!(form.varying().len(), 1); // ?w1 (its mirror ?w2)
//! // Two relus of anything share no variable: no group to merge.
//! assert!(MergeForm::of(&rs.rules[1]).is_none());
//! ```

use crate::analysis::{Data, TensorAnalysis};
use crate::lang::Mdl;
use crate::rules::{canonical, Rule};
use egg::{EGraph, ENodeOrVar, Id, Language, Pattern, Searcher, Subst, Var};
use std::collections::HashMap;

type EG = EGraph<Mdl, TensorAnalysis>;

/// How a merge rule combines two matches: the variables they share and, for each
/// variable only the first source binds, its mirror in the second source and the
/// subterm of the first target that combines the two.
#[derive(Debug, Clone)]
pub struct MergeForm {
    shared: Vec<Var>,
    varying: Vec<(Var, Var, usize)>,
}

/// A group: the first source's matches that bind the shared variables alike, each as its
/// e-class and the values of the varying variables; ordered by e-class id (the input's
/// order), one match per e-class.
#[derive(Debug, Clone)]
pub struct Group {
    /// The shared variables' values.
    pub shared: Vec<(Var, Id)>,
    /// `(e-class, varying values)` per member.
    pub members: Vec<(Id, Vec<Id>)>,
}

impl MergeForm {
    /// The merge form of `rule`: `None` unless it is mirror-symmetric, its sources share
    /// a variable, and its first target holds, for each varying variable, a subterm with
    /// both it and its mirror.
    pub fn of(rule: &Rule) -> Option<MergeForm> {
        if !rule.is_mirror_symmetric() {
            return None;
        }
        let (_, vars0) = canonical(&rule.sources[0]);
        let (_, vars1) = canonical(&rule.sources[1]);
        let mut shared = Vec::new();
        let mut varying = Vec::new();
        let ast = rule.targets[0].ast.as_ref();
        for (&a, &b) in vars0.iter().zip(&vars1) {
            if a == b {
                shared.push(a);
            } else {
                varying.push((a, b, smallest_holding(ast, a, b)?));
            }
        }
        (!shared.is_empty() && !varying.is_empty()).then_some(MergeForm { shared, varying })
    }

    /// The variables both sources bind alike.
    pub fn shared(&self) -> &[Var] {
        &self.shared
    }

    /// `(variable of the first source, its mirror, index of the combining subterm in the
    /// first target's AST)` per varying variable.
    pub fn varying(&self) -> &[(Var, Var, usize)] {
        &self.varying
    }

    /// The groups of at least three members in `egraph` (a pair is the rule's own
    /// application) whose shared values include a tensor (the input they all read).
    pub fn groups(&self, egraph: &EG, rule: &Rule) -> Vec<Group> {
        let mut by_key: HashMap<Vec<Id>, Group> = HashMap::new();
        let mut order: Vec<Vec<Id>> = Vec::new();
        for m in rule.sources[0].search(egraph) {
            for s in &m.substs {
                let key: Vec<Id> = self.shared.iter().map(|v| egraph.find(s[*v])).collect();
                if !key
                    .iter()
                    .any(|&c| matches!(egraph[c].data, Data::Tensor(_)))
                {
                    continue;
                }
                let g = by_key.entry(key.clone()).or_insert_with(|| {
                    order.push(key.clone());
                    Group {
                        shared: self.shared.iter().copied().zip(key).collect(),
                        members: Vec::new(),
                    }
                });
                let class = egraph.find(m.eclass);
                if !g.members.iter().any(|(c, _)| *c == class) {
                    g.members
                        .push((class, self.varying.iter().map(|(v, _, _)| s[*v]).collect()));
                }
            }
        }
        order
            .into_iter()
            .filter_map(|k| by_key.remove(&k))
            .filter(|g| g.members.len() >= 3)
            .map(|mut g| {
                g.members.sort_by_key(|(c, _)| *c);
                g
            })
            .collect()
    }

    /// The substitution merging members `a` (first source) and `b` (second) of `group`.
    pub fn pair(&self, group: &Group, a: &[Id], b: &[Id]) -> Subst {
        let mut s = Subst::with_capacity(self.shared.len() + 2 * self.varying.len());
        for &(v, id) in &group.shared {
            s.insert(v, id);
        }
        for (i, &(va, vb, _)) in self.varying.iter().enumerate() {
            s.insert(va, a[i]);
            s.insert(vb, b[i]);
        }
        s
    }

    /// The merged member after the rule was applied with `subst` (from [`Self::pair`]):
    /// the combining subterms' e-classes and the first source's e-class over them, or
    /// `None` where one of them is not in `egraph`.
    pub fn merged(&self, egraph: &EG, rule: &Rule, subst: &Subst) -> Option<(Id, Vec<Id>)> {
        let target = rule.targets[0].ast.as_ref();
        let mut values = Vec::with_capacity(self.varying.len());
        let mut s = subst.clone();
        for &(va, _, at) in &self.varying {
            let id = lookup(egraph, target, at, subst)?;
            values.push(id);
            s.insert(va, id);
        }
        let source: &Pattern<Mdl> = &rule.sources[0];
        let src = source.ast.as_ref();
        let class = lookup(egraph, src, src.len() - 1, &s)?;
        Some((egraph.find(class), values))
    }
}

/// Index of the first node (in post-order: a smallest subterm) of `ast` below which both
/// `a` and `b` occur.
fn smallest_holding(ast: &[ENodeOrVar<Mdl>], a: Var, b: Var) -> Option<usize> {
    let mut has: Vec<(bool, bool)> = Vec::with_capacity(ast.len());
    for (i, node) in ast.iter().enumerate() {
        let here = match node {
            ENodeOrVar::Var(v) => (*v == a, *v == b),
            ENodeOrVar::ENode(n) => n.children().iter().fold((false, false), |acc, c| {
                let k = has[usize::from(*c)];
                (acc.0 || k.0, acc.1 || k.1)
            }),
        };
        if here == (true, true) {
            return Some(i);
        }
        has.push(here);
    }
    None
}

/// The e-class of the subterm of `ast` at `at` with `subst`'s values, if every e-node of
/// it is in `egraph`.
fn lookup(egraph: &EG, ast: &[ENodeOrVar<Mdl>], at: usize, subst: &Subst) -> Option<Id> {
    match &ast[at] {
        ENodeOrVar::Var(v) => subst.get(*v).map(|&id| egraph.find(id)),
        ENodeOrVar::ENode(n) => {
            let mut kids = Vec::with_capacity(n.children().len());
            for c in n.children() {
                kids.push(lookup(egraph, ast, usize::from(*c), subst)?);
            }
            let mut k = kids.into_iter();
            let node = n.clone().map_children(|_| k.next().unwrap());
            egraph.lookup(node).map(|id| egraph.find(id))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::parse;

    const MERGE: &str = "m: (matmul ?a ?x ?w1), (matmul ?a ?x ?w2)\n  \
        => (split_0 (split 1 (matmul ?a ?x (concat 1 2 ?w1 ?w2)))),\n     \
        (split_1 (split 1 (matmul ?a ?x (concat 1 2 ?w1 ?w2))))";

    #[test]
    fn the_combining_subterm_is_the_smallest_holding_both_variables() {
        let rs = parse(MERGE, "t.rules").unwrap();
        let form = MergeForm::of(&rs.rules[0]).unwrap();
        let (_, _, at) = form.varying()[0];
        let ast = rs.rules[0].targets[0].ast.as_ref();
        assert_eq!(ast[at].to_string(), "concat");
    }

    #[test]
    fn a_rule_that_is_not_mirror_symmetric_has_no_merge_form() {
        let rs = parse(
            "r: (matmul 0 ?x ?w1), (matmul 0 ?x ?w2) => (matmul 0 ?x ?w1), (matmul 0 ?x ?w1)",
            "t.rules",
        )
        .unwrap();
        assert!(MergeForm::of(&rs.rules[0]).is_none());
    }
}
