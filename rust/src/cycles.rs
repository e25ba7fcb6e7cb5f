//! Cycle filtering (Tensat, MLSys 2021, section 5.2).
//!
//! Rewrites can make an e-class reachable from itself; an extracted program must not be.
//! Tensat's *efficient* filter has two parts, both here:
//!
//! * a **descendants map** ([`Descendants`]) built once per iteration, used as a cheap
//!   pre-filter: a new e-node whose children reach the e-class it joins would close a cycle,
//!   so the application is skipped;
//! * **DFS post-processing** ([`filter_cycles`]) after each iteration's rebuild: every cycle
//!   still present gets its newest e-node put on the *filter list*, which extraction excludes
//!   (the ILP sets `x_i = 0` for it) and cycle detection ignores. The newest e-node is taken
//!   among those whose e-class keeps another unfiltered e-node, so that filtering never
//!   leaves an e-class without a choice while the cycle offers another way to break it.
//!
//! The *vanilla* filter instead checks reachability on the current e-graph before every
//! application ([`reaches`]), which is exact but slow.
//!
//! A rewrite whose target is an existing e-class *below* the matched one (a *shrinking*
//! rule: `(relu (relu ?x)) => (relu ?x)`, `(dropout ?x) => ?x`) is not refused: the union
//! makes the matched e-class's old e-nodes that lead down to the target self-loops or
//! cycles. Before the union those e-nodes ([`nodes_reaching`]) go on the filter list; the
//! target's own e-nodes reach nothing above them, so the merged e-class keeps an acyclic
//! choice and the smaller program stays extractable.
//!
//! ```
//! use _core::{analysis::TensorAnalysis, cycles::FilterList, lang::Mdl};
//! let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
//! let r = eg.add_expr(&"(relu (input x@2))".parse().unwrap());
//! eg.rebuild();
//! let mut filter = FilterList::default();
//! filter.record_births(&eg, 0);
//! assert_eq!(_core::cycles::filter_cycles(&mut eg, &mut filter), 0);
//! # let _ = r;
//! ```

use crate::analysis::TensorAnalysis;
use crate::lang::Mdl;
use egg::{EGraph, Id, Language};
use rustc_hash::{FxHashMap, FxHashSet};

type EG = EGraph<Mdl, TensorAnalysis>;

/// The filter list: e-nodes excluded from extraction and from cycle detection, plus the
/// birth order of every e-node (to find the newest e-node of a cycle).
#[derive(Debug, Default, Clone)]
pub struct FilterList {
    filtered: FxHashSet<Mdl>,
    birth: FxHashMap<Mdl, u64>,
    clock: u64,
}

impl FilterList {
    /// Re-canonicalise stored e-nodes after a rebuild and give every e-node not seen before
    /// a birth stamp from `iteration` (older e-nodes keep theirs).
    pub fn record_births(&mut self, egraph: &EG, iteration: usize) {
        let canon = |n: &Mdl| n.clone().map_children(|c| egraph.find(c));
        self.filtered = self.filtered.iter().map(canon).collect();
        let mut birth: FxHashMap<Mdl, u64> = FxHashMap::default();
        for (n, b) in self.birth.drain() {
            let c = canon(&n);
            let e = birth.entry(c).or_insert(b);
            *e = (*e).min(b);
        }
        self.birth = birth;
        let base = (iteration as u64) << 32;
        for class in egraph.classes() {
            for n in &class.nodes {
                if !self.birth.contains_key(n) {
                    self.clock += 1;
                    self.birth.insert(n.clone(), base + self.clock);
                }
            }
        }
    }

    /// True when the canonical e-node `n` is on the filter list.
    pub fn contains(&self, n: &Mdl) -> bool {
        self.filtered.contains(n)
    }

    /// Put the e-node `n` on the filter list (canonicalised in `egraph` first, as
    /// [`FilterList::contains`] expects). Returns whether it was not there yet.
    pub fn insert(&mut self, egraph: &EG, n: &Mdl) -> bool {
        self.filtered
            .insert(n.clone().map_children(|c| egraph.find(c)))
    }

