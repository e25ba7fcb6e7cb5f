//! The open e-graph language of tensat-py.
//!
//! One e-node type, [`Mdl`], for every program: an operator application
//! ([`Mdl::Op`]: an [`Op`] and its children) or a parameter leaf (integer, float, integer
//! list, symbol). Operators are not variants of an enum: each is *declared once*, as an
//! [`OpDecl`] (name, ordered operands, output kind, type rule), in the module of its
//! dialect ([`taso`]: Tensat's TASO operators; [`tensor`]: general tensor operators with
//! NumPy/ONNX broadcasting), and found by its name through [`Op::lookup`]. Adding an
//! operator means adding one declaration there (docs/language.md, "Adding an operator").
//!
//! Text form (egg s-expressions, the rule DSL and Python's flat form): an integer leaf is
//! `3`, a float leaf always shows a `.`, an exponent or `inf` (`0.5`, `1e-05`, `-inf`), a
//! list leaf is `[1,0,2]` (no spaces), any other token is a symbol (`x@2_3`, `float16`).
//!
//! ```
//! use _core::lang::Mdl;
//! let expr: egg::RecExpr<Mdl> = "(transpose (input x@2_3:float16) [1,0])".parse().unwrap();
//! assert_eq!(expr.as_ref().len(), 4);
//! assert_eq!(expr.to_string(), "(transpose (input x@2_3:float16) [1,0])");
//! ```

pub mod hlo;
pub mod knossos;
pub mod taso;
pub mod tensor;

use crate::analysis::{DType, Data, Tensor};
use egg::{FromOp, Id, Language, Symbol};
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// The kind of one operand of an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// An integer parameter leaf (its name).
    Int(&'static str),
    /// A float parameter leaf.
    Float(&'static str),
    /// An integer-list parameter leaf (axes, permutations, shapes, pads).
    List(&'static str),
    /// A symbol parameter leaf (names, dtypes, modes).
    Sym(&'static str),
    /// A tensor operand.
    Tensor(&'static str),
    /// A split pair operand (only `split_0` / `split_1` take one).
    Pair(&'static str),
}

impl Arg {
    /// The operand's name.
    pub fn name(self) -> &'static str {
        match self {
            Arg::Int(n) | Arg::Float(n) | Arg::List(n) | Arg::Sym(n) | Arg::Tensor(n) => n,
            Arg::Pair(n) => n,
        }
    }
    /// The kind as Python sees it: `"int" | "float" | "list" | "sym" | "tensor" | "pair"`.
    pub fn kind(self) -> &'static str {
        match self {
            Arg::Int(_) => "int",
            Arg::Float(_) => "float",
            Arg::List(_) => "list",
            Arg::Sym(_) => "sym",
            Arg::Tensor(_) => "tensor",
            Arg::Pair(_) => "pair",
        }
    }
    /// Whether this operand is a parameter leaf (not a tensor or pair).
    pub fn is_param(self) -> bool {
        !matches!(self, Arg::Tensor(_) | Arg::Pair(_))
    }
}

/// What an operator yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A tensor.
    Tensor,
    /// A pair of tensors (`split`).
    Pair,
}

/// The children's analysis data of one e-node, with typed accessors for type rules.
///
/// Accessor errors name the operand and what was found; [`crate::analysis::infer`] adds
/// the operator's name in front.
pub struct Operands<'a> {
    decl: &'static OpDecl,
    data: &'a [&'a Data],
}

