//! The `tensat_py._core` Python module: the small surface Python calls.
//!
//! Type checking of programs as they are built ([`TypeChecker`]), operator signatures,
//! and — in later sections — e-graphs, rule sets, saturation, export and greedy extraction.
//! Errors surface as `ValueError` with the analysis' message (`"conv2d: ..."`).

use crate::analysis::{infer, Data};
use crate::lang::{signature, Arg, Mdl, SIGNATURES};
use crate::rules;
use crate::saturate::{Config, CycleFilter, Explorer};
use egg::{FromOp, Id, Language, RecExpr, Symbol};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rustc_hash::FxHashMap;
use std::time::Duration;

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

/// A parsed rule file: `RuleSet.parse(text, filename)` or `RuleSet.load(path)`.
/// Syntax errors raise `ValueError("file:line:col: message")`.
#[pyclass(module = "tensat_py._core", frozen)]
pub struct RuleSet {
    inner: rules::RuleSet,
}

#[pymethods]
impl RuleSet {
    #[staticmethod]
    fn parse(text: &str, filename: &str) -> PyResult<RuleSet> {
        rules::parse(text, filename)
            .map(|inner| RuleSet { inner })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    #[staticmethod]
    fn load(path: &str) -> PyResult<RuleSet> {
        rules::load(std::path::Path::new(path))
            .map(|inner| RuleSet { inner })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn names(&self) -> Vec<String> {
        self.inner.names()
    }

    fn num_multi(&self) -> usize {
        self.inner.num_multi()
    }

    /// `[(name, [source text], [target text], line)]` for every rule.
    fn describe(&self) -> Vec<(String, Vec<String>, Vec<String>, usize)> {
        self.inner
            .rules
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    r.sources.iter().map(|p| p.to_string()).collect(),
                    r.targets.iter().map(|p| p.to_string()).collect(),
                    r.line,
                )
            })
            .collect()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The conditions of rule `index` (file order), each in DSL syntax.
    fn conditions(&self, index: usize) -> PyResult<Vec<String>> {
        Ok(self
            .rule(index)?
            .conditions
            .iter()
            .map(|c| c.to_string())
            .collect())
    }

    /// Do the conditions of rule `index` hold when its variables are bound as given?
    ///
    /// `bindings` maps a variable (`"?x"` or `"x"`) to an integer (an integer-parameter
    /// variable) or to `(shape, constant)` (a tensor variable: a weight when `constant`,
    /// an input otherwise). The same [`rules::Rule::check`] that saturation runs decides.
    fn check_conditions(&self, index: usize, bindings: &Bound<'_, PyDict>) -> PyResult<bool> {
        let rule = self.rule(index)?;
        let mut eg: egg::EGraph<Mdl, crate::analysis::TensorAnalysis> = Default::default();
        let mut subst = egg::Subst::default();
        for (k, v) in bindings.iter() {
            let name: String = k.extract()?;
            let var: egg::Var = format!("?{}", name.trim_start_matches('?'))
                .parse()
                .map_err(|_| PyValueError::new_err(format!("bad variable name `{name}`")))?;
            let id = if let Ok(i) = v.extract::<i64>() {
                eg.add(Mdl::Num(i))
            } else {
                let (shape, constant): (Vec<usize>, bool) = v.extract().map_err(|_| {
                    PyValueError::new_err(format!(
                        "binding of `{name}` must be an int or (shape, constant)"
                    ))
                })?;
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let sym = eg.add(Mdl::Var(Symbol::from(format!(
                    "{}@{}",
                    name.trim_start_matches('?'),
                    dims.join("_")
                ))));
                eg.add(if constant {
                    Mdl::Weight([sym])
                } else {
                    Mdl::Input([sym])
                })
            };
            subst.insert(var, id);
        }
        eg.rebuild();
        Ok(rule.check(&eg, &subst))
    }
}