    /// Take off the filter list every e-node of an e-class whose e-nodes are all on it,
    /// and return how many. Filtering is by e-node, and e-nodes filtered in different
    /// classes can become one e-class's only e-nodes once congruence merges them (a
    /// shrinking union filters `reshape(b)` above `a`, and a later union of `b` with the
    /// class below makes it `a`'s own `reshape`). [`filter_cycles`] then breaks the cycles
    /// through them again, preferring e-nodes whose e-class keeps another. The e-graph
    /// must be rebuilt (canonical).
    pub fn release_emptied(&mut self, egraph: &EG) -> usize {
        let mut released = 0;
        for class in egraph.classes() {
            if !class.nodes.is_empty() && class.nodes.iter().all(|n| self.filtered.contains(n)) {
                for n in &class.nodes {
                    released += usize::from(self.filtered.remove(n));
                }
            }
        }
        released
    }

    /// Number of filtered e-nodes.
    pub fn len(&self) -> usize {
        self.filtered.len()
    }

    /// True when nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.filtered.is_empty()
    }

    fn newest<'a>(&self, nodes: impl Iterator<Item = &'a Mdl>) -> Option<&'a Mdl> {
        nodes.max_by_key(|n| self.birth.get(*n).copied().unwrap_or(u64::MAX))
    }

    /// Number of e-nodes of `class` not on the filter list (the e-graph must be rebuilt).
    fn unfiltered_in(&self, egraph: &EG, class: Id) -> usize {
        egraph[class]
            .nodes
            .iter()
            .filter(|n| !self.contains(n))
            .count()
    }
}

/// Dense index of the canonical e-classes, for bitset maps.
fn class_index(egraph: &EG) -> (Vec<Id>, FxHashMap<Id, usize>) {
    let ids: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    let index = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    (ids, index)
}

/// Per e-class, the set of e-classes reachable through non-filtered e-nodes, as bitsets.
/// Memory: `classes^2 / 8` bytes.
pub struct Descendants {
    index: FxHashMap<Id, usize>,
    words: usize,
    bits: Vec<u64>,
}

impl Descendants {
    /// Build the map for the current (rebuilt) e-graph.
    pub fn new(egraph: &EG, filter: &FilterList) -> Descendants {
        let (ids, index) = class_index(egraph);
        let n = ids.len();
        let words = n.div_ceil(64);
        let mut bits = vec![0u64; n * words];
        // Iterative post-order DFS; a class is finished once all its children are.
        let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        for start in 0..n {
            if state[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, bool)> = vec![(start, false)];
            while let Some((c, expanded)) = stack.pop() {
                if expanded {
                    let mut acc = vec![0u64; words];
                    for node in &egraph[ids[c]].nodes {
                        if filter.contains(node) {
                            continue;
                        }
                        for ch in node.children() {
                            let d = index[&egraph.find(*ch)];
                            acc[d / 64] |= 1 << (d % 64);
                            if state[d] == 2 {
                                let row = &bits[d * words..(d + 1) * words];
                                for (a, b) in acc.iter_mut().zip(row) {
                                    *a |= *b;
                                }
                            }
                        }
                    }
                    bits[c * words..(c + 1) * words].copy_from_slice(&acc);
                    state[c] = 2;
                    continue;
                }
                if state[c] != 0 {
                    continue;
                }
                state[c] = 1;
                stack.push((c, true));
                for node in &egraph[ids[c]].nodes {
                    if filter.contains(node) {
                        continue;
                    }
                    for ch in node.children() {
                        let d = index[&egraph.find(*ch)];
                        if state[d] == 0 {
                            stack.push((d, false));
                        }
                    }
                }
            }
        }
        Descendants { index, words, bits }
    }

    /// True when e-class `to` is `from` or was reachable from it when the map was built.
    /// Classes created after the map was built are unknown and answer `false`.
    pub fn reaches(&self, egraph: &EG, from: Id, to: Id) -> bool {
        let (from, to) = (egraph.find(from), egraph.find(to));
        if from == to {
            return true;
        }
        match (self.index.get(&from), self.index.get(&to)) {
            (Some(&f), Some(&t)) => self.bits[f * self.words + t / 64] >> (t % 64) & 1 == 1,
            _ => false,
        }
    }
}

/// Exact reachability on the current e-graph (vanilla filtering): is `to` reachable from
/// `from` through non-filtered e-nodes?
pub fn reaches(egraph: &EG, filter: &FilterList, from: Id, to: Id) -> bool {
    let to = egraph.find(to);
    let mut seen: FxHashSet<Id> = FxHashSet::default();
    let mut stack = vec![egraph.find(from)];
    while let Some(c) = stack.pop() {
        if c == to {
            return true;
        }
        if !seen.insert(c) {
            continue;
        }
        for node in &egraph[c].nodes {
            let canon = node.clone().map_children(|x| egraph.find(x));
            if filter.contains(&canon) {
                continue;
            }
            stack.extend(canon.children().iter().copied());
        }
    }
    false
}

