//! The `tensat_py._core` Python module: the small surface Python calls.
//!
//! Type checking of programs as they are built ([`TypeChecker`]), operator signatures,
//! and — in later sections — e-graphs, rule sets, saturation, export and greedy extraction.
//! Errors surface as `ValueError` with the analysis' message (`"conv2d: ..."`).

use crate::analysis::{infer, Data};
use crate::lang::{signature, Arg, Mdl, SIGNATURES};
use egg::{FromOp, Id, Symbol};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Operator signatures: `{op: [(operand name, "int" | "sym" | "tensor" | "pair")]}`.
#[pyfunction]
fn signatures(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (op, args) in SIGNATURES {
        let list: Vec<(&str, &str)> = args.iter().map(|a| arg_pair(*a)).collect();
        out.set_item(*op, list)?;
    }
    Ok(out)
}

fn arg_pair(a: Arg) -> (&'static str, &'static str) {
    match a {
        Arg::Int(n) => (n, "int"),
        Arg::Sym(n) => (n, "sym"),
        Arg::Tensor(n) => (n, "tensor"),
        Arg::Pair(n) => (n, "pair"),
    }
}

/// Builds a program node by node, type-checking each with the e-class analysis.
///
/// `add(op, params, inputs)` takes the operator name, its parameters by operand name (as
/// in `signatures()`) and the ids of earlier nodes for its tensor operands, and returns
/// the new node's id. Raises `ValueError` naming the operator and shapes on a type error.
#[pyclass(module = "tensat_py._core")]
#[derive(Default)]
pub struct TypeChecker {
    data: Vec<Data>,
}

#[pymethods]
impl TypeChecker {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn add(&mut self, op: &str, params: &Bound<'_, PyDict>, inputs: Vec<usize>) -> PyResult<usize> {
        let sig = signature(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown operator `{op}`")))?;
        let mut leaves: Vec<Data> = Vec::new();
        let mut children: Vec<Id> = Vec::new();
        let mut next_input = inputs.iter();
        let base = self.data.len();
        for a in sig {
            match a {
                Arg::Int(name) | Arg::Sym(name) => {
                    let v = params.get_item(name)?.ok_or_else(|| {
                        PyValueError::new_err(format!("{op}: missing parameter `{name}`"))
                    })?;
                    let d = if matches!(a, Arg::Int(_)) {
                        Data::Int(v.extract::<i64>().map_err(|_| {
                            PyValueError::new_err(format!(
                                "{op}: parameter `{name}` must be an integer"
                            ))
                        })?)
                    } else {
                        Data::Sym(Symbol::from(v.extract::<String>().map_err(|_| {
                            PyValueError::new_err(format!(
                                "{op}: parameter `{name}` must be a string"
                            ))
                        })?))
                    };
                    children.push(Id::from(base + leaves.len()));
                    leaves.push(d);
                }
                Arg::Tensor(name) | Arg::Pair(name) => {
                    let i = *next_input.next().ok_or_else(|| {
                        PyValueError::new_err(format!("{op}: missing operand `{name}`"))
                    })?;
                    if i >= base {
                        return Err(PyValueError::new_err(format!(
                            "{op}: operand id {i} does not exist yet"
                        )));
                    }
                    children.push(Id::from(i));
                }
            }
        }
        if next_input.next().is_some() {
            return Err(PyValueError::new_err(format!(
                "{op}: takes {} tensor operands, got {}",
                sig.iter()
                    .filter(|a| matches!(a, Arg::Tensor(_) | Arg::Pair(_)))
                    .count(),
                inputs.len()
            )));
        }
        let enode =
            Mdl::from_op(op, children).map_err(|e| PyValueError::new_err(format!("{op}: {e}")))?;
        let data = &self.data;
        let out = infer(&enode, |id| {
            let i = usize::from(id);
            if i >= base {
                &leaves[i - base]
            } else {
                &data[i]
            }
        })
        .map_err(PyValueError::new_err)?;
        self.data.push(out);
        Ok(self.data.len() - 1)
    }

    fn shape(&self, id: usize) -> PyResult<Vec<usize>> {
        match self.get(id)? {
            Data::Tensor(t) => Ok(t.shape.clone()),
            _ => Err(PyValueError::new_err(format!("node {id} is not a tensor"))),
        }
    }

    fn constant(&self, id: usize) -> PyResult<bool> {
        Ok(self.get(id)?.tensor().is_some_and(|t| t.constant))
    }

    fn kind(&self, id: usize) -> PyResult<&'static str> {
        Ok(match self.get(id)? {
            Data::Tensor(_) => "tensor",
            Data::Pair(_) => "pair",
            Data::Int(_) => "int",
            Data::Sym(_) => "sym",
            Data::Invalid(_) => "invalid",
        })
    }

    /// Shapes of the two parts of a split node.
    fn pair_shapes(&self, id: usize) -> PyResult<(Vec<usize>, Vec<usize>)> {
        match self.get(id)? {
            Data::Pair(p) => Ok((p.0.shape.clone(), p.1.shape.clone())),
            _ => Err(PyValueError::new_err(format!("node {id} is not a split"))),
        }
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}

impl TypeChecker {
    fn get(&self, id: usize) -> PyResult<&Data> {
        self.data
            .get(id)
            .ok_or_else(|| PyValueError::new_err(format!("no node {id}")))
    }
}

/// The Python module `tensat_py._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(signatures, m)?)?;
    m.add_class::<TypeChecker>()?;
    Ok(())
}
