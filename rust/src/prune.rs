//! Graph passes that the ILP extraction runs before it builds a model: pruning the nodes no
//! acyclic extraction can use ([`prune`]), dominated nodes ([`dominated`]) and the strongly
//! connected components of a graph ([`sccs`]) or of an e-graph's class graph
//! ([`class_sccs`]).
//!
//! Both are linear in the size of the e-graph. The Python simplification
//! (`tensat_py.extract.simplify`, `tensat_py.extract.ilp.prune`) calls them through
//! `tensat_py._core.prune` / `dominated` / `class_sccs` / `sccs`; on the 50,000-node NasRNN
//! e-graph at k_multi=2 they replace about 0.8 s of Python loops per extraction.
//!
//! ```
//! use _core::extract::Problem;
//! use _core::prune::{class_sccs, prune};
//! // class 0: leaf x; class 1: f(x) or g(class 2); class 2: h(class 2) only (never built);
//! // class 3: an unreachable leaf. Root: class 1.
//! let node_eclass = [0, 1, 1, 2, 3];
//! let node_children = vec![vec![], vec![0], vec![2], vec![2], vec![]];
//! let p = Problem { node_eclass: &node_eclass, node_children: &node_children,
//!     node_cost: &[1.0; 5], num_classes: 4, roots: &[1], forbidden: &[false; 5] };
//! assert_eq!(prune(&p), vec![true, true, false, false, false]);
//! let comp = class_sccs(&p, &[true; 5]);
//! assert_ne!(comp[1], comp[2]); // 1 -> 2, but 2 never reaches 1
//! ```

use crate::extract::Problem;

/// Nodes that can appear in some acyclic extraction from the roots, one flag per node.
///
/// A node is kept when it is not forbidden, does not have its own class as a child, every
/// child class is *buildable* (least fixpoint: a class is buildable when one of its kept
/// nodes has only buildable children; extraction-gym's pruning) and its class is reachable
/// from the roots through kept nodes. Linear in nodes plus child edges.
///
/// ```
/// use _core::extract::Problem;
/// use _core::prune::prune;
/// // class 0 (root): a(class 1) or a leaf; class 1: b(class 1) only: a self-loop.
/// let p = Problem { node_eclass: &[0, 0, 1], node_children: &[vec![1], vec![], vec![1]],
///     node_cost: &[1.0; 3], num_classes: 2, roots: &[0], forbidden: &[false; 3] };
/// assert_eq!(prune(&p), vec![false, true, false]);
/// ```
pub fn prune(p: &Problem) -> Vec<bool> {
    let n = p.node_eclass.len();
    let allowed: Vec<bool> = (0..n)
        .map(|i| !p.forbidden[i] && !p.node_children[i].contains(&p.node_eclass[i]))
        .collect();
    // Least fixpoint of buildable classes: per node, the count of distinct child classes
    // not built yet.
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); p.num_classes];
    let mut missing = vec![0usize; n];
    let mut queue = Vec::new();
    for i in (0..n).filter(|&i| allowed[i]) {
        let mut kids = p.node_children[i].clone();
        kids.sort_unstable();
        kids.dedup();
        missing[i] = kids.len();
        for c in kids {
            parents[c].push(i);
        }
        if missing[i] == 0 {
            queue.push(i);
        }
    }
    let mut built = vec![false; p.num_classes];
    while let Some(i) = queue.pop() {
        let c = p.node_eclass[i];
        if built[c] {
            continue;
        }
        built[c] = true;
        for &j in &parents[c] {
            missing[j] -= 1;
            if missing[j] == 0 {
                queue.push(j);
            }
        }
    }
    let keep: Vec<bool> = (0..n).map(|i| allowed[i] && missing[i] == 0).collect();
    // Reachability from the roots through kept nodes.
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); p.num_classes];
    for i in (0..n).filter(|&i| keep[i]) {
        members[p.node_eclass[i]].push(i);
    }
    let mut reach = vec![false; p.num_classes];
    let mut stack: Vec<usize> = p.roots.iter().copied().filter(|&r| built[r]).collect();
    while let Some(c) = stack.pop() {
        if reach[c] {
            continue;
        }
        reach[c] = true;
        for &i in &members[c] {
            stack.extend(p.node_children[i].iter().copied().filter(|&d| !reach[d]));
        }
    }
    (0..n).map(|i| keep[i] && reach[p.node_eclass[i]]).collect()
}

