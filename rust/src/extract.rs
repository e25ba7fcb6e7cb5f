//! Greedy extraction over a flat e-graph: tree cost ([`greedy_tree`]), DAG cost
//! ([`greedy_dag`]) and a beam over DAG costs ([`beam_dag`]), plus the DAG cost of a choice
//! ([`dag_cost`]).
//!
//! The e-graph is handed over as flat arrays (a [`Problem`]): e-classes are `0..num_classes`,
//! e-nodes are `0..n`, node `i` lives in class `node_eclass[i]`, its children are *class*
//! indices `node_children[i]` and it costs `node_cost[i]` (seconds, or any non-negative unit).
//! Nodes flagged in `forbidden` (Tensat's cycle filter list) are never chosen.
//!
//! A *choice* gives, per class, the node picked for it (`None` when the class is not needed or
//! cannot be built). Both greedy extractors return choices that are acyclic from the roots and
//! are `Some` exactly for the classes reachable from the roots through chosen nodes. The ILP
//! extractor lives in Python (`tensat_py.extract.ilp`) and uses [`greedy_dag`] as warm start.
//!
//! ```
//! use _core::extract::{dag_cost, greedy_dag, greedy_tree, Problem};
//! // class 0: leaf x (cost 1); class 1: f(x) (cost 2); class 2 (root): g(f x, f x) (cost 1)
//! // or a costly leaf (cost 10).
//! let node_eclass = [0, 1, 2, 2];
//! let node_children = vec![vec![], vec![0], vec![1, 1], vec![]];
//! let node_cost = [1.0, 2.0, 1.0, 10.0];
//! let p = Problem {
//!     node_eclass: &node_eclass, node_children: &node_children, node_cost: &node_cost,
//!     num_classes: 3, roots: &[2], forbidden: &[false; 4],
//! };
//! let tree = greedy_tree(&p);
//! assert_eq!(tree, vec![Some(0), Some(1), Some(2)]);
//! assert_eq!(dag_cost(&p, &tree), 4.0); // shared f(x) counted once
//! assert_eq!(greedy_dag(&p), tree);
//! ```

use std::collections::VecDeque;

/// A flat extraction problem: classes `0..num_classes`, nodes `0..node_eclass.len()`.
///
/// All slices indexed by node have the same length. Costs must be finite and, for the greedy
/// functions, non-negative (check with [`validate`]; [`dag_cost`] takes any finite cost,
/// [`validate_signed`]); the greedy functions panic on out-of-range indices.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    /// Class of each node.
    pub node_eclass: &'a [usize],
    /// Child *classes* of each node, in operand order (repeats allowed).
    pub node_children: &'a [Vec<usize>],
    /// Cost of each node (finite; non-negative for the greedy functions).
    pub node_cost: &'a [f64],
    /// Number of classes; class ids are dense `0..num_classes`.
    pub num_classes: usize,
    /// Root classes; all of them must be built.
    pub roots: &'a [usize],
    /// Nodes that may never be chosen (the cycle filter list), one flag per node.
    pub forbidden: &'a [bool],
}

/// Checks that a [`Problem`] is well formed: equal lengths, indices in range, costs finite
/// and non-negative (what the greedy extractors and the graph passes assume).
///
/// # Errors
/// A message naming the first offending node or root.
///
/// ```
/// use _core::extract::{validate, Problem};
/// let p = Problem { node_eclass: &[0], node_children: &[vec![3]], node_cost: &[1.0],
///                   num_classes: 1, roots: &[0], forbidden: &[false] };
/// assert!(validate(&p).unwrap_err().contains("node 0"));
/// ```
pub fn validate(p: &Problem) -> Result<(), String> {
    validate_signed(p)?;
    match p.node_cost.iter().position(|&c| c < 0.0) {
        Some(i) => Err(format!(
            "node {i}: cost {} is negative (the greedy extractors need non-negative costs)",
            p.node_cost[i]
        )),
        None => Ok(()),
    }
}

/// [`validate`] without the sign test: costs finite, of any sign (what [`dag_cost`] needs,
/// for extraction-gym's e-graphs with negative costs).
///
/// # Errors
/// A message naming the first offending node or root.
///
/// ```
/// use _core::extract::{validate, validate_signed, Problem};
/// let p = Problem { node_eclass: &[0], node_children: &[vec![]], node_cost: &[-2.0],
///                   num_classes: 1, roots: &[0], forbidden: &[false] };
/// assert!(validate_signed(&p).is_ok() && validate(&p).is_err());
/// ```
pub fn validate_signed(p: &Problem) -> Result<(), String> {
    let n = p.node_eclass.len();
    if p.node_children.len() != n || p.node_cost.len() != n || p.forbidden.len() != n {
        return Err(format!(
            "length mismatch: {} node_eclass, {} node_children, {} node_cost, {} forbidden",
            n,
            p.node_children.len(),
            p.node_cost.len(),
            p.forbidden.len()
        ));
    }
    for i in 0..n {
        if p.node_eclass[i] >= p.num_classes {
            return Err(format!(
                "node {i}: class {} out of range (num_classes {})",
                p.node_eclass[i], p.num_classes
            ));
        }
        if let Some(c) = p.node_children[i].iter().find(|&&c| c >= p.num_classes) {
            return Err(format!(
                "node {i}: child class {c} out of range (num_classes {})",
                p.num_classes
            ));
        }
        let cost = p.node_cost[i];
        if !cost.is_finite() {
            return Err(format!("node {i}: cost {cost} is not a finite number"));
        }
    }
    if let Some(r) = p.roots.iter().find(|&&r| r >= p.num_classes) {
        return Err(format!(
            "root class {r} out of range (num_classes {})",
            p.num_classes
        ));
    }
    Ok(())
}