impl<'a> Operands<'a> {
    /// Wrap the children's data of an application of `decl`.
    pub fn new(decl: &'static OpDecl, data: &'a [&'a Data]) -> Self {
        Operands { decl, data }
    }
    /// The operator's name.
    pub fn op_name(&self) -> &'static str {
        self.decl.name
    }
    /// Number of children.
    pub fn len(&self) -> usize {
        self.data.len()
    }
    /// True when there are no children.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    fn arg_name(&self, i: usize) -> &'static str {
        self.decl
            .operands
            .get(i)
            .or(self.decl.variadic.as_ref())
            .map_or("operand", |a| a.name())
    }
    fn wrong(&self, i: usize, want: &str) -> String {
        format!(
            "operand `{}` must be {want}, got {}",
            self.arg_name(i),
            describe(self.data[i])
        )
    }
    /// Integer parameter `i`.
    pub fn int(&self, i: usize) -> Result<i64, String> {
        match self.data[i] {
            Data::Int(v) => Ok(*v),
            _ => Err(self.wrong(i, "an integer parameter")),
        }
    }
    /// Float parameter `i` (an integer literal is accepted as a float).
    pub fn float(&self, i: usize) -> Result<f64, String> {
        match self.data[i] {
            Data::Float(v) => Ok(*v),
            Data::Int(v) => Ok(*v as f64),
            _ => Err(self.wrong(i, "a float parameter")),
        }
    }
    /// Integer-list parameter `i`.
    pub fn list(&self, i: usize) -> Result<&'a [i64], String> {
        match self.data[i] {
            Data::List(v) => Ok(v),
            _ => Err(self.wrong(i, "an integer-list parameter")),
        }
    }
    /// Symbol parameter `i`.
    pub fn sym(&self, i: usize) -> Result<Symbol, String> {
        match self.data[i] {
            Data::Sym(s) => Ok(*s),
            _ => Err(self.wrong(i, "a symbol parameter")),
        }
    }
    /// A dtype named by symbol parameter `i`.
    pub fn dtype(&self, i: usize) -> Result<DType, String> {
        let s = self.sym(i)?;
        DType::parse(s.as_str()).ok_or_else(|| {
            format!(
                "`{s}` is not a dtype (one of {})",
                DType::ALL.map(|d| d.name()).join(", ")
            )
        })
    }
    /// Tensor operand `i`.
    pub fn tensor(&self, i: usize) -> Result<&'a Tensor, String> {
        match self.data[i] {
            Data::Tensor(t) => Ok(t),
            _ => Err(self.wrong(i, "a tensor")),
        }
    }
    /// Split-pair operand `i`.
    pub fn pair(&self, i: usize) -> Result<&'a (Tensor, Tensor), String> {
        match self.data[i] {
            Data::Pair(p) => Ok(p),
            _ => Err(self.wrong(i, "a split pair")),
        }
    }
    /// The data of operand `i`.
    pub fn data_at(&self, i: usize) -> &'a Data {
        self.data[i]
    }
    /// The Knossos type of operand `i` (rank-0 tensors are scalars).
    pub fn ty(&self, i: usize) -> Result<knossos::KsType, String> {
        knossos::KsType::of(self.data[i]).map_err(|_| self.wrong(i, "a Knossos value"))
    }
    /// Tensor operands `from..`.
    pub fn tensors(&self, from: usize) -> Result<Vec<&'a Tensor>, String> {
        (from..self.len()).map(|i| self.tensor(i)).collect()
    }
}

/// Describe analysis data for error messages (`tensor [2, 3] float32`, `integer 3`).
pub fn describe(d: &Data) -> String {
    match d {
        Data::Int(v) => format!("integer {v}"),
        Data::Float(v) => format!("float {v:?}"),
        Data::List(v) => format!("list {v:?}"),
        Data::Sym(s) => format!("symbol `{s}`"),
        Data::Tensor(t) => format!("tensor {:?} {}", t.shape, t.dtype.name()),
        Data::Pair(_) => "a split pair".into(),
        Data::Ks(k) => format!("Knossos {}", k.ty),
        Data::Invalid(e) => format!("an ill-typed operand ({e})"),
    }
}

/// A type rule: the output data of an application from its operands, or an error message
/// (without the operator's name, which the caller adds).
pub type TypeRule = fn(&Operands) -> Result<Data, String>;

/// The declaration of one operator: its one place in the Rust layer.
#[derive(Debug)]
pub struct OpDecl {
    /// Name in the language (`"matmul"`), unique across dialects.
    pub name: &'static str,
    /// Operands in e-node child order.
    pub operands: &'static [Arg],
    /// Any number of further operands of this kind (only `opaque`).
    pub variadic: Option<Arg>,
    /// Tensor or pair.
    pub output: Output,
    /// The type rule (shape, dtype, constant flag, split positions).
    pub infer: TypeRule,
    /// One line: what it computes (the full reference is docs/language.md).
    pub summary: &'static str,
    /// RLO's cost of one application besides its operands' costs, for the operators RLO
    /// prices that way (knossos-ksc `rlo/src/rlo/costs.py`; read by `crate::ks_cost`);
    /// `None` for operators priced otherwise (binders, calls) or not priced by RLO.
    pub rlo_cost: Option<f64>,
}

