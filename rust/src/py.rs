//! The `tensat_py._core` Python module: the small surface Python calls.
//!
//! Type checking of programs as they are built ([`TypeChecker`]), operator signatures,
//! and — in later sections — e-graphs, rule sets, saturation, export and greedy extraction.
//! Errors surface as `ValueError` with the analysis' message (`"conv2d: ..."`).

use crate::analysis::{infer, Data};
use crate::lang::{Arg, Mdl, Op, Output};
use crate::rules;
use crate::saturate::{Config, CycleFilter, Explorer, Found, Policy};
use egg::{Id, Language, RecExpr, Symbol};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rustc_hash::FxHashMap;
use std::time::Duration;

/// Operator signatures: `{op: [(operand name, kind)]}`, kind one of `"int"`, `"float"`,
/// `"list"`, `"sym"`, `"tensor"`, `"pair"`; the order is the e-node's child order. A
/// variadic operator (`opaque`) lists its fixed operands only (see `operators()`).
#[pyfunction]
fn signatures(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for op in Op::all() {
        let list: Vec<(&str, &str)> = op
            .decl()
            .operands
            .iter()
            .map(|a| (a.name(), a.kind()))
            .collect();
        out.set_item(op.name(), list)?;
    }
    Ok(out)
}

/// Every declared operator: `{op: {"dialect", "operands": [(name, kind)], "variadic":
/// (name, kind) | None, "output": "tensor" | "pair", "summary"}}`.
#[pyfunction]
fn operators(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for op in Op::all() {
        let d = op.decl();
        let e = PyDict::new(py);
        e.set_item("dialect", op.dialect().name)?;
        let list: Vec<(&str, &str)> = d.operands.iter().map(|a| (a.name(), a.kind())).collect();
        e.set_item("operands", list)?;
        e.set_item("variadic", d.variadic.map(|a| (a.name(), a.kind())))?;
        e.set_item(
            "output",
            match d.output {
                Output::Tensor => "tensor",
                Output::Pair => "pair",
            },
        )?;
        e.set_item("summary", d.summary)?;
        out.set_item(op.name(), e)?;
    }
    Ok(out)
}