/// Puts each of `nodes` (the parents of a class that just improved) at the back of the work
/// list, unless it is queued already.
fn requeue(nodes: &[usize], queued: &mut [bool], work: &mut VecDeque<usize>) {
    for &j in nodes {
        if !queued[j] {
            queued[j] = true;
            work.push_back(j);
        }
    }
}

/// For each class, the nodes that have it as a child (each node listed once per class).
fn parents(p: &Problem) -> Vec<Vec<usize>> {
    let mut par = vec![Vec::new(); p.num_classes];
    for (i, ch) in p.node_children.iter().enumerate() {
        for &c in ch {
            if par[c].last() != Some(&i) {
                par[c].push(i);
            }
        }
    }
    par
}

/// Keeps only the choices of classes reachable from the roots through chosen nodes.
fn restrict_to_roots(p: &Problem, choice: &[Option<usize>]) -> Vec<Option<usize>> {
    let mut out = vec![None; p.num_classes];
    let mut stack: Vec<usize> = p.roots.to_vec();
    let mut seen = vec![false; p.num_classes];
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut seen[c], true) {
            continue;
        }
        if let Some(n) = choice[c] {
            out[c] = Some(n);
            stack.extend(p.node_children[n].iter().copied());
        }
    }
    out
}

/// Whether the chosen sub-graph reachable from the roots is acyclic and complete (every
/// reached class has a choice whose node belongs to it and is not forbidden).
///
/// ```
/// use _core::extract::{is_valid_choice, Problem};
/// let p = Problem { node_eclass: &[0, 0], node_children: &[vec![0], vec![]],
///                   node_cost: &[1.0, 5.0], num_classes: 1, roots: &[0], forbidden: &[false; 2] };
/// assert!(!is_valid_choice(&p, &[Some(0)])); // node 0 uses its own class
/// assert!(is_valid_choice(&p, &[Some(1)]));
/// ```
pub fn is_valid_choice(p: &Problem, choice: &[Option<usize>]) -> bool {
    // Iterative DFS with colours: 0 new, 1 on stack, 2 done.
    let mut colour = vec![0u8; p.num_classes];
    for &r in p.roots {
        if colour[r] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(r, 0)];
        colour[r] = 1;
        while let Some(&mut (c, ref mut k)) = stack.last_mut() {
            let Some(n) = choice[c] else { return false };
            if n >= p.node_eclass.len() || p.node_eclass[n] != c || p.forbidden[n] {
                return false;
            }
            if let Some(&d) = p.node_children[n].get(*k) {
                *k += 1;
                match colour[d] {
                    0 => {
                        colour[d] = 1;
                        stack.push((d, 0));
                    }
                    1 => return false,
                    _ => {}
                }
            } else {
                colour[c] = 2;
                stack.pop();
            }
        }
    }
    true
}

/// DAG cost of a choice: the sum of the costs of the distinct chosen nodes reachable from
/// the roots (a shared sub-term is paid once). Infinite when a reached class has no choice.
///
/// ```
/// use _core::extract::{dag_cost, Problem};
/// let p = Problem { node_eclass: &[0, 1], node_children: &[vec![], vec![0, 0]],
///                   node_cost: &[2.0, 3.0], num_classes: 2, roots: &[1], forbidden: &[false; 2] };
/// assert_eq!(dag_cost(&p, &[Some(0), Some(1)]), 5.0);
/// assert!(dag_cost(&p, &[None, Some(1)]).is_infinite());
/// ```
pub fn dag_cost(p: &Problem, choice: &[Option<usize>]) -> f64 {
    let mut seen = vec![false; p.num_classes];
    let mut stack: Vec<usize> = p.roots.to_vec();
    let mut total = 0.0;
    while let Some(c) = stack.pop() {
        if std::mem::replace(&mut seen[c], true) {
            continue;
        }
        match choice.get(c).copied().flatten() {
            Some(n) => {
                total += p.node_cost[n];
                stack.extend(p.node_children[n].iter().copied());
            }
            None => return f64::INFINITY,
        }
    }
    total
}

/// Greedy tree extraction (egg's `Extractor` idea): the cost of a class is the least, over
/// its allowed nodes, of the node's cost plus the costs of its child classes (a shared
/// sub-term is counted once per use). Computed as a bottom-up fixpoint with a work list.
///
/// Forbidden nodes are never chosen. A node can only win once all its child classes have a
/// finite cost, and a class switches node only on a strict improvement; with non-negative
/// costs this never closes a cycle. Returns, per class, the chosen node; `Some` exactly for
/// the classes reachable from the roots (`None` for all of them when a root cannot be built).
///
/// ```
/// use _core::extract::{greedy_tree, Problem};
/// // class 0 = {a, f(class 0)}: the self loop f can never win.
/// let p = Problem { node_eclass: &[0, 0], node_children: &[vec![], vec![0]],
///                   node_cost: &[3.0, 0.0], num_classes: 1, roots: &[0], forbidden: &[false; 2] };
/// assert_eq!(greedy_tree(&p), vec![Some(0)]);
/// ```
pub fn greedy_tree(p: &Problem) -> Vec<Option<usize>> {
    let n = p.node_eclass.len();
    let par = parents(p);
    let mut cost = vec![f64::INFINITY; p.num_classes];
    let mut best: Vec<Option<usize>> = vec![None; p.num_classes];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    while let Some(i) = work.pop_front() {
        queued[i] = false;
        if p.forbidden[i] {
            continue;
        }
        let mut c = p.node_cost[i];
        for &d in &p.node_children[i] {
            c += cost[d];
        }
        let class = p.node_eclass[i];
        if c < cost[class] {
            cost[class] = c;
            best[class] = Some(i);
            requeue(&par[class], &mut queued, &mut work);
        }
    }
    finish(p, best)
}