/// The unfiltered e-nodes of e-class `class` whose children reach e-class `target` through
/// unfiltered e-nodes, canonical in the current e-graph (which need not be rebuilt).
///
/// These are the e-nodes that a union of `class` with `target` turns into self-loops or
/// cycles (Tensat, MLSys 2021, section 5.2: such e-nodes can never be extracted). Exact:
/// one forward search of the e-classes below `class` and one backward search from `target`
/// within them, linear in the size of that sub-graph. Empty when `target` is not below
/// `class`.
///
/// ```
/// use _core::{analysis::TensorAnalysis, cycles::{nodes_reaching, FilterList}, lang::Mdl};
/// let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
/// let x = eg.add_expr(&"(relu (input x@2))".parse().unwrap());
/// let top = eg.add_expr(&"(relu (relu (input x@2)))".parse().unwrap());
/// eg.rebuild();
/// let found = nodes_reaching(&eg, &FilterList::default(), top, x);
/// assert_eq!(found, vec![Mdl::op("relu", vec![x]).unwrap()]);
/// assert!(nodes_reaching(&eg, &FilterList::default(), x, top).is_empty());
/// ```
pub fn nodes_reaching(egraph: &EG, filter: &FilterList, class: Id, target: Id) -> Vec<Mdl> {
    let canon = |n: &Mdl| n.clone().map_children(|c| egraph.find(c));
    let (class, target) = (egraph.find(class), egraph.find(target));
    // Forward: every e-class below `class`, with the reversed edges between them.
    let mut up_edges: FxHashMap<Id, Vec<Id>> = FxHashMap::default();
    let mut seen: FxHashSet<Id> = FxHashSet::default();
    let mut stack = vec![class];
    seen.insert(class);
    while let Some(c) = stack.pop() {
        for node in &egraph[c].nodes {
            let node = canon(node);
            if filter.contains(&node) {
                continue;
            }
            for &ch in node.children() {
                up_edges.entry(ch).or_default().push(c);
                if seen.insert(ch) {
                    stack.push(ch);
                }
            }
        }
    }
    if !seen.contains(&target) {
        return Vec::new();
    }
    // Backward: the e-classes among them that reach `target`.
    let mut reaching: FxHashSet<Id> = FxHashSet::default();
    reaching.insert(target);
    let mut stack = vec![target];
    while let Some(c) = stack.pop() {
        for &p in up_edges.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
            if reaching.insert(p) {
                stack.push(p);
            }
        }
    }
    // An e-node that the target itself holds (equal once canonical: the e-graph is not
    // rebuilt, so a congruence between `class` and `target` may be pending) stays: the
    // union makes it the target's own e-node, and filtering it could leave the merged
    // e-class without one. A cycle through it is broken by post-processing instead.
    let own: FxHashSet<Mdl> = egraph[target].nodes.iter().map(canon).collect();
    let mut out: Vec<Mdl> = Vec::new();
    for node in &egraph[class].nodes {
        let node = canon(node);
        if !filter.contains(&node)
            && !own.contains(&node)
            && node.children().iter().any(|ch| reaching.contains(ch))
            && !out.contains(&node)
        {
            out.push(node);
        }
    }
    out
}

/// DFS post-processing: first an e-class whose e-nodes are all filtered gets them back
/// ([`FilterList::release_emptied`]); then, while the e-graph (without filtered e-nodes)
/// has a cycle, put the newest e-node of each cycle found on the filter list, preferring
/// e-nodes whose e-class keeps another unfiltered e-node (an e-class whose last e-node is
/// filtered can no longer be extracted). Returns how many e-nodes were added. The e-graph must be rebuilt
/// (canonical).
pub fn filter_cycles(egraph: &mut EG, filter: &mut FilterList) -> usize {
    filter.release_emptied(egraph);
    let mut added = 0;
    loop {
        let found = one_pass(egraph, filter);
        if found == 0 {
            return added;
        }
        added += found;
    }
}