/// A parameter value from Python as the analysis data of its leaf.
fn param_data(op: &str, a: Arg, v: &Bound<'_, PyAny>) -> PyResult<Data> {
    let bad = |what: &str| {
        PyValueError::new_err(format!("{op}: parameter `{}` must be {what}", a.name()))
    };
    Ok(match a {
        Arg::Int(_) => Data::Int(v.extract::<i64>().map_err(|_| bad("an integer"))?),
        Arg::Float(_) => {
            let f = v.extract::<f64>().map_err(|_| bad("a float"))?;
            if f.is_nan() {
                return Err(bad("a float other than NaN"));
            }
            Data::Float(f)
        }
        Arg::List(_) => Data::List(
            v.extract::<Vec<i64>>()
                .map_err(|_| bad("a sequence of integers"))?,
        ),
        Arg::Sym(_) => Data::Sym(Symbol::from(
            v.extract::<String>().map_err(|_| bad("a string"))?,
        )),
        Arg::Tensor(_) | Arg::Pair(_) => unreachable!("operands are not parameters"),
    })
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
        let o = Op::lookup(op)
            .ok_or_else(|| PyValueError::new_err(format!("unknown operator `{op}`")))?;
        let d = o.decl();
        let mut leaves: Vec<Data> = Vec::new();
        let mut children: Vec<Id> = Vec::new();
        let mut next_input = inputs.iter();
        let base = self.data.len();
        let mut push_input = |name: &str, children: &mut Vec<Id>| -> PyResult<()> {
            let i = *next_input
                .next()
                .ok_or_else(|| PyValueError::new_err(format!("{op}: missing operand `{name}`")))?;
            if i >= base {
                return Err(PyValueError::new_err(format!(
                    "{op}: operand id {i} does not exist yet"
                )));
            }
            children.push(Id::from(i));
            Ok(())
        };
        for a in d.operands {
            if a.is_param() {
                let v = params.get_item(a.name())?.ok_or_else(|| {
                    PyValueError::new_err(format!("{op}: missing parameter `{}`", a.name()))
                })?;
                children.push(Id::from(base + leaves.len()));
                leaves.push(param_data(op, *a, &v)?);
            } else {
                push_input(a.name(), &mut children)?;
            }
        }
        let fixed_inputs = d.operands.iter().filter(|a| !a.is_param()).count();
        if let Some(v) = d.variadic {
            for _ in fixed_inputs..inputs.len() {
                push_input(v.name(), &mut children)?;
            }
        } else if inputs.len() != fixed_inputs {
            return Err(PyValueError::new_err(format!(
                "{op}: takes {fixed_inputs} tensor operands, got {}",
                inputs.len()
            )));
        }
        let enode = Mdl::op(op, children).map_err(PyValueError::new_err)?;
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

    /// The dtype name of tensor node `id` (`"float32"`, ...).
    fn dtype(&self, id: usize) -> PyResult<&'static str> {
        match self.get(id)? {
            Data::Tensor(t) => Ok(t.dtype.name()),
            Data::Pair(p) => Ok(p.0.dtype.name()),
            _ => Err(PyValueError::new_err(format!("node {id} is not a tensor"))),
        }
    }

    fn shape(&self, id: usize) -> PyResult<Vec<usize>> {
        match self.get(id)? {
            Data::Tensor(t) => Ok(t.shape.clone()),
            _ => Err(PyValueError::new_err(format!("node {id} is not a tensor"))),
        }
    }

    /// Whether node `id`'s value depends on weights alone: a tensor's flag, or for a
    /// `split`'s pair, both parts' (a split of weights is weight-only, as its parts are).
    fn constant(&self, id: usize) -> PyResult<bool> {
        Ok(match self.get(id)? {
            Data::Tensor(t) => t.constant,
            Data::Pair(p) => p.0.constant && p.1.constant,
            _ => false,
        })
    }

    fn kind(&self, id: usize) -> PyResult<&'static str> {
        Ok(match self.get(id)? {
            Data::Tensor(_) => "tensor",
            Data::Pair(_) => "pair",
            Data::Int(_) => "int",
            Data::Float(_) => "float",
            Data::List(_) => "list",
            Data::Sym(_) => "sym",
            Data::Ks(_) => "ks",
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

    /// The built-in constant-folding rules (`rules::constant_folding`: RLO's `cprop_add`,
    /// `cprop_sub`, `cprop_mul`, `cprop_div` on `float64`, `float32` and `int64` scalar
    /// literals).
    #[staticmethod]
    fn constant_folding() -> RuleSet {
        RuleSet {
            inner: rules::constant_folding(),
        }
    }

    /// RLO's `cse_bind` for lets of two names (`rules::binding_rules`): renames the inner
    /// variable to the outer, whose type a computed leaf supplies.
    #[staticmethod]
    fn knossos_binding() -> RuleSet {
        RuleSet {
            inner: rules::binding_rules(),
        }
    }

    /// The built-in layout rules (`rules::layout_rules`, the rule set `layout`):
    /// `se-gate-upsample` and `se-gate-upsample-l` write a squeeze-excite gate's broadcast
    /// product `(mul ?x ?g)`, `?x` `[N, C, H, W]` and `?g` `[N, C, 1, 1]`, with the gate
    /// resized (nearest) to the shape of `?x`, which onnxruntime runs in its NCHWc layout.
    #[staticmethod]
    fn layout() -> RuleSet {
        RuleSet {
            inner: rules::layout_rules(),
        }
    }

    /// The rules of `sets` in order; `ValueError` when two share a rule name.
    #[staticmethod]
    fn union(sets: Vec<PyRef<'_, RuleSet>>) -> PyResult<RuleSet> {
        let inner: Vec<rules::RuleSet> = sets.iter().map(|s| s.inner.clone()).collect();
        rules::RuleSet::union(&inner)
            .map(|inner| RuleSet { inner })
            .map_err(PyValueError::new_err)
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

    /// Is rule `index` mirror-symmetric (a merge applied once per pair of e-classes by
    /// `saturate(mirror_once=True)`)?
    fn mirror_symmetric(&self, index: usize) -> PyResult<bool> {
        Ok(self.rule(index)?.is_mirror_symmetric())
    }

    /// Is rule `index` applied as a merge tree too (`crate::merge_tree::MergeForm`: a
    /// mirror-symmetric merge whose sources share a tensor variable; `saturate(merge_trees=True)`
    /// merges each group of operators sharing an input whole in the first iteration)?
    fn merge_tree(&self, index: usize) -> PyResult<bool> {
        Ok(crate::merge_tree::MergeForm::of(self.rule(index)?).is_some())
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
            } else if let Ok(f) = v.extract::<f64>() {
                eg.add(Mdl::leaf(&format!("{f:?}")).map_err(PyValueError::new_err)?)
            } else if v.is_instance_of::<PyList>() {
                let items: Vec<i64> = v.extract().map_err(|_| {
                    PyValueError::new_err(format!("list binding of `{name}` must hold integers"))
                })?;
                eg.add(Mdl::List(items.into_boxed_slice()))
            } else {
                let (shape, constant, dtype): (Vec<usize>, bool, String) = v
                    .extract()
                    .or_else(|_| {
                        v.extract::<(Vec<usize>, bool)>()
                            .map(|(s, c)| (s, c, "float32".to_string()))
                    })
                    .map_err(|_| {
                        PyValueError::new_err(format!(
                            "binding of `{name}` must be an int, a float, a list of ints or \
                             (shape, constant[, dtype])"
                        ))
                    })?;
                let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                let sym = eg.add(Mdl::Var(Symbol::from(format!(
                    "{}@{}:{dtype}",
                    name.trim_start_matches('?'),
                    dims.join("_")
                ))));
                let leaf = if constant { "weight" } else { "input" };
                eg.add(Mdl::op(leaf, vec![sym]).expect("input/weight take one symbol"))
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
    ///
    /// `policy` (optional) chooses the matches applied each iteration (see
    /// `tensat_py.policies`): an object with `search_multi(iteration, k_multi) -> bool`,
    /// `multi_rules(iteration) -> None | list[int]` (which multi-pattern rules, by index,
    /// are searched; `None`: all), `selects(iteration) -> bool` and
    /// `select(view) -> None | list[bool]`, each optional;
    /// without one, or with `None`, the schedule is Tensat's (`AllRules`). A later call
    /// continues the iteration count of earlier ones.
    ///
    /// `mirror_once` (default true) applies a mirror-symmetric multi-pattern rule once per
    /// pair of matched e-classes; `False` applies it to both orders, as Tensat does.
    /// `merge_trees` (default true) also applies each merge rule, in the e-graph's first
    /// iteration, as a merge tree over every group of three or more operators it can merge
    /// (`_core::merge_tree`); `stats["merge_tree_applied"]` counts those applications.
    #[pyo3(signature = (rules, k_multi=1, node_limit=50_000, iter_limit=15, time_limit=60.0, cycle_filter="efficient", policy=None, mirror_once=true, merge_trees=true))]
    fn saturate<'py>(
        &mut self,
        py: Python<'py>,
        rules: &RuleSet,
        k_multi: usize,
        node_limit: usize,
        iter_limit: usize,
        time_limit: f64,
        cycle_filter: &str,
        policy: Option<Bound<'py, PyAny>>,
        mirror_once: bool,
        merge_trees: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let config = Config {
            k_multi,
            node_limit,
            iter_limit,
            time_limit: Duration::try_from_secs_f64(time_limit)
                .map_err(|e| PyValueError::new_err(format!("time_limit: {e}")))?,
            cycle_filter: CycleFilter::parse(cycle_filter).map_err(PyValueError::new_err)?,
            mirror_once,
            merge_trees,
        };
        let st = match policy {
            // Exploration runs without the GIL, so Python threads (the progress display) run.
            None => {
                let (ex, inner) = (&mut self.ex, &rules.inner);
                py.allow_threads(|| ex.run(inner, &config))
            }
            Some(obj) => {
                let mut p = PyPolicy { obj, err: None };
                let st = self.ex.run_with(&rules.inner, &config, &mut p);
                if let Some(e) = p.err {
                    return Err(e);
                }
                st
            }
        };
        let d = PyDict::new(py);
        d.set_item("enodes", st.enodes)?;
        d.set_item("eclasses", st.eclasses)?;
        d.set_item("iterations", st.iterations)?;
        d.set_item("stop_reason", st.stop_reason.as_str())?;
        d.set_item("filtered_enodes", st.filtered_enodes)?;
        d.set_item("applied", st.applied)?;
        d.set_item("rejected_type", st.rejected_type)?;
        d.set_item("rejected_cycle", st.rejected_cycle)?;
        d.set_item("merge_tree_applied", st.merge_tree_applied)?;
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

    /// The cheapest program under RLO's cost model (`crate::ks_cost`): `(cost, term)`,
    /// the term in the e-graph's s-expression text. `functions` maps a called function's
    /// name to the cost of calling it (besides the call overhead and the arguments).
    fn extract_rlo(&self, functions: std::collections::HashMap<String, f64>) -> (f64, String) {
        let (cost, expr) = crate::ks_cost::extract(&self.ex.egraph, self.ex.root, &functions);
        (cost, expr.to_string())
    }

    /// A term of the root chosen for shared sub-terms (`crate::ks_cost::extract_shared`:
    /// DAG-cost greedy extraction under RLO's per-node costs), as s-expression text, or
    /// `None`; the caller binds its repeated sub-terms and prices it.
    fn extract_rlo_shared(
        &self,
        functions: std::collections::HashMap<String, f64>,
    ) -> Option<String> {
        crate::ks_cost::extract_shared(&self.ex.egraph, self.ex.root, &functions)
            .map(|e| e.to_string())
    }

    /// Export for extraction (see the module docs): dense class ids, e-nodes with their
    /// class and child classes, the filter list and each class's analysis data.
    fn export<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        export_dict(py, &self.ex)
    }

    /// The canonical e-class of each of `ids` (e-class ids as in `export()["class_id"]`
    /// and in a policy's view).
    fn find(&self, ids: Vec<usize>) -> Vec<usize> {
        ids.into_iter()
            .map(|i| usize::from(self.ex.egraph.find(Id::from(i))))
            .collect()
    }

    /// Matches of each rule of `rules` in the current e-graph, in rule order, conditions
    /// checked, nothing applied; multi-pattern rules count only when `multi` (else 0), a
    /// mirror-symmetric one once per pair of e-classes.
    #[pyo3(signature = (rules, multi=false))]
    fn match_counts(&self, rules: &RuleSet, multi: bool) -> Vec<usize> {
        self.ex.match_counts(&rules.inner, multi)
    }

    /// Iterations run so far over the e-graph's life (all `saturate` calls).
    fn iterations_done(&self) -> usize {
        self.ex.iterations_done
    }
}

/// RLO's cost of a Knossos term given as a flat node list (see `EGraph`), with callee
/// costs `functions`; raises `ValueError` on an ill-typed term.
#[pyfunction]
fn rlo_cost(
    nodes: Vec<(String, Vec<usize>)>,
    functions: std::collections::HashMap<String, f64>,
) -> PyResult<f64> {
    let expr = flat_to_expr(&nodes)?;
    if let Some((i, msg)) = Explorer::type_errors(&expr) {
        return Err(PyValueError::new_err(format!("node {i}: {msg}")));
    }
    Ok(crate::ks_cost::cost_of(&expr, &functions))
}

/// The e-graph of `ex` for extraction: dense class ids (`class_id` gives each one's e-class
/// id), e-nodes with their class and child classes, the filter list and each class's
/// analysis data.
fn export_dict<'py>(py: Python<'py>, ex: &Explorer) -> PyResult<Bound<'py, PyDict>> {
    let eg = &ex.egraph;
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
            if ex.filter.contains(n) {
                filtered.push(node_op.len());
            }
            node_op.push(n.to_string());
            node_eclass.push(i);
            node_children.push(n.children().iter().map(|ch| index[&eg.find(*ch)]).collect());
        }
        let d = PyDict::new(py);
        match &c.data {
            Data::Int(v) => {
                d.set_item("kind", "int")?;
                d.set_item("value", v)?;
            }
            Data::Float(v) => {
                d.set_item("kind", "float")?;
                d.set_item("value", v)?;
            }
            Data::List(v) => {
                d.set_item("kind", "list")?;
                d.set_item("value", v.clone())?;
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
                d.set_item("dtype", p.0.dtype.name())?;
                d.set_item("constant", p.0.constant && p.1.constant)?;
            }
            Data::Ks(k) => {
                d.set_item("kind", "ks")?;
                d.set_item("type", k.ty.to_string())?;
            }
            Data::Invalid(e) => {
                d.set_item("kind", "invalid")?;
                d.set_item("value", e)?;
            }
        }
        classes.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("root", index[&eg.find(ex.root)])?;
    out.set_item("num_classes", index.len())?;
    out.set_item("node_op", node_op)?;
    out.set_item("node_eclass", node_eclass)?;
    out.set_item("node_children", node_children)?;
    out.set_item("filtered", filtered)?;
    out.set_item("classes", classes)?;
    let ids: Vec<usize> = eg.classes().map(|c| usize::from(c.id)).collect();
    out.set_item("class_id", ids)?;
    Ok(out)
}