/// Turns a per-class best node into the returned choice: `None` everywhere when a root is
/// missing, otherwise the choices reachable from the roots.
fn finish(p: &Problem, best: Vec<Option<usize>>) -> Vec<Option<usize>> {
    if p.roots.iter().any(|&r| best[r].is_none()) {
        return vec![None; p.num_classes];
    }
    restrict_to_roots(p, &best)
}

/// The sub-DAG a class would use: sorted `(class, node)` pairs and their summed cost.
#[derive(Clone)]
struct CostSet {
    items: Vec<(usize, usize)>,
    total: f64,
}

/// Greedy DAG extraction (extraction-gym's `greedy-dag` idea): each class keeps the set of
/// classes (with their nodes) that its best sub-DAG uses, and its cost is the sum of the node
/// costs in that set, so shared sub-terms are paid once. A node's set is the union of its
/// child classes' sets plus itself; a node whose union already holds its own class would close
/// a cycle and is skipped. Iterated with a work list until no class improves.
///
/// The sets are an estimate (two children may pick different nodes for the same class); the
/// returned choice is checked: if it is cyclic, or its true [`dag_cost`] exceeds that of
/// [`greedy_tree`], the tree choice is returned instead. So the result is always acyclic and
/// never costlier (as a DAG) than the tree extraction.
///
/// An evaluation takes time linear in the sizes of the child sets: a set is a sorted list of
/// node ranks (nodes numbered in `(class, node)` order), the distinct children's sets are
/// merged in one pass, and for one or two children the merge's difference to the first
/// child's set bounds the new cost tightly enough to skip, without adding it up, most nodes
/// that cannot win. Otherwise the cost is added up in the set's order, so that ties and
/// rounding come out exactly as when sorting the concatenated child sets.
///
/// ```
/// use _core::extract::{dag_cost, greedy_dag, greedy_tree, Problem};
/// // x (class 0, cost 3); a(x) in class 1 and b(x) in class 2 (cost 1 each); root class 3 =
/// // {r(1, 2) cost 0 | s cost 7}. Per tree cost s wins (7 < 4 + 4), but as a DAG x is paid
/// // once: x + a + b + r = 5 < 7.
/// let node_eclass = [0, 1, 2, 3, 3];
/// let node_children = vec![vec![], vec![0], vec![0], vec![1, 2], vec![]];
/// let node_cost = [3.0, 1.0, 1.0, 0.0, 7.0];
/// let p = Problem { node_eclass: &node_eclass, node_children: &node_children,
///     node_cost: &node_cost, num_classes: 4, roots: &[3], forbidden: &[false; 5] };
/// assert_eq!(dag_cost(&p, &greedy_tree(&p)), 7.0);
/// let dag = greedy_dag(&p);
/// assert_eq!(dag, vec![Some(0), Some(1), Some(2), Some(3)]);
/// assert_eq!(dag_cost(&p, &dag), 5.0);
/// ```
pub fn greedy_dag(p: &Problem) -> Vec<Option<usize>> {
    let n = p.node_eclass.len();
    if u32::try_from(n).is_err() || u32::try_from(p.num_classes).is_err() {
        return greedy_dag_reference(p);
    }
    let ranks = Ranks::new(p);
    let bounds = Bounds::new(p);
    let par = parents(p);
    // Per class: whether it has a set yet, the set as sorted ranks, and the in-order sum of
    // its costs.
    let mut has = vec![false; p.num_classes];
    let mut sets: Vec<Vec<u32>> = vec![Vec::new(); p.num_classes];
    let mut totals = vec![f64::INFINITY; p.num_classes];
    let mut best: Vec<Option<usize>> = vec![None; p.num_classes];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    let mut kids: Vec<usize> = Vec::new();
    let (mut out, mut acc, mut tmp) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(i) = work.pop_front() {
        queued[i] = false;
        if p.forbidden[i] {
            continue;
        }
        let class = p.node_eclass[i];
        let ch = &p.node_children[i];
        if ch.iter().any(|&d| !has[d] || d == class) {
            continue;
        }
        // The union keeps the smallest node of each class, whatever the order of the child
        // sets and their repeats: merge the distinct children's sets two at a time. With one
        // or two children, try to rule out that the node wins before adding up its cost.
        kids.clear();
        kids.extend_from_slice(ch);
        kids.sort_unstable();
        kids.dedup();
        let has_set = has[class];
        let not_below = |base: f64, (gain, loss): (f64, f64)| {
            has_set && bounds.not_below(base + gain + p.node_cost[i], loss, totals[class])
        };
        out.clear();
        match kids[..] {
            [] => {}
            [d] => {
                if not_below(totals[d], (0.0, 0.0)) {
                    continue;
                }
                out.extend_from_slice(&sets[d]);
            }
            [d, e] => {
                let change = ranks.union(&sets[d], &sets[e], &mut out);
                if not_below(totals[d], change) {
                    continue;
                }
            }
            [d, e, ref rest @ ..] => {
                acc.clear();
                ranks.union(&sets[d], &sets[e], &mut acc);
                for &f in rest {
                    tmp.clear();
                    ranks.union(&acc, &sets[f], &mut tmp);
                    std::mem::swap(&mut acc, &mut tmp);
                }
                std::mem::swap(&mut acc, &mut out);
            }
        }
        if !ranks.insert(&mut out, i) {
            continue; // own class below itself: a cycle
        }
        let total = ranks.sum(&out);
        if !has_set || total < totals[class] {
            // Swap the buffers: the old set's allocation becomes the next scratch buffer.
            std::mem::swap(&mut sets[class], &mut out);
            has[class] = true;
            totals[class] = total;
            best[class] = Some(i);
            requeue(&par[class], &mut queued, &mut work);
        }
    }
    check_dag(p, best)
}