impl RuleSet {
    fn rule(&self, index: usize) -> PyResult<&rules::Rule> {
        self.inner.rules.get(index).ok_or_else(|| {
            PyValueError::new_err(format!(
                "no rule {index} (the set has {})",
                self.inner.len()
            ))
        })
    }
}

/// An e-graph holding one program, explored with rules and exported for extraction.
///
/// `EGraph(nodes)`: node `i` is `(op, children)` with children indices `< i`; leaves are
/// integer literals (`"3"`) or symbols (`"x@2_3"`); the last node is the root. Raises
/// `ValueError` naming the node index and operator when the program does not type-check.
#[pyclass(module = "tensat_py._core", unsendable)]
pub struct EGraph {
    ex: Explorer,
}

#[pymethods]
impl EGraph {
    #[new]
    fn new(nodes: Vec<(String, Vec<usize>)>) -> PyResult<EGraph> {
        let expr = flat_to_expr(&nodes)?;
        if let Some((i, msg)) = Explorer::type_errors(&expr) {
            return Err(PyValueError::new_err(format!("node {i}: {msg}")));
        }
        Ok(EGraph {
            ex: Explorer::new(&expr),
        })
    }

    /// Explore with `rules`; returns the statistics as a dict (seconds as floats).
    #[allow(clippy::too_many_arguments)] // keyword arguments of the Python method
    #[pyo3(signature = (rules, k_multi=1, node_limit=50_000, iter_limit=15, time_limit=60.0, cycle_filter="efficient"))]
    fn saturate<'py>(
        &mut self,
        py: Python<'py>,
        rules: &RuleSet,
        k_multi: usize,
        node_limit: usize,
        iter_limit: usize,
        time_limit: f64,
        cycle_filter: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let config = Config {
            k_multi,
            node_limit,
            iter_limit,
            time_limit: Duration::try_from_secs_f64(time_limit)
                .map_err(|e| PyValueError::new_err(format!("time_limit: {e}")))?,
            cycle_filter: CycleFilter::parse(cycle_filter).map_err(PyValueError::new_err)?,
        };
        let st = self.ex.run(&rules.inner, &config);
        let d = PyDict::new(py);
        d.set_item("enodes", st.enodes)?;
        d.set_item("eclasses", st.eclasses)?;
        d.set_item("iterations", st.iterations)?;
        d.set_item("stop_reason", st.stop_reason.as_str())?;
        d.set_item("filtered_enodes", st.filtered_enodes)?;
        d.set_item("applied", st.applied)?;
        d.set_item("rejected_type", st.rejected_type)?;
        d.set_item("rejected_cycle", st.rejected_cycle)?;
        d.set_item("explore_seconds", st.explore_seconds)?;
        d.set_item("search_seconds", st.search_seconds)?;
        d.set_item("apply_seconds", st.apply_seconds)?;
        d.set_item("rebuild_seconds", st.rebuild_seconds)?;
        d.set_item("cycle_seconds", st.cycle_seconds)?;
        Ok(d)
    }

    /// Number of e-nodes and e-classes.
    fn size(&self) -> (usize, usize) {
        (
            self.ex.egraph.total_number_of_nodes(),
            self.ex.egraph.number_of_classes(),
        )
    }

    /// Are the programs `a` and `b` (flat node lists as for the constructor) in one e-class?
    /// Adds them to the e-graph if they are not there yet.
    fn equivalent(
        &mut self,
        a: Vec<(String, Vec<usize>)>,
        b: Vec<(String, Vec<usize>)>,
    ) -> PyResult<bool> {
        let x = self.add_flat(&a)?;
        let y = self.add_flat(&b)?;
        Ok(self.ex.egraph.find(x) == self.ex.egraph.find(y))
    }

    /// Export for extraction (see the module docs): dense class ids, e-nodes with their
    /// class and child classes, the filter list and each class's analysis data.
    fn export<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let eg = &self.ex.egraph;
        let mut index: FxHashMap<Id, usize> = FxHashMap::default();
        for (i, c) in eg.classes().enumerate() {
            index.insert(c.id, i);
        }
        let mut node_op: Vec<String> = Vec::new();
        let mut node_eclass: Vec<usize> = Vec::new();
        let mut node_children: Vec<Vec<usize>> = Vec::new();
        let mut filtered: Vec<usize> = Vec::new();
        let classes = pyo3::types::PyList::empty(py);
        for (i, c) in eg.classes().enumerate() {
            for n in &c.nodes {
                if self.ex.filter.contains(n) {
                    filtered.push(node_op.len());
                }
                node_op.push(match n {
                    Mdl::Num(v) => v.to_string(),
                    Mdl::Var(s) => s.to_string(),
                    other => other.to_string(),
                });
                node_eclass.push(i);
                node_children.push(n.children().iter().map(|ch| index[&eg.find(*ch)]).collect());
            }
            let d = PyDict::new(py);
            match &c.data {
                Data::Int(v) => {
                    d.set_item("kind", "int")?;
                    d.set_item("value", v)?;
                }
                Data::Sym(s) => {
                    d.set_item("kind", "sym")?;
                    d.set_item("value", s.as_str())?;
                }
                Data::Tensor(t) => {
                    d.set_item("kind", "tensor")?;
                    d.set_item("shape", t.shape.clone())?;
                    d.set_item("constant", t.constant)?;
                    d.set_item("dtype", t.dtype.name())?;
                }
                Data::Pair(p) => {
                    d.set_item("kind", "pair")?;
                    d.set_item("shapes", (p.0.shape.clone(), p.1.shape.clone()))?;
                    d.set_item("constant", p.0.constant && p.1.constant)?;
                }
                Data::Invalid(e) => {
                    d.set_item("kind", "invalid")?;
                    d.set_item("value", e)?;
                }
            }
            classes.append(d)?;
        }
        let out = PyDict::new(py);
        out.set_item("root", index[&eg.find(self.ex.root)])?;
        out.set_item("num_classes", index.len())?;
        out.set_item("node_op", node_op)?;
        out.set_item("node_eclass", node_eclass)?;
        out.set_item("node_children", node_children)?;
        out.set_item("filtered", filtered)?;
        out.set_item("classes", classes)?;
        Ok(out)
    }
}