/// A Python policy object driving [`Explorer::run_with`]; the first Python error raised by
/// it stops further applications and is re-raised after exploration.
struct PyPolicy<'py> {
    obj: Bound<'py, PyAny>,
    err: Option<PyErr>,
}

impl PyPolicy<'_> {
    fn call_bool(&mut self, name: &str, args: &[usize], default: bool) -> bool {
        if self.err.is_some() {
            return false;
        }
        match self.obj.getattr(name) {
            Err(_) => default,
            Ok(f) => match pyo3::types::PyTuple::new(self.obj.py(), args)
                .and_then(|a| f.call1(a))
                .and_then(|r| r.extract::<bool>())
            {
                Ok(b) => b,
                Err(e) => {
                    self.err = Some(e);
                    false
                }
            },
        }
    }

    fn view<'py>(
        &self,
        py: Python<'py>,
        ex: &Explorer,
        iteration: usize,
        found: &[Found],
        with_export: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let v = PyDict::new(py);
        v.set_item("iteration", iteration)?;
        v.set_item("enodes", ex.egraph.total_number_of_nodes())?;
        v.set_item("eclasses", ex.egraph.number_of_classes())?;
        v.set_item("rules", found.iter().map(|f| f.rule).collect::<Vec<_>>())?;
        let classes: Vec<Vec<usize>> = found
            .iter()
            .map(|f| f.classes.iter().map(|c| usize::from(*c)).collect())
            .collect();
        v.set_item("classes", classes)?;
        let substs: Vec<Vec<(String, usize)>> = found
            .iter()
            .map(|f| {
                f.subst
                    .iter()
                    .map(|(var, id)| (var.to_string(), usize::from(*id)))
                    .collect()
            })
            .collect();
        v.set_item("substs", substs)?;
        let new_nodes: Vec<i64> = found
            .iter()
            .map(|f| f.new_nodes.map_or(-1, |n| n as i64))
            .collect();
        v.set_item("new_nodes", new_nodes)?;
        v.set_item(
            "export",
            if with_export {
                Some(export_dict(py, ex)?)
            } else {
                None
            },
        )?;
        Ok(v)
    }
}