/// The final step of greedy DAG: the choice from the per-class best nodes, unless it is
/// cyclic or costlier as a DAG than [`greedy_tree`], in which case the tree choice.
fn check_dag(p: &Problem, best: Vec<Option<usize>>) -> Vec<Option<usize>> {
    let dag = finish(p, best);
    let tree = greedy_tree(p);
    if !is_valid_choice(p, &dag) || dag_cost(p, &dag) > dag_cost(p, &tree) {
        return tree;
    }
    dag
}

/// Nodes numbered in `(class, node)` order (their *rank*): a sub-DAG set of `(class, node)`
/// pairs is then a sorted list of `u32` ranks, in the same order, and the ranks of one class
/// are contiguous, in node order.
struct Ranks {
    /// Class of each rank.
    class: Vec<u32>,
    /// Cost of each rank.
    cost: Vec<f64>,
    /// First rank of each class, then `n`.
    start: Vec<u32>,
    /// Rank of each node.
    rank: Vec<u32>,
}

impl Ranks {
    /// Needs fewer than `2^32` nodes and classes.
    fn new(p: &Problem) -> Self {
        let n = p.node_eclass.len();
        let mut start = vec![0u32; p.num_classes + 1];
        for &c in p.node_eclass {
            start[c + 1] += 1;
        }
        for c in 0..p.num_classes {
            start[c + 1] += start[c];
        }
        let mut next = start.clone();
        let (mut class, mut cost, mut rank) = (vec![0; n], vec![0.0; n], vec![0; n]);
        for (i, &c) in p.node_eclass.iter().enumerate() {
            let r = next[c];
            next[c] += 1;
            rank[i] = r;
            class[r as usize] = c as u32;
            cost[r as usize] = p.node_cost[i];
        }
        Ranks {
            class,
            cost,
            start,
            rank,
        }
    }

    /// Appends the union of two sorted rank sets, keyed by class, to `out`. For a class in
    /// both sets the smaller rank (the smaller node) wins, as sorting the concatenated
    /// `(class, node)` pairs and keeping the first pair per class would.
    ///
    /// Returns how the union's cost differs from `a`'s, as two sums of costs: `gain` over the
    /// entries taken from `b` (its classes that `a` lacks, and its smaller nodes) and `loss`
    /// over the entries of `a` that lost to a smaller node of `b`.
    fn union(&self, a: &[u32], b: &[u32], out: &mut Vec<u32>) -> (f64, f64) {
        out.reserve(a.len() + b.len() + 1);
        let (mut x, mut y) = (0, 0);
        let (mut gain, mut loss) = (0.0, 0.0);
        while x < a.len() && y < b.len() {
            let (ra, rb) = (a[x], b[y]);
            if ra == rb {
                // A run of shared entries, the common case: compare it four at a time.
                let from = x;
                x += 1;
                y += 1;
                while x + 4 <= a.len() && y + 4 <= b.len() && a[x..x + 4] == b[y..y + 4] {
                    x += 4;
                    y += 4;
                }
                while x < a.len() && y < b.len() && a[x] == b[y] {
                    x += 1;
                    y += 1;
                }
                out.extend_from_slice(&a[from..x]);
            } else if self.class[ra as usize] == self.class[rb as usize] {
                if rb < ra {
                    gain += self.cost[rb as usize];
                    loss += self.cost[ra as usize];
                }
                out.push(ra.min(rb));
                x += 1;
                y += 1;
            } else if ra < rb {
                out.push(ra);
                x += 1;
            } else {
                gain += self.cost[rb as usize];
                out.push(rb);
                y += 1;
            }
        }
        out.extend_from_slice(&a[x..]);
        out.extend_from_slice(&b[y..]);
        for &r in &b[y..] {
            gain += self.cost[r as usize];
        }
        (gain, loss)
    }

    /// Inserts `node` into the sorted set `set`; `false`, leaving `set` as it was, when the
    /// set already holds the node's class (the node would close a cycle).
    fn insert(&self, set: &mut Vec<u32>, node: usize) -> bool {
        let r = self.rank[node];
        let c = self.class[r as usize] as usize;
        let at = set.partition_point(|&x| x < self.start[c]);
        if set.get(at).is_some_and(|&x| x < self.start[c + 1]) {
            return false;
        }
        set.insert(at, r);
        true
    }

    /// The cost of a set added up in rank order, with the order and start value of
    /// `Iterator::sum` over the `(class, node)`-sorted set. Out of line so that its chain of
    /// dependent additions stays in a register.
    #[inline(never)]
    fn sum(&self, set: &[u32]) -> f64 {
        set.iter().fold(-0.0, |s, &r| s + self.cost[r as usize])
    }
}

/// A cheap test that a candidate set's cost, added up in order (its *in-order sum*), is not
/// below the current best of its class, so that the candidate cannot win.
///
/// For `m` non-negative terms, a floating-point sum in any order is within a relative
/// `γ(m) = m·u / (1 - m·u) ≤ 2·m·u` of the exact sum (`u = 2^-53`; Higham, *Accuracy and
/// Stability of Numerical Algorithms*, §4.2). A set holds at most one node per class, so
/// `g = 2·(num_classes + 4)·u` bounds `γ` for every sum here. With a cost that is negative
/// or not finite (an invalid [`Problem`]) the test is off, and every candidate is summed.
struct Bounds {
    /// `g` as above, or infinite when the test is off.
    g: f64,
}

