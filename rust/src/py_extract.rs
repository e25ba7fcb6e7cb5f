//! Python bindings of [`crate::extract`] and [`crate::prune`]: `tensat_py._core.greedy_tree`,
//! `greedy_dag`, `beam_dag` and `dag_cost`, the one implementation of extraction that
//! `tensat_py.extract` and `tensat_py.egraph.ExtractionProblem.dag_cost` call, and `prune`,
//! `dominated`, `class_sccs` and `sccs`, the graph passes of `tensat_py.extract.simplify`.
//!
//! The greedy extractors take `(node_eclass, node_children, node_cost, num_classes, roots,
//! forbidden)` as plain lists (children are class indices, `forbidden` one bool per node) and
//! return the chosen node per class, `-1` where a class is not reached from the roots.
//! `dag_cost` takes the same e-graph without `forbidden`, plus a choice in that form. Malformed
//! input raises `ValueError` naming the node. The GIL is released while extracting.
//! The lead's module function calls [`register`].

use crate::extract::{self, Problem};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    f: impl Fn(&Problem) -> Vec<Option<usize>> + Send + Sync,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
) -> PyResult<Vec<i64>> {
    let (eclass, children, cost) = (&node_eclass, &node_children, Some(&node_cost[..]));
    let choice = graph_pass(
        py,
        eclass,
        children,
        cost,
        num_classes,
        &roots,
        &forbidden,
        f,
    )?;
    Ok(node_ids(choice))
}

/// A node per entry as Python sees it: the node id, or `-1` for `None`.
fn node_ids(nodes: Vec<Option<usize>>) -> Vec<i64> {
    nodes
        .into_iter()
        .map(|c| c.map_or(-1, |n| n as i64))
        .collect()
}

/// Greedy tree extraction: chosen node per class (`-1` when not reached).
#[pyfunction]
pub fn greedy_tree(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
) -> PyResult<Vec<i64>> {
    run(
        py,
        extract::greedy_tree,
        node_eclass,
        node_children,
        node_cost,
        num_classes,
        roots,
        forbidden,
    )
}

/// Greedy DAG extraction: chosen node per class (`-1` when not reached).
#[pyfunction]
pub fn greedy_dag(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
) -> PyResult<Vec<i64>> {
    run(
        py,
        extract::greedy_dag,
        node_eclass,
        node_children,
        node_cost,
        num_classes,
        roots,
        forbidden,
    )
}

/// Beam DAG extraction (see [`extract::beam_dag`]): chosen node per class (`-1` when not
/// reached); `width` partial solutions are kept per class (at least 1).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn beam_dag(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
    width: usize,
) -> PyResult<Vec<i64>> {
    run(
        py,
        |p: &Problem| extract::beam_dag(p, width),
        node_eclass,
        node_children,
        node_cost,
        num_classes,
        roots,
        forbidden,
    )
}

/// DAG cost of a choice (see [`extract::dag_cost`]): the summed cost of the distinct chosen
/// nodes reachable from the roots, each paid once, in the unit of `node_cost` (seconds for
/// Tensat's cost models). `choice` gives one entry per class, the chosen node or `-1`;
/// the result is `inf` when a class reached from the roots has no choice.
///
/// Raises `ValueError` on a malformed e-graph, a `choice` of the wrong length, or an entry
/// that is neither `-1` nor a node id.
#[pyfunction]
pub fn dag_cost(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    choice: Vec<i64>,
) -> PyResult<f64> {
    let forbidden = vec![false; node_eclass.len()];
    let p = Problem {
        node_eclass: &node_eclass,
        node_children: &node_children,
        node_cost: &node_cost,
        num_classes,
        roots: &roots,
        forbidden: &forbidden,
    };
    extract::validate_signed(&p).map_err(PyValueError::new_err)?;
    if choice.len() != num_classes {
        return Err(PyValueError::new_err(format!(
            "choice has {} entries, expected one per class ({num_classes})",
            choice.len()
        )));
    }
    let mut picked: Vec<Option<usize>> = Vec::with_capacity(num_classes);
    for (class, &n) in choice.iter().enumerate() {
        picked.push(match n {
            -1 => None,
            n if (0..node_eclass.len() as i64).contains(&n) => Some(n as usize),
            n => {
                return Err(PyValueError::new_err(format!(
                    "choice for class {class}: {n} is not a node id (0..{}) or -1",
                    node_eclass.len()
                )))
            }
        });
    }
    Ok(py.allow_threads(|| extract::dag_cost(&p, &picked)))
}