impl Policy for PyPolicy<'_> {
    fn search_multi(&mut self, iteration: usize, k_multi: usize) -> bool {
        self.call_bool("search_multi", &[iteration, k_multi], iteration < k_multi)
    }

    fn multi_rules(&mut self, iteration: usize) -> Option<Vec<usize>> {
        if self.err.is_some() {
            return None;
        }
        let f = self.obj.getattr("multi_rules").ok()?;
        match f
            .call1((iteration,))
            .and_then(|r| r.extract::<Option<Vec<usize>>>())
        {
            Ok(chosen) => chosen,
            Err(e) => {
                self.err = Some(e);
                Some(Vec::new())
            }
        }
    }

    fn selects(&mut self, iteration: usize) -> bool {
        self.call_bool("selects", &[iteration], false)
    }

    fn select(&mut self, ex: &Explorer, iteration: usize, found: &[Found]) -> Option<Vec<bool>> {
        if self.err.is_some() {
            return Some(vec![false; found.len()]);
        }
        let with_export = self.call_bool("wants_export", &[iteration], false);
        let py = self.obj.py();
        let res = self
            .view(py, ex, iteration, found, with_export)
            .and_then(|v| self.obj.call_method1("select", (v,)))
            .and_then(|r| r.extract::<Option<Vec<bool>>>());
        match res {
            Ok(Some(keep)) if keep.len() != found.len() => {
                self.err = Some(PyValueError::new_err(format!(
                    "policy.select returned {} flags for {} matches",
                    keep.len(),
                    found.len()
                )));
                Some(vec![false; found.len()])
            }
            Ok(keep) => keep,
            Err(e) => {
                self.err = Some(e);
                Some(vec![false; found.len()])
            }
        }
    }
}

