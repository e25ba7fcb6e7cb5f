//! Python bindings of the greedy extractors in [`crate::extract`]:
//! `tensat_py._core.greedy_tree(...)` and `tensat_py._core.greedy_dag(...)`.
//!
//! Both take `(node_eclass, node_children, node_cost, num_classes, roots, forbidden)` as
//! plain lists (children are class indices, `forbidden` one bool per node) and return the
//! chosen node per class, `-1` where a class is not reached from the roots. Malformed input
//! raises `ValueError` naming the node. The GIL is released while extracting.
//! The lead's module function calls [`register`].

use crate::extract::{self, Problem};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    f: fn(&Problem) -> Vec<Option<usize>>,
    node_eclass: Vec<usize>,
    node_children: Vec<Vec<usize>>,
    node_cost: Vec<f64>,
    num_classes: usize,
    roots: Vec<usize>,
    forbidden: Vec<bool>,
) -> PyResult<Vec<i64>> {
    let p = Problem {
        node_eclass: &node_eclass,
        node_children: &node_children,
        node_cost: &node_cost,
        num_classes,
        roots: &roots,
        forbidden: &forbidden,
    };
    extract::validate(&p).map_err(PyValueError::new_err)?;
    let choice = py.allow_threads(|| f(&p));
    Ok(choice
        .into_iter()
        .map(|c| c.map_or(-1, |n| n as i64))
        .collect())
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

/// Adds `greedy_tree` and `greedy_dag` to the `_core` module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(greedy_tree, m)?)?;
    m.add_function(wrap_pyfunction!(greedy_dag, m)?)?;
    Ok(())
}