impl OpDecl {
    /// This declaration with RLO's cost of one application (see [`OpDecl::rlo_cost`]).
    ///
    /// ```
    /// assert_eq!(_core::lang::decl("mul").and_then(|d| d.rlo_cost), Some(2.0));
    /// assert_eq!(_core::lang::decl("matmul").and_then(|d| d.rlo_cost), None);
    /// ```
    pub const fn rlo(self, cost: f64) -> OpDecl {
        OpDecl {
            rlo_cost: Some(cost),
            ..self
        }
    }
}

/// A tensor-valued declaration without a variadic operand (the common case in the
/// dialect tables).
pub(crate) const fn op(
    name: &'static str,
    operands: &'static [Arg],
    infer: TypeRule,
    summary: &'static str,
) -> OpDecl {
    OpDecl {
        name,
        operands,
        variadic: None,
        output: Output::Tensor,
        infer,
        summary,
        rlo_cost: None,
    }
}

/// Helpers for the dialects' type-rule tests: the analysis data of an s-expression.
#[cfg(test)]
pub(crate) mod testing {
    use crate::analysis::{Data, TensorAnalysis};
    use crate::lang::Mdl;

    /// The e-class data of `s` added to a fresh e-graph.
    pub fn type_of(s: &str) -> Data {
        let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
        let id = eg.add_expr(&s.parse().unwrap());
        eg[id].data.clone()
    }

    /// The shape of tensor term `s` (panics when it is not a tensor).
    pub fn shape(s: &str) -> Vec<usize> {
        match type_of(s) {
            Data::Tensor(t) => t.shape,
            d => panic!("{s}: {d:?}"),
        }
    }

    /// The type error of ill-typed term `s` (panics when it type-checks).
    pub fn error(s: &str) -> String {
        match type_of(s) {
            Data::Invalid(e) => e,
            d => panic!("{s} type-checks: {d:?}"),
        }
    }
}

/// A group of operators (as MLIR groups operators in dialects).
#[derive(Debug)]
pub struct Dialect {
    /// `"taso"`, `"tensor"`, ...
    pub name: &'static str,
    /// Its operators.
    pub ops: &'static [OpDecl],
}

/// Every dialect of the language, in registry order.
pub const DIALECTS: &[&Dialect] = &[
    &taso::DIALECT,
    &tensor::DIALECT,
    &knossos::DIALECT,
    &hlo::DIALECT,
];

struct Registry {
    decls: Vec<(&'static Dialect, &'static OpDecl)>,
    by_name: HashMap<&'static str, Op>,
}

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut decls = Vec::new();
        let mut by_name = HashMap::new();
        for d in DIALECTS {
            for op in d.ops {
                let prev = by_name.insert(op.name, Op(decls.len() as u16));
                assert!(prev.is_none(), "operator `{}` declared twice", op.name);
                decls.push((*d, op));
            }
        }
        Registry { decls, by_name }
    })
}

/// An operator: a handle on its [`OpDecl`] (cheap to copy, hash and compare).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u16);

impl Op {
    /// The operator named `name`, if one is declared.
    ///
    /// ```
    /// assert!(_core::lang::Op::lookup("relu").is_some());
    /// assert!(_core::lang::Op::lookup("frobnicate").is_none());
    /// ```
    pub fn lookup(name: &str) -> Option<Op> {
        registry().by_name.get(name).copied()
    }
    /// Its declaration.
    pub fn decl(self) -> &'static OpDecl {
        registry().decls[self.0 as usize].1
    }
    /// The dialect declaring it.
    pub fn dialect(self) -> &'static Dialect {
        registry().decls[self.0 as usize].0
    }
    /// Its name.
    pub fn name(self) -> &'static str {
        self.decl().name
    }
    /// Every declared operator, dialect by dialect.
    pub fn all() -> impl Iterator<Item = Op> {
        (0..registry().decls.len()).map(|i| Op(i as u16))
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The declaration of operator `name`, if any.
///
/// ```
/// assert_eq!(_core::lang::decl("matmul").unwrap().operands.len(), 3);
/// ```
pub fn decl(name: &str) -> Option<&'static OpDecl> {
    Op::lookup(name).map(Op::decl)
}

/// A float parameter as its bit pattern (total order and hashing for e-nodes); never NaN,
/// and `-0.0` is stored as `0.0`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Float(u64);