impl Bounds {
    fn new(p: &Problem) -> Self {
        let valid = p.node_cost.iter().all(|c| c.is_finite() && *c >= 0.0);
        Bounds {
            g: if valid {
                2.0 * (p.num_classes as f64 + 4.0) * (f64::EPSILON / 2.0)
            } else {
                f64::INFINITY
            },
        }
    }

    /// Whether the in-order sum of a set `U` is surely `>= bound` (`false` when unsure),
    /// where `U` is a set `A` with entries added (exact cost `G`) and entries of `A` removed
    /// (exact cost `L`), plus one more node, and `plus = base + gain + own` is computed from
    /// the in-order sum `base` of `A`, the sum `gain` of the added entries (`loss` of the
    /// removed ones) and the cost `own` of the node.
    ///
    /// The exact sum of `U` is `R = R_A + G - L + own >= plus / (1 + g) - loss / (1 - g)`,
    /// and the in-order sum of `U` is at least `R·(1 - g)`, so it is `>= bound` when
    /// `plus·(1 - g)/(1 + g) - loss >= bound`; the test below demands this with margin `4g`
    /// on each side, which also covers the rounding of its own few operations.
    fn not_below(&self, plus: f64, loss: f64, bound: f64) -> bool {
        if self.g > 1e-6 {
            return false;
        }
        let lhs = plus * (1.0 - 4.0 * self.g);
        lhs.is_finite() && lhs >= bound + loss * (1.0 + 4.0 * self.g)
    }
}

/// The unoptimised reference of [`greedy_dag`], kept for tests and the bench (and used by it
/// for `2^32` or more nodes or classes).
#[doc(hidden)]
pub fn greedy_dag_reference(p: &Problem) -> Vec<Option<usize>> {
    let n = p.node_eclass.len();
    let par = parents(p);
    let mut sets: Vec<Option<CostSet>> = vec![None; p.num_classes];
    let mut best: Vec<Option<usize>> = vec![None; p.num_classes];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    while let Some(i) = work.pop_front() {
        queued[i] = false;
        if p.forbidden[i] {
            continue;
        }
        let class = p.node_eclass[i];
        let ch = &p.node_children[i];
        if ch.iter().any(|&d| sets[d].is_none() || d == class) {
            continue;
        }
        // Union of the child sets, keyed by class (first node seen wins), plus this node.
        merged.clear();
        for &d in ch {
            merged.extend_from_slice(&sets[d].as_ref().expect("checked").items);
        }
        merged.sort_unstable();
        merged.dedup_by_key(|e| e.0);
        let pos = match merged.binary_search_by_key(&class, |e| e.0) {
            Ok(_) => continue, // own class below itself: a cycle
            Err(pos) => pos,
        };
        merged.insert(pos, (class, i));
        let total: f64 = merged.iter().map(|&(_, j)| p.node_cost[j]).sum();
        let improves = match &sets[class] {
            None => true,
            Some(s) => total < s.total,
        };
        if improves {
            sets[class] = Some(CostSet {
                items: merged.clone(),
                total,
            });
            best[class] = Some(i);
            requeue(&par[class], &mut queued, &mut work);
        }
    }
    check_dag(p, best)
}

/// Union of two sorted `(class, node)` sets, keyed by class (`a`'s node wins a conflict), with
/// the summed cost of the nodes in the union.
fn merge_sets(p: &Problem, a: &CostSet, b: &CostSet) -> CostSet {
    let mut items = Vec::with_capacity(a.items.len() + b.items.len());
    let (mut x, mut y) = (0, 0);
    while x < a.items.len() && y < b.items.len() {
        let (ca, cb) = (a.items[x].0, b.items[y].0);
        if ca < cb {
            items.push(a.items[x]);
            x += 1;
        } else if cb < ca {
            items.push(b.items[y]);
            y += 1;
        } else {
            items.push(a.items[x]);
            x += 1;
            y += 1;
        }
    }
    items.extend_from_slice(&a.items[x..]);
    items.extend_from_slice(&b.items[y..]);
    let total = items.iter().map(|&(_, j)| p.node_cost[j]).sum();
    CostSet { items, total }
}

/// Keeps the `width` cheapest distinct sets of `sets`, cheapest first.
fn keep_best(sets: &mut Vec<CostSet>, width: usize) {
    sets.sort_by(|a, b| a.total.total_cmp(&b.total));
    let mut out: Vec<CostSet> = Vec::with_capacity(width);
    for s in sets.drain(..) {
        if out.len() >= width {
            break;
        }
        if !out.iter().any(|o| o.items == s.items) {
            out.push(s);
        }
    }
    *sets = out;
}

/// The `width` cheapest combinations of one set from each beam in `beams` (pairwise merges,
/// pruned to `width` after each step).
fn combine(p: &Problem, beams: &[&Vec<CostSet>], width: usize) -> Vec<CostSet> {
    let mut partial = vec![CostSet {
        items: Vec::new(),
        total: 0.0,
    }];
    for beam in beams {
        let mut next = Vec::with_capacity(partial.len() * beam.len());
        for a in &partial {
            for b in beam.iter() {
                next.push(merge_sets(p, a, b));
            }
        }
        keep_best(&mut next, width);
        partial = next;
    }
    partial
}

