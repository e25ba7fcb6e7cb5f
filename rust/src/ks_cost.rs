//! RLO's cost model for Knossos programs, and tree-cost extraction under it.
//!
//! Constants from knossos-ksc `rlo/src/rlo/costs.py` and `costs_ksc.py` (RLO, Microsoft,
//! MIT licence): `add`/`sub` 1, `mul`/`div` 2, `exp`/`log` 4, comparisons and `to_float`
//! 1, `index` 1, `size` 1, `sum` `assumed_vector_size - 1` = 15, `let` 0.1 (also per tuple
//! element), tuple selection 0, constants and variables 0, `if` 1 + condition + the
//! costlier branch + 0.0001 x the cheaper one, `assert` 1, `build` 2 (`build_malloc_cost`)
//! plus size plus 16 x body, `sumbuild` 15 x (scalars in the body) plus size plus 16 x
//! body, a call 2 (`apply_cost`) plus arguments plus the callee's cost (a user function's body, a `cost$f`
//! definition, or 7 for other declared functions). A loop over a `Tensor N` (an index
//! tuple of N `Integer`s) runs `assumed_vector_size`^N times. A `ks_opaque` sub-term (one
//! the front end does not translate) costs its operands plus the figure the caller gives
//! for its key (default 7, RLO's edef cost). `sqrt`, `erf` (not in RLO's table) cost 4,
//! as `exp` and `log`. The constant of each operator priced "own cost plus operands" is
//! declared with the operator (`OpDecl::rlo_cost` in `lang/tensor.rs`, `lang/knossos.rs`);
//! the constructs priced otherwise are below. Costs are unitless (RLO's units); a
//! program's cost is its tree cost: shared sub-terms count once per occurrence (sharing is
//! only what `let` makes explicit).
//!
//! Extraction ([`extract`]) may make sharing explicit itself: where the cheapest e-node of
//! an arithmetic operator, a tuple or a call has one e-class as two or more operands
//! (`(mul (div x y) (div x y))`, which rules reach from `(div (mul x x) (mul y y))`), it
//! binds that operand once, `(let cse$0 (div x y) (mul cse$0 cse$0))`, when the copies
//! cost more than the `let` (RLO's `new_bind` followed by `cse_bind`; the term it prints
//! costs, as a tree, what extraction counted).

use crate::analysis::{Data, TensorAnalysis};
use crate::lang::knossos::KsType;
use crate::lang::Mdl;
use egg::{CostFunction, EGraph, Id, Language, RecExpr};
use std::collections::HashMap;

pub use crate::lang::knossos::ASSUMED_VECTOR_SIZE;
/// RLO's `build_malloc_cost`.
pub const BUILD_MALLOC_COST: f64 = 2.0;
/// RLO's `apply_cost` (overhead of a call).
pub const APPLY_COST: f64 = 2.0;
/// RLO's `default_edef_cost`.
pub const DEFAULT_EDEF_COST: f64 = 7.0;
/// RLO's `let_cost`.
pub const LET_COST: f64 = 0.1;
/// RLO's `if_epsilon`.
pub const IF_EPSILON: f64 = 0.0001;

/// The cost of one operator application besides its operands, for operators whose cost
/// is that plus the sum of their operands' costs (each declares it: [`OpDecl::rlo_cost`]);
/// `None` for operators priced otherwise or not priced at all.
///
/// [`OpDecl::rlo_cost`]: crate::lang::OpDecl::rlo_cost
///
/// ```
/// assert_eq!(_core::ks_cost::op_cost("exp"), Some(4.0));
/// assert_eq!(_core::ks_cost::op_cost("sum"), Some(15.0));
/// assert_eq!(_core::ks_cost::op_cost("tanh"), None);
/// ```
pub fn op_cost(name: &str) -> Option<f64> {
    crate::lang::decl(name).and_then(|d| d.rlo_cost)
}

/// RLO's cost function over the e-graph (types from the analysis).
pub struct RloCost<'a> {
    egraph: &'a EGraph<Mdl, TensorAnalysis>,
    /// Cost of calling each function (besides `apply_cost` and the arguments).
    pub functions: &'a HashMap<String, f64>,
    /// Count an operand e-class repeated among one e-node's operands once plus a `let`
    /// where that is cheaper (extraction's cost; a written term's cost counts copies).
    share: bool,
}