/// Every one-step rewrite of a term (flat node list as for `EGraph`, root last) by the
/// single-pattern rules of `rules` (see `crate::term`): `[(rule index, pre-order position
/// of the rewritten node, new term as a flat node list)]`. Raises `ValueError` on an
/// ill-typed term.
#[pyfunction]
fn rewrites(
    nodes: Vec<(String, Vec<usize>)>,
    rules: &RuleSet,
) -> PyResult<Vec<(usize, usize, FlatTerm)>> {
    let expr = flat_to_expr(&nodes)?;
    if let Some((i, msg)) = Explorer::type_errors(&expr) {
        return Err(PyValueError::new_err(format!("node {i}: {msg}")));
    }
    Ok(crate::term::rewrites(&expr, &rules.inner)
        .into_iter()
        .map(|(r, p, e)| (r, p, expr_to_flat(&e)))
        .collect())
}

/// A program as a flat node list: `(op, children)` per node, root last.
type FlatTerm = Vec<(String, Vec<usize>)>;

/// A `RecExpr` as a flat node list (`(op, children)`, leaves by their text).
fn expr_to_flat(e: &RecExpr<Mdl>) -> FlatTerm {
    e.as_ref()
        .iter()
        .map(|n| {
            (
                n.to_string(),
                n.children().iter().map(|c| usize::from(*c)).collect(),
            )
        })
        .collect()
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
        let node = if children.is_empty() {
            egg::FromOp::from_op(op, vec![]).map_err(|e: crate::lang::ParseError| e.0)
        } else {
            Mdl::op(op, children.iter().map(|c| Id::from(*c)).collect())
        }
        .map_err(|e| PyValueError::new_err(format!("node {i} ({op}): {e}")))?;
        expr.add(node);
    }
    Ok(expr)
}

/// The Python module `tensat_py._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(signatures, m)?)?;
    m.add_function(wrap_pyfunction!(operators, m)?)?;
    m.add_function(wrap_pyfunction!(rlo_cost, m)?)?;
    m.add_function(wrap_pyfunction!(rewrites, m)?)?;
    m.add_class::<TypeChecker>()?;
    m.add_class::<RuleSet>()?;
    m.add_class::<EGraph>()?;
    crate::py_extract::register(m)?;
    Ok(())
}