/// Builds the [`Problem`] a graph pass reads (costs 0 when `node_cost` is `None`), checks it
/// ([`extract::validate`]: `ValueError` naming the node) and runs `f` on it without the GIL.
#[allow(clippy::too_many_arguments)]
fn graph_pass<T: Send>(
    py: Python<'_>,
    node_eclass: &[usize],
    node_children: &[Vec<usize>],
    node_cost: Option<&[f64]>,
    num_classes: usize,
    roots: &[usize],
    flags: &[bool],
    f: impl FnOnce(&Problem) -> T + Send,
) -> PyResult<T> {
    let zeros;
    let node_cost = match node_cost {
        Some(cost) => cost,
        None => {
            zeros = vec![0.0; node_eclass.len()];
            &zeros
        }
    };
    let p = Problem {
        node_eclass,
        node_children,
        node_cost,
        num_classes,
        roots,
        forbidden: flags,
    };
    extract::validate(&p).map_err(PyValueError::new_err)?;
    Ok(py.allow_threads(|| f(&p)))
}

/// Nodes that can appear in some acyclic extraction from the roots (see
/// [`crate::prune::prune`]): one bool per node.
///
/// Raises `ValueError` on a malformed e-graph (lengths, class or child out of range).
#[pyfunction]
pub fn prune(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
) -> PyResult<Vec<bool>> {
    let (eclass, children) = (&node_eclass, &node_children);
    graph_pass(
        py,
        eclass,
        children,
        None,
        num_classes,
        &roots,
        &forbidden,
        crate::prune::prune,
    )
}

/// Dominated nodes (see [`crate::prune::dominated`]): per node, the node of its class that
/// dominates it, or `-1` (always `-1` for a node outside `keep`).
///
/// Raises `ValueError` on a malformed e-graph or a `keep` of the wrong length.
#[pyfunction]
pub fn dominated(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    keep: Vec<bool>,
) -> PyResult<Vec<i64>> {
    let (eclass, children, cost) = (&node_eclass, &node_children, Some(&node_cost[..]));
    let out = graph_pass(py, eclass, children, cost, num_classes, &[], &keep, |p| {
        crate::prune::dominated(p, &keep)
    })?;
    Ok(node_ids(out))
}

/// Strongly connected component id per class of the kept nodes' class graph (see
/// [`crate::prune::class_sccs`]).
///
/// Raises `ValueError` on a malformed e-graph or a `keep` of the wrong length.
#[pyfunction]
pub fn class_sccs(
    py: Python<'_>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    num_classes: usize,
    keep: Vec<bool>,
) -> PyResult<Vec<usize>> {
    let (eclass, children) = (&node_eclass, &node_children);
    graph_pass(py, eclass, children, None, num_classes, &[], &keep, |p| {
        crate::prune::class_sccs(p, &keep)
    })
}

/// Strongly connected component id per vertex of a graph given as successor lists (see
/// [`crate::prune::sccs`]).
///
/// Raises `ValueError` when a successor is not a vertex.
#[pyfunction]
pub fn sccs(py: Python<'_>, edges: Vec<Vec<usize>>) -> PyResult<Vec<usize>> {
    let num = edges.len();
    if let Some((v, w)) = edges
        .iter()
        .enumerate()
        .find_map(|(v, ws)| ws.iter().find(|&&w| w >= num).map(|&w| (v, w)))
    {
        return Err(PyValueError::new_err(format!(
            "vertex {v}: successor {w} out of range ({num} vertices)"
        )));
    }
    Ok(py.allow_threads(|| crate::prune::sccs(&edges)))
}

/// Adds `greedy_tree`, `greedy_dag`, `beam_dag`, `dag_cost`, `prune`, `dominated`,
/// `class_sccs` and `sccs` to the `_core` module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(prune, m)?)?;
    m.add_function(wrap_pyfunction!(dominated, m)?)?;
    m.add_function(wrap_pyfunction!(class_sccs, m)?)?;
    m.add_function(wrap_pyfunction!(sccs, m)?)?;
    m.add_function(wrap_pyfunction!(greedy_tree, m)?)?;
    m.add_function(wrap_pyfunction!(greedy_dag, m)?)?;
    m.add_function(wrap_pyfunction!(beam_dag, m)?)?;
    m.add_function(wrap_pyfunction!(dag_cost, m)?)?;
    Ok(())
}