impl<'a> RloCost<'a> {
    /// A cost function reading types from `egraph` and callee costs from `functions`.
    pub fn new(
        egraph: &'a EGraph<Mdl, TensorAnalysis>,
        functions: &'a HashMap<String, f64>,
    ) -> Self {
        RloCost {
            egraph,
            functions,
            share: false,
        }
    }
}

/// Operators whose repeated operands extraction may bind once: strict, with no binder,
/// so an operand bound just outside the e-node is evaluated in the same scope.
fn shareable(name: &str) -> bool {
    name == "tuple" || name == "call" || (op_cost(name).is_some() && name != "assert")
}

/// The operands of a shareable e-node that can repeat (a call's name and type excluded).
fn operands<'e>(name: &str, ch: &'e [Id]) -> &'e [Id] {
    if name == "call" {
        &ch[2..]
    } else {
        ch
    }
}

/// Whether binding an operand of cost `c` that occurs `k` times once is cheaper.
fn worth_binding(k: usize, c: f64) -> bool {
    k > 1 && (k as f64 - 1.0) * c > LET_COST
}

/// The operands' cost: a repeated one counted once plus a `let` when worth it.
fn shared_sum<C: FnMut(Id) -> f64>(ids: &[Id], costs: &mut C) -> f64 {
    let mut seen: Vec<(Id, usize)> = vec![];
    for id in ids {
        match seen.iter_mut().find(|(i, _)| i == id) {
            Some((_, k)) => *k += 1,
            None => seen.push((*id, 1)),
        }
    }
    seen.into_iter()
        .map(|(id, k)| {
            let c = costs(id);
            if worth_binding(k, c) {
                c + LET_COST
            } else {
                k as f64 * c
            }
        })
        .sum()
}

fn body_elements(d: &Data) -> f64 {
    match KsType::of(d) {
        Ok(KsType::Lam(_, body)) => body.num_elements(ASSUMED_VECTOR_SIZE),
        _ => 1.0,
    }
}

/// How many times a loop whose function has analysis data `d` runs its body:
/// `assumed_vector_size` per index dimension.
fn trips(d: &Data) -> f64 {
    let rank = match KsType::of(d) {
        Ok(KsType::Lam(idx, _)) => idx.rank_of_index().unwrap_or(1),
        _ => 1,
    };
    ASSUMED_VECTOR_SIZE.powi(rank as i32)
}

impl CostFunction<Mdl> for RloCost<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, enode: &Mdl, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        let Mdl::Op(op, ch) = enode else {
            return 0.0;
        };
        let share = self.share;
        let sum_of = |ids: &[Id], costs: &mut C| {
            if share {
                shared_sum(ids, costs)
            } else {
                ids.iter().map(|c| costs(*c)).sum::<f64>()
            }
        };
        match op.name() {
            "let" => LET_COST + costs(ch[1]) + costs(ch[2]),
            "lam" => costs(ch[2]),
            "build" => {
                let n = trips(&self.egraph[ch[1]].data);
                BUILD_MALLOC_COST + costs(ch[0]) + n * costs(ch[1])
            }
            "sumbuild" => {
                let data = &self.egraph[ch[1]].data;
                let (elements, n) = (body_elements(data), trips(data));
                (n - 1.0) * elements + costs(ch[0]) + n * costs(ch[1])
            }
            "tuple" => LET_COST * ch.len() as f64 + sum_of(ch, &mut costs),
            "if" => {
                let (a, b) = (costs(ch[1]), costs(ch[2]));
                1.0 + costs(ch[0]) + a.max(b) + IF_EPSILON * a.min(b)
            }
            "call" | "ks_opaque" => {
                let name = match &self.egraph[ch[0]].nodes[0] {
                    Mdl::Var(s) => s.to_string(),
                    _ => String::new(),
                };
                let callee = self
                    .functions
                    .get(&name)
                    .copied()
                    .unwrap_or(DEFAULT_EDEF_COST);
                if op.name() == "call" {
                    APPLY_COST + callee + sum_of(&ch[2..], &mut costs)
                } else {
                    callee + ch[2..].iter().map(|c| costs(*c)).sum::<f64>()
                }
            }
            "assert" => 1.0 + ch.iter().map(|c| costs(*c)).sum::<f64>(),
            name => match op_cost(name) {
                Some(c) => c + sum_of(ch, &mut costs),
                // Not priced by RLO: never chosen when an alternative exists.
                None => f64::INFINITY,
            },
        }
    }
}

