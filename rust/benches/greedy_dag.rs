//! Times [`greedy_dag`] against its unoptimised reference on a synthetic, model-like e-graph
//! and checks that both give the same choice: `cargo bench --bench greedy_dag`.
//!
//! The e-graph has `TOWERS` independent towers joined by a binary tree of combining classes
//! up to one root. A tower is a sequence of `BLOCKS` blocks; a block runs `BRANCHES`
//! parallel chains of `LEN` classes from the previous block's output and combines their
//! ends. A chain class is built from the previous class and a weight (two ways), with alternatives (a
//! residual form sharing two earlier classes, a unary rewrite, rarely a node using a later
//! class, which closes a cycle), and a block's output also has a node that skips the block.

use _core::extract::{greedy_dag, greedy_dag_reference, Problem};
use std::time::Instant;

const TOWERS: usize = 8;
const BLOCKS: usize = 36;
const BRANCHES: usize = 3;
const LEN: usize = 12;
const WEIGHTS: usize = 24;

#[allow(dead_code)] // the bench draws with `below` only
#[path = "../src/xorshift.rs"]
mod xorshift;
use xorshift::Rng;

struct Graph {
    eclass: Vec<usize>,
    children: Vec<Vec<usize>>,
    cost: Vec<f64>,
    num_classes: usize,
    root: usize,
}

impl Graph {
    fn new_class(&mut self) -> usize {
        self.num_classes += 1;
        self.num_classes - 1
    }
    fn node(&mut self, class: usize, children: Vec<usize>, cost: f64) {
        self.eclass.push(class);
        self.children.push(children);
        self.cost.push(cost);
    }
}

fn build(rng: &mut Rng) -> Graph {
    let mut g = Graph {
        eclass: Vec::new(),
        children: Vec::new(),
        cost: Vec::new(),
        num_classes: 0,
        root: 0,
    };
    // About 200 distinct costs (seconds, as from a cost model).
    let cost = |rng: &mut Rng| (1 + rng.below(200)) as f64 * 1.7e-6;
    let mut tops = Vec::new();
    for _ in 0..TOWERS {
        let weights: Vec<usize> = (0..WEIGHTS).map(|_| g.new_class()).collect();
        for &w in &weights {
            g.node(w, vec![], 0.0);
        }
        let mut x = g.new_class();
        g.node(x, vec![], cost(rng));
        for _ in 0..BLOCKS {
            let mut ends = Vec::new();
            for _ in 0..BRANCHES {
                let chain: Vec<usize> = (0..LEN).map(|_| g.new_class()).collect();
                for (i, &a) in chain.iter().enumerate() {
                    let prev = if i == 0 { x } else { chain[i - 1] };
                    g.node(a, vec![prev, weights[rng.below(WEIGHTS)]], cost(rng));
                    g.node(a, vec![weights[rng.below(WEIGHTS)], prev], cost(rng));
                    if i >= 1 && rng.below(2) == 0 {
                        let before = if i == 1 { x } else { chain[i - 2] };
                        g.node(a, vec![before, prev], cost(rng));
                    }
                    if rng.below(3) == 0 {
                        g.node(a, vec![prev], cost(rng));
                    }
                    if i + 1 < LEN && rng.below(40) == 0 {
                        g.node(a, vec![chain[i + 1]], cost(rng));
                    }
                }
                ends.push(chain[LEN - 1]);
            }
            let out = g.new_class();
            g.node(out, ends, cost(rng));
            g.node(out, vec![x, weights[rng.below(WEIGHTS)]], 30.0 * cost(rng));
            x = out;
        }
        tops.push(x);
    }
    while tops.len() > 1 {
        let mut next = Vec::new();
        for pair in tops.chunks(2) {
            let c = g.new_class();
            g.node(c, pair.to_vec(), cost(rng));
            next.push(c);
        }
        tops = next;
    }
    g.root = tops[0];
    g
}

fn main() {
    let g = build(&mut Rng(0x9e37_79b9_7f4a_7c15));
    let forbidden = vec![false; g.eclass.len()];
    let roots = [g.root];
    let p = Problem {
        node_eclass: &g.eclass,
        node_children: &g.children,
        node_cost: &g.cost,
        num_classes: g.num_classes,
        roots: &roots,
        forbidden: &forbidden,
    };
    let time = |f: &dyn Fn() -> Vec<Option<usize>>, runs: usize| {
        let mut best = f64::INFINITY;
        let mut choice = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            choice = f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        (best, choice)
    };
    let (t_ref, c_ref) = time(&|| greedy_dag_reference(&p), 1);
    let (t_new, c_new) = time(&|| greedy_dag(&p), 5);
    assert_eq!(c_ref, c_new, "greedy_dag differs from its reference");
    println!(
        "greedy_dag on {} nodes, {} classes (best of runs): reference {:.3} s, new {:.3} s, {:.1}x",
        g.eclass.len(),
        g.num_classes,
        t_ref,
        t_new,
        t_ref / t_new
    );
}