/// How many earlier survivors of a class [`dominated`] compares a node with (bounded work
/// on huge classes).
pub const DOMINANCE_WINDOW: usize = 64;

/// Dominated nodes (extraction-gym's `faster-ilp` simplification): for each kept node, the
/// kept node of the same class that dominates it, or `None`.
///
/// Node `j` dominates node `i` when `cost_j <= cost_i` and `children(j)` is a subset of
/// `children(i)` (as sets): replacing `i` by `j` keeps any extraction valid and acyclic and
/// does not raise its cost. A class's kept nodes are visited cheapest first (then fewest
/// distinct children, then id); a node is compared with the first [`DOMINANCE_WINDOW`]
/// survivors before it, and the first that dominates it is its dominator, so exactly one of
/// two equal nodes survives.
///
/// ```
/// use _core::extract::Problem;
/// use _core::prune::dominated;
/// // class 1: f(class 0) cost 2, g(class 0, class 0) cost 3 (dominated by f: the same
/// // children as a set), a leaf of cost 5 (fewer children, but dearer than f).
/// let children = [vec![], vec![0], vec![0, 0], vec![]];
/// let p = Problem { node_eclass: &[0, 1, 1, 1], node_children: &children,
///     node_cost: &[1.0, 2.0, 3.0, 5.0], num_classes: 2, roots: &[1], forbidden: &[false; 4] };
/// assert_eq!(dominated(&p, &[true; 4]), vec![None, None, Some(1), None]);
/// ```
pub fn dominated(p: &Problem, keep: &[bool]) -> Vec<Option<usize>> {
    let n = p.node_eclass.len();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); p.num_classes];
    for i in (0..n).filter(|&i| keep[i]) {
        members[p.node_eclass[i]].push(i);
    }
    let mut out = vec![None; n];
    for nodes in members.iter().filter(|ns| ns.len() > 1) {
        let kids: Vec<Vec<usize>> = nodes
            .iter()
            .map(|&i| {
                let mut k = p.node_children[i].clone();
                k.sort_unstable();
                k.dedup();
                k
            })
            .collect();
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|&a, &b| {
            p.node_cost[nodes[a]]
                .total_cmp(&p.node_cost[nodes[b]])
                .then(kids[a].len().cmp(&kids[b].len()))
                .then(nodes[a].cmp(&nodes[b]))
        });
        let mut survivors: Vec<usize> = Vec::new();
        for a in order {
            let i = nodes[a];
            let dom = survivors.iter().take(DOMINANCE_WINDOW).copied().find(|&b| {
                p.node_cost[nodes[b]] <= p.node_cost[i] && is_subset(&kids[b], &kids[a])
            });
            match dom {
                Some(b) => out[i] = Some(nodes[b]),
                None => survivors.push(a),
            }
        }
    }
    out
}

/// Whether the sorted, deduplicated `small` is a subset of the sorted, deduplicated `big`.
fn is_subset(small: &[usize], big: &[usize]) -> bool {
    let mut rest = big.iter();
    small.iter().all(|x| rest.any(|y| y == x))
}

/// Strongly connected component id per class of the class graph of the kept nodes (an edge
/// from a node's class to each of its child classes). Ids are dense, `0..components`, and
/// a component gets its id after every component it reaches (reverse topological order).
pub fn class_sccs(p: &Problem, keep: &[bool]) -> Vec<usize> {
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); p.num_classes];
    for (i, _) in keep.iter().enumerate().filter(|(_, &k)| k) {
        edges[p.node_eclass[i]].extend_from_slice(&p.node_children[i]);
    }
    sccs(&edges)
}