impl Float {
    /// Wrap `v`; `None` for NaN.
    pub fn new(v: f64) -> Option<Float> {
        if v.is_nan() {
            None
        } else if v == 0.0 {
            Some(Float(0.0f64.to_bits()))
        } else {
            Some(Float(v.to_bits()))
        }
    }
    /// The value.
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl fmt::Debug for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` always shows a `.`, an exponent or `inf`, so it never reads as an integer.
        write!(f, "{:?}", self.get())
    }
}

/// An e-node: an operator application or a parameter leaf.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mdl {
    /// `(op child ...)`.
    Op(Op, Box<[Id]>),
    /// An integer parameter.
    Num(i64),
    /// A float parameter.
    Float(Float),
    /// An integer-list parameter (`[1,0,2]`).
    List(Box<[i64]>),
    /// A symbol parameter (`name@shape[:dtype]`, a dtype name, a mode).
    Var(Symbol),
}

/// What [`Mdl`] e-nodes are grouped by in an e-class (egg's discriminant).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Disc {
    /// An operator application.
    Op(Op),
    /// An integer leaf.
    Num(i64),
    /// A float leaf.
    Float(Float),
    /// A list leaf.
    List(Box<[i64]>),
    /// A symbol leaf.
    Var(Symbol),
}

impl Mdl {
    /// `(name children...)`; errors on an unknown operator or a wrong number of children.
    ///
    /// ```
    /// use egg::Id;
    /// assert!(_core::lang::Mdl::op("relu", vec![Id::from(0)]).is_ok());
    /// assert!(_core::lang::Mdl::op("relu", vec![]).is_err());
    /// ```
    pub fn op(name: &str, children: Vec<Id>) -> Result<Mdl, String> {
        let op = Op::lookup(name).ok_or_else(|| format!("unknown operator `{name}`"))?;
        let d = op.decl();
        let n = d.operands.len();
        let ok = children.len() == n || (d.variadic.is_some() && children.len() >= n);
        if !ok {
            let names: Vec<&str> = d.operands.iter().map(|a| a.name()).collect();
            return Err(format!(
                "`{name}` takes {}{n} operand{} ({}), got {}",
                if d.variadic.is_some() {
                    "at least "
                } else {
                    ""
                },
                if n == 1 { "" } else { "s" },
                names.join(", "),
                children.len()
            ));
        }
        Ok(Mdl::Op(op, children.into_boxed_slice()))
    }

    /// The operator, for applications.
    pub fn operator(&self) -> Option<Op> {
        match self {
            Mdl::Op(op, _) => Some(*op),
            _ => None,
        }
    }

    /// Whether this is an application of the operator named `name`.
    pub fn is_op(&self, name: &str) -> bool {
        self.operator().is_some_and(|o| o.name() == name)
    }

    /// Parse a leaf token: integer, float, `[list]` or symbol.
    ///
    /// ```
    /// use _core::lang::Mdl;
    /// assert_eq!(Mdl::leaf("3").unwrap(), Mdl::Num(3));
    /// assert!(matches!(Mdl::leaf("[1,0]").unwrap(), Mdl::List(_)));
    /// assert!(matches!(Mdl::leaf("1e-05").unwrap(), Mdl::Float(_)));
    /// assert!(matches!(Mdl::leaf("float16").unwrap(), Mdl::Var(_)));
    /// assert!(Mdl::leaf("[1,a]").is_err());
    /// ```
    pub fn leaf(text: &str) -> Result<Mdl, String> {
        if let Ok(v) = text.parse::<i64>() {
            return Ok(Mdl::Num(v));
        }
        if let Some(inner) = text.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| format!("list `{text}` has no closing `]`"))?;
            let items: Result<Vec<i64>, _> = if inner.trim().is_empty() {
                Ok(vec![])
            } else {
                inner.split(',').map(|s| s.trim().parse::<i64>()).collect()
            };
            return items
                .map(|v| Mdl::List(v.into_boxed_slice()))
                .map_err(|_| format!("list `{text}` must hold integers: `[1,0,2]`"));
        }
        let looks_float = text.contains(['.', 'e', 'E']) || text.ends_with("inf");
        if looks_float {
            if let Ok(v) = text.parse::<f64>() {
                return Float::new(v)
                    .map(Mdl::Float)
                    .ok_or_else(|| format!("float `{text}` is NaN"));
            }
        }
        Ok(Mdl::Var(Symbol::from(text)))
    }
}

impl Language for Mdl {
    type Discriminant = Disc;