/// The cheapest term of `root` under RLO's cost model, and its cost; a repeated operand
/// is bound once by a `let` where that is cheaper (see the module docs).
///
/// ```
/// use std::collections::HashMap;
/// let mut eg: egg::EGraph<_core::lang::Mdl, _core::analysis::TensorAnalysis> = Default::default();
/// let d = "(div (var x Float) (var y Float))";
/// let root = eg.add_expr(&format!("(mul {d} {d})").parse().unwrap());
/// eg.rebuild();
/// let (cost, term) = _core::ks_cost::extract(&eg, root, &HashMap::new());
/// assert!((cost - 4.1).abs() < 1e-9);
/// assert_eq!(
///     term.to_string(),
///     "(let cse$0 (div (var x Float) (var y Float)) (mul (var cse$0 Float) (var cse$0 Float)))"
/// );
/// assert!((_core::ks_cost::cost_of(&term, &HashMap::new()) - cost).abs() < 1e-9);
/// ```
pub fn extract(
    egraph: &EGraph<Mdl, TensorAnalysis>,
    root: Id,
    functions: &HashMap<String, f64>,
) -> (f64, RecExpr<Mdl>) {
    let mut cf = RloCost::new(egraph, functions);
    cf.share = true;
    let ex = egg::Extractor::new(egraph, cf);
    let cost = ex.find_best_cost(root);
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    for class in egraph.classes() {
        for n in &class.nodes {
            if let Mdl::Var(s) = n {
                taken.insert(s.to_string());
            }
        }
    }
    let mut namer = Namer { taken, next: 0 };
    let text = term_text(&ex, egraph, root, &mut namer);
    let term = text
        .parse()
        .unwrap_or_else(|e| panic!("extracted term `{text}` does not parse: {e:?}"));
    (cost, term)
}

/// RLO's cost of one e-node by itself (its operands priced 0): what [`extract_shared`]
/// counts once per chosen e-node. Finite: an operator RLO does not price costs `1e9`.
fn own_cost(cf: &mut RloCost<'_>, node: &Mdl) -> f64 {
    let c = cf.cost(node, |_| 0.0);
    if c.is_finite() {
        c
    } else {
        1e9
    }
}