/// Strongly connected component id per vertex of the graph `edges` (vertex `v`'s
/// successors are `edges[v]`; iterative Tarjan, linear). Ids are dense, `0..components`,
/// and a component gets its id after every component it reaches.
///
/// ```
/// use _core::prune::sccs;
/// // 0 -> 1 -> 2 -> 1: {1, 2} is one component, reached from {0}.
/// let comp = sccs(&[vec![1], vec![2], vec![1]]);
/// assert_eq!(comp, vec![1, 0, 0]);
/// ```
pub fn sccs(edges: &[Vec<usize>]) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let num = edges.len();
    let mut index = vec![NONE; num];
    let mut low = vec![0usize; num];
    let mut on = vec![false; num];
    let mut comp = vec![NONE; num];
    let mut stack = Vec::new();
    let mut work: Vec<(usize, usize)> = Vec::new();
    let (mut counter, mut ncomp) = (0usize, 0usize);
    for s in 0..num {
        if index[s] != NONE {
            continue;
        }
        index[s] = counter;
        low[s] = counter;
        counter += 1;
        stack.push(s);
        on[s] = true;
        work.push((s, 0));
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k < edges[v].len() {
                let w = edges[v][*k];
                *k += 1;
                if index[w] == NONE {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem<'a>(
        eclass: &'a [usize],
        children: &'a [Vec<usize>],
        num_classes: usize,
        roots: &'a [usize],
        forbidden: &'a [bool],
        cost: &'a [f64],
    ) -> Problem<'a> {
        Problem {
            node_eclass: eclass,
            node_children: children,
            node_cost: cost,
            num_classes,
            roots,
            forbidden,
        }
    }

    #[test]
    fn a_class_buildable_only_through_a_forbidden_node_is_pruned_with_its_parents() {
        // class 0 root: r(class 1); class 1: leaf (forbidden) or s(class 1).
        let children = [vec![1], vec![], vec![1]];
        let p = problem(
            &[0, 1, 1],
            &children,
            2,
            &[0],
            &[false, true, false],
            &[1.0; 3],
        );
        assert_eq!(prune(&p), vec![false, false, false]);
    }

    #[test]
    fn a_cycle_with_a_way_out_keeps_both_of_its_nodes() {
        // class 0 root: a(class 1) | leaf; class 1: b(class 0) | leaf.
        let children = [vec![1], vec![], vec![0], vec![]];
        let p = problem(&[0, 0, 1, 1], &children, 2, &[0], &[false; 4], &[1.0; 4]);
        assert_eq!(prune(&p), vec![true; 4]);
        assert_eq!(class_sccs(&p, &[true; 4]), vec![0, 0]);
        // Without the edge 1 -> 0 the classes are apart.
        assert_eq!(class_sccs(&p, &[true, true, false, true]), vec![1, 0]);
    }

    #[test]
    fn of_two_equal_nodes_the_one_with_the_lower_id_survives() {
        let children = [vec![], vec![0], vec![0]];
        let p = problem(&[0, 1, 1], &children, 2, &[1], &[false; 3], &[1.0; 3]);
        assert_eq!(dominated(&p, &[true; 3]), vec![None, None, Some(1)]);
        // A node outside `keep` neither dominates nor is dominated.
        assert_eq!(dominated(&p, &[true, false, true]), vec![None; 3]);
    }

    #[test]
    fn a_cheaper_node_with_more_children_dominates_nothing() {
        // class 2: a(class 0, class 1) cost 1, b(class 0) cost 2: neither dominates.
        let children = [vec![], vec![], vec![0, 1], vec![0]];
        let p = problem(
            &[0, 1, 2, 2],
            &children,
            3,
            &[2],
            &[false; 4],
            &[1.0, 1.0, 1.0, 2.0],
        );
        assert_eq!(dominated(&p, &[true; 4]), vec![None; 4]);
        assert!(is_subset(&[1, 3], &[0, 1, 2, 3]) && !is_subset(&[1, 4], &[0, 1, 2, 3]));
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let num = 200_000;
        let edges: Vec<Vec<usize>> = (0..num).map(|v| vec![(v + 1) % num]).collect();
        assert!(sccs(&edges).iter().all(|&c| c == 0));
    }
}