fn one_pass(egraph: &EG, filter: &mut FilterList) -> usize {
    let (ids, index) = class_index(egraph);
    let n = ids.len();
    let mut state = vec![0u8; n];
    let mut added = 0;
    // Stack frames: (class, node position, child position); `via[c]` is the e-node through
    // which the DFS entered the child currently explored from c.
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut frames: Vec<(usize, usize, usize)> = vec![(start, 0, 0)];
        state[start] = 1;
        while let Some(&(c, ni, ci)) = frames.last() {
            let top = frames.len() - 1;
            let nodes = &egraph[ids[c]].nodes;
            if ni >= nodes.len() {
                state[c] = 2;
                frames.pop();
                continue;
            }
            let node = &nodes[ni];
            if filter.contains(node) || ci >= node.children().len() {
                frames[top] = (c, ni + 1, 0);
                continue;
            }
            let d = index[&egraph.find(node.children()[ci])];
            frames[top].2 = ci + 1;
            match state[d] {
                0 => {
                    state[d] = 1;
                    frames.push((d, 0, 0));
                }
                1 => {
                    // Back edge: the cycle is the stack from d to c plus this e-node.
                    let pos = frames.iter().position(|f| f.0 == d).unwrap();
                    let on_cycle: Vec<(Id, &Mdl)> = frames[pos..]
                        .iter()
                        .map(|&(fc, fni, _)| (ids[fc], &egraph[ids[fc]].nodes[fni]))
                        .collect();
                    let spare = on_cycle
                        .iter()
                        .filter(|(class, _)| filter.unfiltered_in(egraph, *class) > 1)
                        .map(|(_, n)| *n);
                    let victim = filter
                        .newest(spare)
                        .or_else(|| filter.newest(on_cycle.iter().map(|(_, n)| *n)))
                        .cloned();
                    if let Some(victim) = victim {
                        if filter.filtered.insert(victim) {
                            added += 1;
                        }
                    }
                    // Cycles through e-nodes lower on the stack that were not broken here are
                    // found again by the next pass.
                }
                _ => {}
            }
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_that_closes_a_loop_filters_the_newest_enode() {
        let mut eg: EG = Default::default();
        let x = eg.add_expr(&"(input x@2_2)".parse().unwrap());
        let r = eg.add_expr(&"(relu (input x@2_2))".parse().unwrap());
        eg.rebuild();
        let mut filter = FilterList::default();
        filter.record_births(&eg, 0);
        // x = relu(relu(x)) style loop: union x with relu(x)'s class makes relu(x) cyclic.
        eg.union(x, r);
        eg.rebuild();
        filter.record_births(&eg, 1);
        let added = filter_cycles(&mut eg, &mut filter);
        assert_eq!(added, 1);
        assert_eq!(filter.len(), 1);
        let relu = eg[x].nodes.iter().find(|n| n.is_op("relu")).unwrap();
        assert!(filter.contains(relu));
    }

    #[test]
    fn post_processing_keeps_the_only_enode_of_a_class_when_the_cycle_offers_another() {
        // t(t(x)) unioned with x: class M = {x, t(T1)} and T1 = {t(M)} form a cycle. The
        // newest e-node is T1's only one; filtering it would leave T1 unbuildable, so the
        // e-node t(T1) in M (which keeps x) must be filtered instead.
        let mut eg: EG = Default::default();
        let x = eg.add_expr(&"(input x@2_3)".parse().unwrap());
        let t1 = eg.add_expr(&"(transpose (input x@2_3) [1,0])".parse().unwrap());
        let t2 = eg.add_expr(
            &"(transpose (transpose (input x@2_3) [1,0]) [1,0])"
                .parse()
                .unwrap(),
        );
        eg.rebuild();
        let mut filter = FilterList::default();
        filter.record_births(&eg, 0);
        eg.union(t2, x);
        eg.rebuild();
        filter.record_births(&eg, 1);
        let perm = eg.lookup(Mdl::List(vec![1, 0].into_boxed_slice())).unwrap();
        let (m, t1) = (eg.find(x), eg.find(t1));
        let outer = Mdl::op("transpose", vec![t1, perm]).unwrap(); // in M
        let inner = Mdl::op("transpose", vec![m, perm]).unwrap(); // T1's only e-node
        filter.birth.insert(outer.clone(), 0);
        filter.birth.insert(inner.clone(), u64::MAX - 1);
        assert_eq!(filter_cycles(&mut eg, &mut filter), 1);
        assert!(filter.contains(&outer));
        assert!(!filter.contains(&inner));
    }

    #[test]
    fn nodes_reaching_finds_the_enodes_leading_down_to_the_target() {
        // top = ewadd(relu(x), y) | tanh(y): only the ewadd leads down to x.
        let mut eg: EG = Default::default();
        let x = eg.add_expr(&"(input x@2)".parse().unwrap());
        let top = eg.add_expr(&"(ewadd (relu (input x@2)) (input y@2))".parse().unwrap());
        let other = eg.add_expr(&"(tanh (input y@2))".parse().unwrap());
        eg.union(top, other);
        eg.rebuild();
        let found = nodes_reaching(&eg, &FilterList::default(), top, x);
        assert_eq!(found.len(), 1);
        assert!(found[0].is_op("ewadd"));
        let mut filter = FilterList::default();
        filter.insert(&eg, &found[0]);
        assert!(nodes_reaching(&eg, &filter, top, x).is_empty());
    }

    #[test]
    fn nodes_reaching_keeps_an_enode_the_target_holds_under_a_pending_congruence() {
        // S = {relu(x), sigmoid(A)}, A = {tanh(S)}, D = {tanh(C)}; C is unioned with S and
        // the e-graph not rebuilt, so D's tanh(C) is A's tanh(S). A shrinking union of D
        // into A must not filter it: it is A's only e-node (the jax.nn.one_hot case).
        let mut eg: EG = Default::default();
        let s = eg.add_expr(&"(relu (input x@2))".parse().unwrap());
        let a = eg.add_expr(&"(tanh (relu (input x@2)))".parse().unwrap());
        let g = eg.add_expr(&"(sigmoid (tanh (relu (input x@2))))".parse().unwrap());
        let d = eg.add_expr(&"(tanh (exp (input x@2)))".parse().unwrap());
        let c = eg.add_expr(&"(exp (input x@2))".parse().unwrap());
        eg.union(s, g);
        eg.rebuild();
        eg.union(c, s);
        let found = nodes_reaching(&eg, &FilterList::default(), d, a);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn an_enode_filtered_elsewhere_that_becomes_a_class_s_only_one_is_given_back() {
        // D = {tanh(B)} has its e-node filtered (a shrinking union's victim); B is then
        // unioned with S, so congruence makes tanh(B) A's only e-node tanh(S). The cycle
        // S -> A -> S must be broken at sigmoid(A) in S, which keeps relu(x).
        let mut eg: EG = Default::default();
        let s = eg.add_expr(&"(relu (input x@2))".parse().unwrap());
        let a = eg.add_expr(&"(tanh (relu (input x@2)))".parse().unwrap());
        let b = eg.add_expr(&"(sigmoid (tanh (relu (input x@2))))".parse().unwrap());
        let d = eg.add_expr(
            &"(tanh (sigmoid (tanh (relu (input x@2)))))"
                .parse()
                .unwrap(),
        );
        eg.rebuild();
        let mut filter = FilterList::default();
        filter.record_births(&eg, 0);
        filter.insert(&eg, &Mdl::op("tanh", vec![b]).unwrap());
        eg.union(b, s);
        eg.rebuild();
        filter.record_births(&eg, 1);
        let (s, a) = (eg.find(s), eg.find(a));
        assert_eq!(a, eg.find(d));
        let only = Mdl::op("tanh", vec![s]).unwrap();
        assert!(filter.contains(&only), "the setup filters A's only e-node");
        filter_cycles(&mut eg, &mut filter);
        assert!(!filter.contains(&only));
        assert!(filter.contains(&Mdl::op("sigmoid", vec![a]).unwrap()));
        assert_eq!(filter.unfiltered_in(&eg, s), 1);
    }

    #[test]
    fn descendants_map_sees_grandchildren() {
        let mut eg: EG = Default::default();
        let top = eg.add_expr(&"(tanh (relu (input x@2_2)))".parse().unwrap());
        let x = eg.add_expr(&"(input x@2_2)".parse().unwrap());
        eg.rebuild();
        let d = Descendants::new(&eg, &FilterList::default());
        assert!(d.reaches(&eg, top, x));
        assert!(!d.reaches(&eg, x, top));
        assert!(reaches(&eg, &FilterList::default(), top, x));
    }
}