/// A term of `root` chosen for shared sub-terms (not RLO's; a companion of [`extract`]):
/// DAG-cost greedy extraction ([`crate::extract::greedy_dag`], each chosen e-node counted
/// once, priced by `own_cost`), printed as a tree. A sub-term shared by distant parts of
/// the term, such as `(add 0.79788 v0)` inside a `tanh` argument and in the derivative
/// beside it, counts once here where [`extract`]'s tree cost counts it per occurrence; the
/// caller binds the repeated sub-terms with `let`s (RLO's `new_bind` + `cse_bind`) and
/// prices the result with RLO's tree cost. `None` when the choice has no acyclic term.
///
/// ```
/// use std::collections::HashMap;
/// let mut eg: egg::EGraph<_core::lang::Mdl, _core::analysis::TensorAnalysis> = Default::default();
/// let e = "(add (exp (var x Float)) (mul (var y Float) (exp (var x Float))))";
/// let root = eg.add_expr(&e.parse().unwrap());
/// eg.rebuild();
/// let term = _core::ks_cost::extract_shared(&eg, root, &HashMap::new()).unwrap();
/// assert_eq!(term.to_string(), e);
/// ```
pub fn extract_shared(
    egraph: &EGraph<Mdl, TensorAnalysis>,
    root: Id,
    functions: &HashMap<String, f64>,
) -> Option<RecExpr<Mdl>> {
    let mut cf = RloCost::new(egraph, functions);
    let ids: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    let index: HashMap<Id, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut nodes: Vec<&Mdl> = vec![];
    let mut node_eclass = vec![];
    let mut node_children = vec![];
    let mut node_cost = vec![];
    for (i, class) in egraph.classes().enumerate() {
        for n in &class.nodes {
            nodes.push(n);
            node_eclass.push(i);
            node_children.push(
                n.children()
                    .iter()
                    .map(|c| index[&egraph.find(*c)])
                    .collect::<Vec<_>>(),
            );
            node_cost.push(own_cost(&mut cf, n));
        }
    }
    let forbidden = vec![false; nodes.len()];
    let roots = [index[&egraph.find(root)]];
    let problem = crate::extract::Problem {
        node_eclass: &node_eclass,
        node_children: &node_children,
        node_cost: &node_cost,
        num_classes: ids.len(),
        roots: &roots,
        forbidden: &forbidden,
    };
    let choice = crate::extract::greedy_dag(&problem);
    // The chosen e-nodes as one RecExpr (shared sub-terms added once; printing expands
    // them), children first; a class met again on its own path is a cycle.
    let mut expr = RecExpr::default();
    let mut built: Vec<Option<Id>> = vec![None; ids.len()];
    let mut on_path = vec![false; ids.len()];
    fn build(
        c: usize,
        choice: &[Option<usize>],
        nodes: &[&Mdl],
        node_children: &[Vec<usize>],
        built: &mut [Option<Id>],
        on_path: &mut [bool],
        expr: &mut RecExpr<Mdl>,
    ) -> Option<Id> {
        if let Some(id) = built[c] {
            return Some(id);
        }
        if on_path[c] {
            return None;
        }
        on_path[c] = true;
        let k = choice[c]?;
        let mut kids = vec![];
        for &d in &node_children[k] {
            kids.push(build(
                d,
                choice,
                nodes,
                node_children,
                built,
                on_path,
                expr,
            )?);
        }
        let mut i = 0;
        let node = nodes[k].clone().map_children(|_| {
            let id = kids[i];
            i += 1;
            id
        });
        let id = expr.add(node);
        on_path[c] = false;
        built[c] = Some(id);
        Some(id)
    }
    build(
        roots[0],
        &choice,
        &nodes,
        &node_children,
        &mut built,
        &mut on_path,
        &mut expr,
    )?;
    Some(expr)
}

/// Fresh `cse$N` names, none of them a symbol of the e-graph.
struct Namer {
    taken: std::collections::HashSet<String>,
    next: usize,
}

impl Namer {
    fn fresh(&mut self) -> String {
        loop {
            let name = format!("cse${}", self.next);
            self.next += 1;
            if !self.taken.contains(&name) {
                return name;
            }
        }
    }
}

/// The extracted term of `class` as text, repeated operands bound as [`shared_sum`]
/// counted them.
fn term_text(
    ex: &egg::Extractor<RloCost<'_>, Mdl, TensorAnalysis>,
    egraph: &EGraph<Mdl, TensorAnalysis>,
    class: Id,
    namer: &mut Namer,
) -> String {
    let node = ex.find_best_node(class);
    let Mdl::Op(op, ch) = node else {
        return node.to_string();
    };
    let name = op.name();
    let mut bound: Vec<(Id, String)> = vec![];
    let mut lets: Vec<(String, String)> = vec![];
    if shareable(name) {
        let ops = operands(name, ch);
        let mut seen: Vec<Id> = vec![];
        for id in ops {
            let id = egraph.find(*id);
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let k = ops.iter().filter(|o| egraph.find(**o) == id).count();
            if !worth_binding(k, ex.find_best_cost(id)) {
                continue;
            }
            let Ok(ty) = KsType::of(&egraph[id].data) else {
                continue;
            };
            let v = namer.fresh();
            lets.push((v.clone(), term_text(ex, egraph, id, namer)));
            bound.push((id, format!("(var {v} {ty})")));
        }
    }
    let args: Vec<String> = ch
        .iter()
        .map(|c| {
            let c = egraph.find(*c);
            match bound.iter().find(|(b, _)| *b == c) {
                Some((_, var)) => var.clone(),
                None => term_text(ex, egraph, c, namer),
            }
        })
        .collect();
    let mut text = if args.is_empty() {
        node.to_string()
    } else {
        format!("({} {})", node, args.join(" "))
    };
    for (v, value) in lets.into_iter().rev() {
        text = format!("(let {v} {value} {text})");
    }
    text
}