impl EGraph {
    fn add_flat(&mut self, nodes: &[(String, Vec<usize>)]) -> PyResult<Id> {
        let id = self.ex.egraph.add_expr(&flat_to_expr(nodes)?);
        self.ex.egraph.rebuild();
        Ok(id)
    }
}

/// A flat program (node `i` = `(op, children)`, children indices `< i`, root last) as a
/// `RecExpr`. Raises `ValueError` naming the node on an unknown operator, a wrong arity,
/// a forward reference or an empty program; types are not checked here.
fn flat_to_expr(nodes: &[(String, Vec<usize>)]) -> PyResult<RecExpr<Mdl>> {
    if nodes.is_empty() {
        return Err(PyValueError::new_err("empty program"));
    }
    let mut expr: RecExpr<Mdl> = RecExpr::default();
    for (i, (op, children)) in nodes.iter().enumerate() {
        if let Some(c) = children.iter().find(|c| **c >= i) {
            return Err(PyValueError::new_err(format!(
                "node {i} ({op}): child {c} is not an earlier node"
            )));
        }
        let node = Mdl::from_op(op, children.iter().map(|c| Id::from(*c)).collect())
            .map_err(|e| PyValueError::new_err(format!("node {i} ({op}): {e}")))?;
        expr.add(node);
    }
    Ok(expr)
}

/// The Python module `tensat_py._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(signatures, m)?)?;
    m.add_class::<TypeChecker>()?;
    m.add_class::<RuleSet>()?;
    m.add_class::<EGraph>()?;
    crate::py_extract::register(m)?;
    Ok(())
}