/// Beam DAG extraction: like [`greedy_dag`], but every class keeps the `width` cheapest
/// sub-DAGs found (as `(class, node)` sets with their summed cost) instead of one, and a node
/// combines its children's beams, keeping the `width` cheapest unions (the idea of
/// extraction-gym's beam extractor). Sharing between siblings that greedy DAG misses (two
/// operands that are cheaper together through a common sub-term than apart) is found when
/// the shared variant is among the `width` best of each child.
///
/// Iterated with a work list until no beam changes, at most `64 * n + 1024` node
/// evaluations (`n` nodes). The root beams are combined the same way and the cheapest valid
/// (acyclic) candidate is compared with [`greedy_dag`]: the result is the cheaper of the
/// two, so it is always acyclic and never costlier than greedy DAG. `width = 1` is
/// greedy DAG.
///
/// ```
/// use _core::extract::{beam_dag, dag_cost, greedy_dag, Problem};
/// // X (class 0, cost 3); A = {a1(X) 1 | a2 3}; B = {b1(X) 1 | b2 3}; root R = r(A, B) 0.
/// // Greedy DAG takes a2, b2 (6); sharing X costs 3 + 1 + 1 = 5.
/// let node_eclass = [0, 1, 1, 2, 2, 3];
/// let node_children = vec![vec![], vec![0], vec![], vec![0], vec![], vec![1, 2]];
/// let node_cost = [3.0, 1.0, 3.0, 1.0, 3.0, 0.0];
/// let p = Problem { node_eclass: &node_eclass, node_children: &node_children,
///     node_cost: &node_cost, num_classes: 4, roots: &[3], forbidden: &[false; 6] };
/// assert_eq!(dag_cost(&p, &greedy_dag(&p)), 6.0);
/// assert_eq!(dag_cost(&p, &beam_dag(&p, 2)), 5.0);
/// ```
pub fn beam_dag(p: &Problem, width: usize) -> Vec<Option<usize>> {
    let width = width.max(1);
    let n = p.node_eclass.len();
    let par = parents(p);
    let mut beams: Vec<Vec<CostSet>> = vec![Vec::new(); p.num_classes];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    let budget = 64 * n + 1024;
    let mut evals = 0usize;
    let mut kids: Vec<usize> = Vec::new();
    while let Some(i) = work.pop_front() {
        queued[i] = false;
        evals += 1;
        if evals > budget {
            break;
        }
        if p.forbidden[i] {
            continue;
        }
        let class = p.node_eclass[i];
        kids.clear();
        kids.extend_from_slice(&p.node_children[i]);
        kids.sort_unstable();
        kids.dedup();
        if kids.iter().any(|&d| beams[d].is_empty() || d == class) {
            continue;
        }
        let child_beams: Vec<&Vec<CostSet>> = kids.iter().map(|&d| &beams[d]).collect();
        let candidates = combine(p, &child_beams, width);
        let mut changed = false;
        for mut s in candidates {
            match s.items.binary_search_by_key(&class, |e| e.0) {
                Ok(_) => continue, // own class below itself: a cycle
                Err(pos) => s.items.insert(pos, (class, i)),
            }
            s.total += p.node_cost[i];
            let beam = &mut beams[class];
            if beam.iter().any(|o| o.items == s.items) {
                continue;
            }
            if beam.len() < width {
                beam.push(s);
            } else if s.total < beam.last().map_or(f64::INFINITY, |w| w.total) {
                *beam.last_mut().expect("full beam") = s;
            } else {
                continue;
            }
            beam.sort_by(|a, b| a.total.total_cmp(&b.total));
            changed = true;
        }
        if changed {
            requeue(&par[class], &mut queued, &mut work);
        }
    }
    let dag = greedy_dag(p);
    let mut best = dag.clone();
    let mut best_cost = dag_cost(p, &dag);
    let mut roots = p.roots.to_vec();
    roots.sort_unstable();
    roots.dedup();
    if roots.iter().any(|&r| beams[r].is_empty()) {
        return best;
    }
    let root_beams: Vec<&Vec<CostSet>> = roots.iter().map(|&r| &beams[r]).collect();
    for cand in combine(p, &root_beams, width) {
        let mut choice = vec![None; p.num_classes];
        for &(c, j) in &cand.items {
            choice[c] = Some(j);
        }
        let choice = restrict_to_roots(p, &choice);
        if !is_valid_choice(p, &choice) {
            continue;
        }
        let cost = dag_cost(p, &choice);
        if cost < best_cost {
            best = choice;
            best_cost = cost;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        eclass: Vec<usize>,
        children: Vec<Vec<usize>>,
        cost: Vec<f64>,
        num_classes: usize,
        roots: Vec<usize>,
        forbidden: Vec<bool>,
    }

    impl Owned {
        fn new(nodes: &[(usize, &[usize], f64)], num_classes: usize, roots: &[usize]) -> Self {
            Owned {
                eclass: nodes.iter().map(|n| n.0).collect(),
                children: nodes.iter().map(|n| n.1.to_vec()).collect(),
                cost: nodes.iter().map(|n| n.2).collect(),
                num_classes,
                roots: roots.to_vec(),
                forbidden: vec![false; nodes.len()],
            }
        }
        fn p(&self) -> Problem<'_> {
            Problem {
                node_eclass: &self.eclass,
                node_children: &self.children,
                node_cost: &self.cost,
                num_classes: self.num_classes,
                roots: &self.roots,
                forbidden: &self.forbidden,
            }
        }
    }

    #[test]
    fn tree_picks_cheapest_and_skips_forbidden() {
        // class 0: leaf a (1) | leaf b (0.5, forbidden); class 1: f(0) (1) | g (5)
        let mut o = Owned::new(
            &[(0, &[], 1.0), (0, &[], 0.5), (1, &[0], 1.0), (1, &[], 5.0)],
            2,
            &[1],
        );
        o.forbidden[1] = true;
        let c = greedy_tree(&o.p());
        assert_eq!(c, vec![Some(0), Some(2)]);
        assert_eq!(dag_cost(&o.p(), &c), 2.0);
        assert!(is_valid_choice(&o.p(), &c));
    }

    #[test]
    fn cycle_through_zero_cost_nodes_is_never_chosen() {
        // class 0 = {x (cost 4), id(1) (cost 0)}, class 1 = {id(0) (cost 0), y (cost 3)}
        // root 2 = h(0). Zero-cost cycle 0 -> 1 -> 0 must not be closed.
        let o = Owned::new(
            &[
                (0, &[], 4.0),
                (0, &[1], 0.0),
                (1, &[0], 0.0),
                (1, &[], 3.0),
                (2, &[0], 1.0),
            ],
            3,
            &[2],
        );
        for c in [greedy_tree(&o.p()), greedy_dag(&o.p())] {
            assert!(is_valid_choice(&o.p(), &c), "{c:?}");
            assert_eq!(dag_cost(&o.p(), &c), 4.0);
            assert_eq!(c, vec![Some(1), Some(3), Some(4)]);
        }
    }

    #[test]
    fn unreachable_classes_are_none() {
        let o = Owned::new(&[(0, &[], 1.0), (1, &[], 1.0), (2, &[0], 1.0)], 3, &[2]);
        assert_eq!(greedy_tree(&o.p()), vec![Some(0), None, Some(2)]);
        assert_eq!(greedy_dag(&o.p()), vec![Some(0), None, Some(2)]);
    }

    #[test]
    fn unbuildable_root_gives_all_none() {
        // root class 1 only has a node needing class 0, whose only node is forbidden.
        let mut o = Owned::new(&[(0, &[], 1.0), (1, &[0], 1.0)], 2, &[1]);
        o.forbidden[0] = true;
        assert_eq!(greedy_tree(&o.p()), vec![None, None]);
        assert_eq!(greedy_dag(&o.p()), vec![None, None]);
        assert!(dag_cost(&o.p(), &[None, None]).is_infinite());
    }

    #[test]
    fn dag_shares_common_subterm() {
        // x (class 0, cost 3); a(x), b(x) in classes 1, 2 (cost 1); root class 3 =
        // {r(1, 2) cost 0 | s cost 7}. Tree picks s (7 < 8); the DAG r costs 5.
        let o = Owned::new(
            &[
                (0, &[], 3.0),
                (1, &[0], 1.0),
                (2, &[0], 1.0),
                (3, &[1, 2], 0.0),
                (3, &[], 7.0),
            ],
            4,
            &[3],
        );
        let tree = greedy_tree(&o.p());
        assert_eq!(tree, vec![None, None, None, Some(4)]);
        assert_eq!(dag_cost(&o.p(), &tree), 7.0);
        let dag = greedy_dag(&o.p());
        assert_eq!(dag, vec![Some(0), Some(1), Some(2), Some(3)]);
        assert_eq!(dag_cost(&o.p(), &dag), 5.0);
    }

    #[test]
    fn multiple_roots() {
        let o = Owned::new(&[(0, &[], 1.0), (1, &[0], 2.0), (2, &[0], 3.0)], 3, &[1, 2]);
        let c = greedy_dag(&o.p());
        assert_eq!(c, vec![Some(0), Some(1), Some(2)]);
        assert_eq!(dag_cost(&o.p(), &c), 6.0);
    }

    #[test]
    fn validate_reports_bad_input() {
        let o = Owned::new(&[(0, &[], -1.0)], 1, &[0]);
        assert!(validate(&o.p()).unwrap_err().contains("node 0"));
        assert!(validate_signed(&o.p()).is_ok());
        let o = Owned::new(&[(0, &[], f64::NAN)], 1, &[0]);
        assert!(validate_signed(&o.p())
            .unwrap_err()
            .contains("not a finite number"));
        let o = Owned::new(&[(0, &[], 1.0)], 1, &[4]);
        assert!(validate(&o.p()).unwrap_err().contains("root class 4"));
        let o = Owned::new(&[(0, &[], 1.0)], 1, &[0]);
        assert!(validate(&o.p()).is_ok());
    }

    #[test]
    fn random_graphs_give_valid_choices() {
        // Deterministic pseudo-random e-graphs with cycles and zero costs.
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for _ in 0..300 {
            let classes = 1 + next(12);
            let nodes = classes + next(30);
            let mut spec = Vec::new();
            for i in 0..nodes {
                let class = if i < classes { i } else { next(classes) };
                let k = next(3);
                let ch: Vec<usize> = (0..k).map(|_| next(classes)).collect();
                let cost = (next(4) as f64) * 0.5;
                spec.push((class, ch, cost));
            }
            let nodes_ref: Vec<(usize, &[usize], f64)> = spec
                .iter()
                .map(|(a, b, c)| (*a, b.as_slice(), *c))
                .collect();
            let mut o = Owned::new(&nodes_ref, classes, &[next(classes)]);
            for f in o.forbidden.iter_mut() {
                *f = next(5) == 0;
            }
            let tree = greedy_tree(&o.p());
            let dag = greedy_dag(&o.p());
            for c in [&tree, &dag] {
                if c.iter().all(Option::is_none) {
                    assert!(tree.iter().all(Option::is_none));
                    assert!(dag.iter().all(Option::is_none));
                    continue;
                }
                assert!(is_valid_choice(&o.p(), c), "{c:?}");
                // Some exactly on the reachable classes.
                assert_eq!(&restrict_to_roots(&o.p(), c), c);
            }
            assert!(dag_cost(&o.p(), &dag) <= dag_cost(&o.p(), &tree));
            let beam = beam_dag(&o.p(), 3);
            if dag.iter().any(Option::is_some) {
                assert!(is_valid_choice(&o.p(), &beam), "{beam:?}");
                assert_eq!(&restrict_to_roots(&o.p(), &beam), &beam);
                assert!(dag_cost(&o.p(), &beam) <= dag_cost(&o.p(), &dag));
            }
        }
    }

    #[test]
    fn beam_finds_sharing_that_greedy_dag_misses() {
        // X (class 0, cost 3); A = {a1(X) 1 | a2 3}; B = {b1(X) 1 | b2 3}; R = r(A, B).
        let o = Owned::new(
            &[
                (0, &[], 3.0),
                (1, &[0], 1.0),
                (1, &[], 3.0),
                (2, &[0], 1.0),
                (2, &[], 3.0),
                (3, &[1, 2], 0.0),
            ],
            4,
            &[3],
        );
        assert_eq!(dag_cost(&o.p(), &greedy_dag(&o.p())), 6.0);
        let beam = beam_dag(&o.p(), 2);
        assert_eq!(beam, vec![Some(0), Some(1), Some(3), Some(5)]);
        assert_eq!(dag_cost(&o.p(), &beam), 5.0);
        assert_eq!(dag_cost(&o.p(), &beam_dag(&o.p(), 1)), 6.0);
    }

    use crate::xorshift::Rng;

    /// Cost palettes: ties everywhere, zeros, small integers, and values whose sums round
    /// differently in different orders (tiny next to large, `0.1 + 0.2`).
    const PALETTES: [&[f64]; 6] = [
        &[1.0],
        &[0.0],
        &[0.0, 1.0, 2.0, 3.0],
        &[0.1, 0.2, 0.3, 0.7],
        &[0.0, 1e-16, 2.5e-16, 1.0, 3.0, 1e9],
        &[0.0, 0.1, 1e-17, 0.5, 2.0, 1e-3, 7.25],
    ];

    /// A random e-graph: `classes` classes with at least one node each plus `extra` more nodes.
    /// Children mostly point to lower classes (a DAG with shared sub-terms, as from a model),
    /// some point anywhere (cycles), some repeat, some are the node's own class; some nodes
    /// are forbidden.
    fn random_problem(rng: &mut Rng, classes: usize, extra: usize, cyclic: usize) -> Owned {
        let palette = PALETTES[rng.below(PALETTES.len())];
        let mut o = Owned::new(&[], classes, &[]);
        for i in 0..classes + extra {
            let class = if i < classes { i } else { rng.below(classes) };
            let k = rng.pick(&[0, 1, 2, 2, 2, 3, 4]);
            let mut ch = Vec::new();
            for _ in 0..k {
                let d = if class == 0 || rng.chance(cyclic) {
                    rng.below(classes)
                } else if rng.chance(70) {
                    class - 1 - rng.below(class.min(4)) // a near class: long shared chains
                } else {
                    rng.below(class)
                };
                ch.push(d);
                if rng.chance(10) {
                    ch.push(d); // repeated child
                }
            }
            if rng.chance(3) {
                ch.push(class); // self loop
            }
            o.eclass.push(class);
            o.children.push(ch);
            o.cost.push(rng.pick(palette));
            o.forbidden.push(rng.chance(8));
        }
        let roots = 1 + rng.below(3);
        o.roots = (0..roots)
            .map(|_| classes - 1 - rng.below(classes.min(5)))
            .collect();
        o
    }

    fn assert_matches_reference(o: &Owned) {
        let p = o.p();
        assert_eq!(greedy_dag(&p), greedy_dag_reference(&p), "{p:?}");
    }

    #[test]
    fn greedy_dag_matches_the_reference_on_random_egraphs() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..4000 {
            let classes = 1 + rng.below(if round % 4 == 0 { 60 } else { 12 });
            let extra = rng.below(2 * classes + 4);
            let cyclic = rng.pick(&[0, 5, 30]);
            assert_matches_reference(&random_problem(&mut rng, classes, extra, cyclic));
        }
    }

    #[test]
    fn greedy_dag_matches_the_reference_on_larger_random_egraphs() {
        // Large enough for sets of hundreds of classes, many re-evaluations and disagreeing
        // children (two child sets with different nodes for one class).
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        for _ in 0..40 {
            let classes = 100 + rng.below(500);
            let extra = classes + rng.below(2 * classes);
            let cyclic = rng.pick(&[0, 1, 3]);
            assert_matches_reference(&random_problem(&mut rng, classes, extra, cyclic));
        }
    }

    #[test]
    fn greedy_dag_matches_the_reference_with_invalid_costs() {
        // Negative costs are outside the contract (and can make the work list run long on
        // cycles), but on small DAGs the result must still be the reference's.
        let mut rng = Rng(42);
        for _ in 0..500 {
            let classes = 1 + rng.below(10);
            let mut o = Owned::new(&[], classes, &[classes - 1]);
            for i in 0..classes + rng.below(12) {
                let class = if i < classes { i } else { rng.below(classes) };
                let k = if class == 0 { 0 } else { rng.below(3) };
                o.eclass.push(class);
                o.children.push((0..k).map(|_| rng.below(class)).collect());
                o.cost
                    .push(rng.pick(&[-4.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]));
                o.forbidden.push(rng.chance(5));
            }
            assert_matches_reference(&o);
        }
    }

    #[test]
    fn greedy_dag_union_prefers_the_smaller_node_of_a_shared_class() {
        // Class 0 = {x0 (cost 5), x1 (cost 1)}, 1 = a(0), 2 = b(0), root 3 = r(1, 2). In work
        // list order, a is built on x0, then x1 wins class 0, then b is built on x1; r's
        // first union then holds both and keeps x0, the smaller node. Re-evaluated, a and r
        // then move to x1.
        let o = Owned::new(
            &[
                (0, &[], 5.0),
                (1, &[0], 1.0),
                (0, &[], 1.0),
                (2, &[0], 1.0),
                (3, &[1, 2], 1.0),
            ],
            4,
            &[3],
        );
        assert_matches_reference(&o);
        assert_eq!(greedy_dag(&o.p()), vec![Some(2), Some(1), Some(3), Some(4)]);
    }
}