    fn discriminant(&self) -> Disc {
        match self {
            Mdl::Op(op, _) => Disc::Op(*op),
            Mdl::Num(v) => Disc::Num(*v),
            Mdl::Float(v) => Disc::Float(*v),
            Mdl::List(v) => Disc::List(v.clone()),
            Mdl::Var(s) => Disc::Var(*s),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        match (self, other) {
            (Mdl::Op(a, x), Mdl::Op(b, y)) => a == b && x.len() == y.len(),
            (Mdl::Num(a), Mdl::Num(b)) => a == b,
            (Mdl::Float(a), Mdl::Float(b)) => a == b,
            (Mdl::List(a), Mdl::List(b)) => a == b,
            (Mdl::Var(a), Mdl::Var(b)) => a == b,
            _ => false,
        }
    }

    fn children(&self) -> &[Id] {
        match self {
            Mdl::Op(_, c) => c,
            _ => &[],
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Mdl::Op(_, c) => c,
            _ => &mut [],
        }
    }
}

impl fmt::Display for Mdl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mdl::Op(op, _) => f.write_str(op.name()),
            Mdl::Num(v) => write!(f, "{v}"),
            Mdl::Float(v) => write!(f, "{v:?}"),
            Mdl::List(v) => {
                let items: Vec<String> = v.iter().map(|i| i.to_string()).collect();
                write!(f, "[{}]", items.join(","))
            }
            Mdl::Var(s) => write!(f, "{s}"),
        }
    }
}

/// Error of [`FromOp`]: the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromOp for Mdl {
    type Error = ParseError;

    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, Self::Error> {
        if children.is_empty() && Op::lookup(op).is_none_or(|o| !o.decl().operands.is_empty()) {
            Mdl::leaf(op).map_err(ParseError)
        } else {
            Mdl::op(op, children).map_err(ParseError)
        }
    }
}

/// Parse a `d0_d1_...` dimension list (the part after `@` in `input`/`weight`/`opaque`
/// symbols). Returns `None` on a malformed list.
///
/// ```
/// assert_eq!(_core::lang::parse_dims("64_1024"), Some(vec![64, 1024]));
/// assert_eq!(_core::lang::parse_dims("a_b"), None);
/// ```
pub fn parse_dims(text: &str) -> Option<Vec<usize>> {
    if text.is_empty() {
        return Some(vec![]);
    }
    text.split('_').map(|d| d.parse().ok()).collect()
}

/// Parse a leaf type symbol `name@d0_d1[:dtype]` into its dtype and shape (float32 when
/// no dtype is given).
///
/// ```
/// use _core::analysis::DType;
/// assert_eq!(_core::lang::parse_leaf_type("x@2_3"), Some((DType::F32, vec![2, 3])));
/// assert_eq!(_core::lang::parse_leaf_type("i@:int64"), Some((DType::I64, vec![])));
/// assert_eq!(_core::lang::parse_leaf_type("x"), None);
/// ```
pub fn parse_leaf_type(text: &str) -> Option<(DType, Vec<usize>)> {
    let (_, ty) = text.rsplit_once('@')?;
    let (dims, dtype) = match ty.split_once(':') {
        Some((d, t)) => (d, DType::parse(t)?),
        None => (ty, DType::F32),
    };
    Some((dtype, parse_dims(dims)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_name_is_unique_and_found() {
        let mut n = 0;
        for d in DIALECTS {
            for op in d.ops {
                let found = Op::lookup(op.name).expect("declared");
                assert_eq!(found.name(), op.name);
                assert_eq!(found.dialect().name, d.name);
                n += 1;
            }
        }
        assert_eq!(Op::all().count(), n);
    }

    #[test]
    fn leaves_print_as_they_parse() {
        for text in [
            "3",
            "-1",
            "[1,0,2]",
            "[]",
            "0.5",
            "1e-5",
            "-inf",
            "x@2_3:float16",
        ] {
            let leaf = Mdl::leaf(text).unwrap();
            assert_eq!(Mdl::leaf(&leaf.to_string()).unwrap(), leaf, "{text}");
        }
        assert_eq!(Mdl::leaf("1.0").unwrap().to_string(), "1.0");
    }

    #[test]
    fn wrong_arity_names_the_operands() {
        let e = Mdl::op("matmul", vec![Id::from(0)]).unwrap_err();
        assert!(e.contains("act, a, b"), "{e}");
    }
}