/// RLO's cost of one term (its tree cost).
pub fn cost_of(expr: &RecExpr<Mdl>, functions: &HashMap<String, f64>) -> f64 {
    let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
    let root = eg.add_expr(expr);
    eg.rebuild();
    // A plain term: its e-graph holds only its own nodes, so the best term is the term.
    let ex = egg::Extractor::new(&eg, RloCost::new(&eg, functions));
    ex.find_best_cost(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(s: &str) -> f64 {
        cost_of(&s.parse().unwrap(), &HashMap::new())
    }

    #[test]
    fn arithmetic_costs_are_rlo_constants() {
        assert_eq!(cost("(add (var x Float) (var y Float))"), 1.0);
        assert_eq!(cost("(mul (var x Float) (scalar 2.0 float64))"), 2.0);
        assert_eq!(cost("(exp (div (var x Float) (var x Float)))"), 6.0);
    }

    #[test]
    fn let_costs_a_tenth_and_build_multiplies_its_body() {
        let c = cost("(let a (div (var x Float) (var y Float)) (add (var a Float) (var a Float)))");
        assert!((c - 3.1).abs() < 1e-9, "{c}");
        let b = cost("(build (size (var v Vec<Float>)) (lam i Integer (index (var i Integer) (var v Vec<Float>))))");
        assert_eq!(b, 2.0 + 1.0 + 16.0);
    }

    #[test]
    fn calls_cost_apply_plus_callee() {
        let mut f = HashMap::new();
        f.insert("abs".to_string(), 2.0);
        let e = "(call abs Float (var x Float))".parse().unwrap();
        assert_eq!(cost_of(&e, &f), 4.0);
        assert_eq!(cost("(call g Float (var x Float))"), 9.0);
        f.insert("o$1".to_string(), 3.0);
        let o = "(ks_opaque o$1 Tensor2<Float> (var m Tensor2<Float>) (exp (var x Float)))";
        assert_eq!(cost_of(&o.parse().unwrap(), &f), 7.0);
    }

    #[test]
    fn shared_extraction_counts_a_repeated_sub_term_once() {
        // `(add (exp xy) (log xy))` costs 13 as a tree (xy twice) but 11 with xy shared;
        // the chain of six products costs 12 either way.
        let xy = "(mul (var x Float) (var y Float))";
        let shared = format!("(add (exp {xy}) (log {xy}))");
        let mut chain = "(var x Float)".to_string();
        for _ in 0..5 {
            chain = format!("(mul {chain} (var x Float))");
        }
        let chain = format!("(mul {chain} (var y Float))");
        let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
        let a = eg.add_expr(&shared.parse().unwrap());
        let b = eg.add_expr(&chain.parse().unwrap());
        eg.union(a, b);
        eg.rebuild();
        let (c, tree) = extract(&eg, a, &HashMap::new());
        assert_eq!((c, tree.to_string()), (12.0, chain));
        let term = extract_shared(&eg, a, &HashMap::new()).unwrap();
        assert_eq!(term.to_string(), shared);
    }

    #[test]
    fn a_loop_over_a_matrix_runs_its_body_256_times() {
        let b = "(build (tuple (scalar 2.0 int64) (scalar 3.0 int64)) (lam ij Tuple<Integer,Integer> (scalar 1.0 float64)))";
        assert_eq!(cost(b), 2.0 + 0.2);
        let s = "(build (tuple (scalar 2.0 int64) (scalar 3.0 int64)) (lam ij Tuple<Integer,Integer> (exp (scalar 1.0 float64))))";
        assert_eq!(cost(s), 2.0 + 0.2 + 256.0 * 4.0);
    }
}
