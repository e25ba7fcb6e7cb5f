//! The knossos dialect: the functional constructs of Knossos `.ks` programs (shared seed
//! 000; knossos-ksc `SYNTAX.md`), whose scalar arithmetic is the tensor dialect's operators
//! on rank-0 tensors (`Float` = float64, `Integer` = int64, `Bool` = bool).
//!
//! Variables are named: `(var x Float)` carries its name and its type (a type symbol,
//! [`KsType`]'s compact text: `Float`, `Vec<Float>`, `Tuple<Float,Integer>`,
//! `Tensor2<Float>`, `Unit`, `LM<Float,Float>`, `Lam<Integer,Float>`). Binders (`let`, `lam`) remove their variable from the free
//! variables of their body; every e-class knows its free variables ([`FreeVars`]), so
//! rules rewrite under binders soundly with explicit, capture-avoiding substitution
//! (conditions `free(?x, ?e)` / `not free(?x, ?e)`; see docs/knossos.md).
//!
//! `build`, `sumbuild`, `index` and `size` work on `Tensor N` (SYNTAX.md): the index of a
//! rank-1 tensor is an `Integer`, that of a rank-N tensor a `Tuple` of N `Integer`s.
//! `(ks_opaque key T operands...)` stands for a sub-term the front end does not translate
//! (kept by `key` in a side table, raised back as written); its operands are the
//! translated pieces and the free variables it uses, so that binders stay sound.
//!
//! ```
//! use _core::analysis::{Data, TensorAnalysis};
//! let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
//! let e = "(build (size (var v Vec<Float>)) (lam i Integer (mul (index (var i Integer) (var v Vec<Float>)) (var a Float))))";
//! let id = eg.add_expr(&e.parse().unwrap());
//! match &eg[id].data {
//!     Data::Ks(k) => {
//!         assert_eq!(k.ty.to_string(), "Vec<Float>");
//!         assert_eq!(k.free.iter().map(|s| s.to_string()).collect::<Vec<_>>(), ["a", "v"]);
//!     }
//!     d => panic!("{d:?}"),
//! }
//! ```

use super::{Arg, Dialect, OpDecl, Operands, Output};
use crate::analysis::{DType, Data, FreeVars, KsData, Tensor};
use egg::Symbol;
use std::fmt;
use Arg::{Int, Sym, Tensor as T};

/// RLO's `assumed_vector_size` (knossos-ksc `rlo/src/rlo/costs.py`): the length RLO's cost
/// model assumes for every vector (`sum` costs one less; a loop over a `Tensor N` runs
/// this to the N times).
pub const ASSUMED_VECTOR_SIZE: f64 = 16.0;

/// A Knossos type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KsType {
    /// `Float` (float64), `Integer` (int64) or `Bool`: rank-0 tensors in the analysis.
    Scalar(DType),
    /// `String`.
    Str,
    /// `Tensor N T` (`Vec T` is `Tensor 1 T`; compact text `Vec<T>`, `Tensor2<T>`...).
    Tensor(usize, Box<KsType>),
    /// The empty tuple `()` / `(Tuple)`.
    Unit,
    /// A linear map `LM S T` (ksc's derivatives; opaque here).
    Lm(Box<KsType>, Box<KsType>),
    /// `Tuple T...`.
    Tuple(Vec<KsType>),
    /// `Lam S T`.
    Lam(Box<KsType>, Box<KsType>),
}

impl KsType {
    /// Parse the compact text form (`Vec<Tuple<Float,Integer>>`).
    ///
    /// ```
    /// use _core::lang::knossos::KsType;
    /// let t = KsType::parse("Tuple<Vec<Float>,Integer>").unwrap();
    /// assert_eq!(t.to_string(), "Tuple<Vec<Float>,Integer>");
    /// assert!(KsType::parse("Vec<").is_none());
    /// ```
    pub fn parse(text: &str) -> Option<KsType> {
        let (t, rest) = Self::parse_prefix(text)?;
        rest.is_empty().then_some(t)
    }

    fn parse_prefix(text: &str) -> Option<(KsType, &str)> {
        let end = text.find(['<', ',', '>']).unwrap_or(text.len());
        let (head, rest) = text.split_at(end);
        let simple = match head {
            "Float" => Some(KsType::Scalar(DType::F64)),
            "Integer" => Some(KsType::Scalar(DType::I64)),
            "Bool" => Some(KsType::Scalar(DType::Bool)),
            "String" => Some(KsType::Str),
            "Unit" => Some(KsType::Unit),
            _ => None,
        };
        if let Some(t) = simple {
            return Some((t, rest));
        }
        let mut rest = rest.strip_prefix('<')?;
        let mut args = vec![];
        loop {
            let (t, r) = Self::parse_prefix(rest)?;
            args.push(t);
            if let Some(r) = r.strip_prefix(',') {
                rest = r;
            } else {
                rest = r.strip_prefix('>')?;
                break;
            }
        }
        let t = match (head, args.len()) {
            ("Vec", 1) => KsType::Tensor(1, Box::new(args.pop()?)),
            (h, 1) if h.starts_with("Tensor") => {
                let n: usize = h["Tensor".len()..].parse().ok()?;
                if n == 0 {
                    return None;
                }
                KsType::Tensor(n, Box::new(args.pop()?))
            }
            ("LM", 2) => {
                let r = args.pop()?;
                KsType::Lm(Box::new(args.pop()?), Box::new(r))
            }
            ("Tuple", _) => KsType::Tuple(args),
            ("Lam", 2) => {
                let r = args.pop()?;
                KsType::Lam(Box::new(args.pop()?), Box::new(r))
            }
            _ => return None,
        };
        Some((t, rest))
    }

    /// The index type of a rank-`n` tensor: `Integer`, or a `Tuple` of `n` `Integer`s.
    pub fn index_of_rank(n: usize) -> KsType {
        if n == 1 {
            INTEGER
        } else {
            KsType::Tuple(vec![INTEGER; n])
        }
    }

    /// The rank `n` of an index type (`Integer` 1, a tuple of `n` `Integer`s `n`).
    pub fn rank_of_index(&self) -> Option<usize> {
        match self {
            t if *t == INTEGER => Some(1),
            KsType::Tuple(ts) if ts.len() > 1 && ts.iter().all(|t| *t == INTEGER) => Some(ts.len()),
            _ => None,
        }
    }

    /// The type of analysis data: rank-0 tensors are scalars.
    pub fn of(d: &Data) -> Result<KsType, String> {
        match d {
            Data::Tensor(t) if t.shape.is_empty() => Ok(KsType::Scalar(t.dtype)),
            Data::Ks(k) => Ok(k.ty.clone()),
            d => Err(format!("not a Knossos value: {}", super::describe(d))),
        }
    }

    /// Analysis data of this type with free variables `free`.
    pub fn data(self, free: FreeVars) -> Data {
        match self {
            KsType::Scalar(dt) => {
                let mut t = Tensor::of(dt, vec![], false);
                t.free = free;
                Data::Tensor(t)
            }
            ty => Data::Ks(Box::new(KsData { ty, free })),
        }
    }

    /// Number of scalars in a value of this type, vectors counted as `avs` elements (RLO's
    /// `Type.num_elements(assumed_vector_size)`).
    pub fn num_elements(&self, avs: f64) -> f64 {
        match self {
            KsType::Tensor(n, e) => avs.powi(*n as i32) * e.num_elements(avs),
            KsType::Tuple(ts) => ts.iter().map(|t| t.num_elements(avs)).sum(),
            _ => 1.0,
        }
    }
}

impl fmt::Display for KsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KsType::Scalar(DType::F64) => f.write_str("Float"),
            KsType::Scalar(DType::I64) => f.write_str("Integer"),
            KsType::Scalar(DType::Bool) => f.write_str("Bool"),
            KsType::Scalar(d) => f.write_str(d.name()),
            KsType::Str => f.write_str("String"),
            KsType::Tensor(1, e) => write!(f, "Vec<{e}>"),
            KsType::Tensor(n, e) => write!(f, "Tensor{n}<{e}>"),
            KsType::Unit => f.write_str("Unit"),
            KsType::Lm(a, b) => write!(f, "LM<{a},{b}>"),
            KsType::Tuple(ts) => {
                let parts: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
                write!(f, "Tuple<{}>", parts.join(","))
            }
            KsType::Lam(a, b) => write!(f, "Lam<{a},{b}>"),
        }
    }
}

const fn op(
    name: &'static str,
    operands: &'static [Arg],
    variadic: Option<Arg>,
    infer: super::TypeRule,
    summary: &'static str,
) -> OpDecl {
    OpDecl {
        name,
        operands,
        variadic,
        output: Output::Tensor,
        infer,
        summary,
        rlo_cost: None,
    }
}

/// The knossos dialect.
pub static DIALECT: Dialect = Dialect {
    name: "knossos",
    ops: &[
        op(
            "var",
            &[Sym("name"), Sym("type")],
            None,
            var,
            "a variable of the given type",
        )
        .rlo(0.0),
        op(
            "let",
            &[Sym("name"), T("value"), T("body")],
            None,
            let_,
            "body with name bound to value",
        ),
        op(
            "lam",
            &[Sym("name"), Sym("type"), T("body")],
            None,
            lam,
            "the function name -> body",
        ),
        op(
            "build",
            &[T("n"), T("f")],
            None,
            build,
            "the vector [f 0, ..., f (n-1)]",
        ),
        op(
            "sumbuild",
            &[T("n"), T("f")],
            None,
            sumbuild,
            "f 0 + ... + f (n-1)",
        ),
        op(
            "index",
            &[T("i"), T("v")],
            None,
            index,
            "element i of vector v",
        )
        .rlo(1.0),
        op("size", &[T("v")], None, size, "length of vector v").rlo(1.0),
        op("sum", &[T("v")], None, sum, "sum of the elements of v").rlo(ASSUMED_VECTOR_SIZE - 1.0),
        op(
            "tuple",
            &[],
            Some(T("x")),
            tuple,
            "the tuple of the operands",
        ),
        op(
            "get",
            &[Int("i"), Int("n"), T("t")],
            None,
            get,
            "element i (1-based) of an n-tuple",
        )
        .rlo(0.0),
        op(
            "if",
            &[T("cond"), T("then"), T("else")],
            None,
            if_,
            "then if cond else else",
        ),
        op(
            "assert",
            &[T("cond"), T("body")],
            None,
            assert,
            "body, after checking cond",
        )
        .rlo(1.0),
        op(
            "call",
            &[Sym("name"), Sym("type")],
            Some(T("arg")),
            call,
            "a call of a user or prelude function returning type",
        ),
        op(
            "ks_opaque",
            &[Sym("key"), Sym("type")],
            Some(T("operand")),
            call,
            "an untranslated sub-term of the given type over its operands",
        ),
    ],
};

fn ks(a: &Operands, i: usize) -> Result<KsType, String> {
    a.ty(i)
}

fn free_union(a: &Operands, idx: &[usize]) -> FreeVars {
    FreeVars::union(idx.iter().map(|&i| a.data_at(i).free()))
}

fn ty_sym(a: &Operands, i: usize) -> Result<KsType, String> {
    let s = a.sym(i)?;
    KsType::parse(s.as_str()).ok_or_else(|| format!("`{s}` is not a Knossos type"))
}

fn var(a: &Operands) -> Result<Data, String> {
    let name = a.sym(0)?;
    Ok(ty_sym(a, 1)?.data(FreeVars::of([name])))
}

fn let_(a: &Operands) -> Result<Data, String> {
    let name: Symbol = a.sym(0)?;
    ks(a, 1)?;
    let body = ks(a, 2)?;
    let free = FreeVars::union([a.data_at(1).free(), &a.data_at(2).free().without(name)]);
    Ok(body.data(free))
}

fn lam(a: &Operands) -> Result<Data, String> {
    let name = a.sym(0)?;
    let arg = ty_sym(a, 1)?;
    let body = ks(a, 2)?;
    let free = a.data_at(2).free().without(name);
    Ok(KsType::Lam(Box::new(arg), Box::new(body)).data(free))
}

const INTEGER: KsType = KsType::Scalar(DType::I64);

/// The rank of a loop over `size` with body `f`, and the body's result type.
fn loop_body(a: &Operands) -> Result<(usize, KsType), String> {
    let n = ks(a, 0)?;
    let rank = n
        .rank_of_index()
        .ok_or_else(|| format!("size must be an Integer or a tuple of Integers, got {n}"))?;
    match ks(a, 1)? {
        KsType::Lam(arg, body) if *arg == n => Ok((rank, *body)),
        t => Err(format!("f must be a Lam<{n},_>, got {t}")),
    }
}

fn build(a: &Operands) -> Result<Data, String> {
    let (rank, body) = loop_body(a)?;
    Ok(KsType::Tensor(rank, Box::new(body)).data(free_union(a, &[0, 1])))
}

fn sumbuild(a: &Operands) -> Result<Data, String> {
    let (_, body) = loop_body(a)?;
    Ok(body.data(free_union(a, &[0, 1])))
}

fn elem(a: &Operands, i: usize) -> Result<(usize, KsType), String> {
    match ks(a, i)? {
        KsType::Tensor(n, e) => Ok((n, *e)),
        t => Err(format!("expected a Tensor, got {t}")),
    }
}

fn index(a: &Operands) -> Result<Data, String> {
    let (rank, e) = elem(a, 1)?;
    let want = KsType::index_of_rank(rank);
    if ks(a, 0)? != want {
        return Err(format!("index must be {want}, got {}", ks(a, 0)?));
    }
    Ok(e.data(free_union(a, &[0, 1])))
}

fn size(a: &Operands) -> Result<Data, String> {
    let (rank, _) = elem(a, 0)?;
    Ok(KsType::index_of_rank(rank).data(free_union(a, &[0])))
}

fn sum(a: &Operands) -> Result<Data, String> {
    Ok(elem(a, 0)?.1.data(free_union(a, &[0])))
}

fn tuple(a: &Operands) -> Result<Data, String> {
    let ts: Result<Vec<KsType>, String> = (0..a.len()).map(|i| ks(a, i)).collect();
    let all: Vec<usize> = (0..a.len()).collect();
    Ok(KsType::Tuple(ts?).data(free_union(a, &all)))
}

fn get(a: &Operands) -> Result<Data, String> {
    let (i, n) = (a.int(0)?, a.int(1)?);
    match ks(a, 2)? {
        KsType::Tuple(ts) if ts.len() as i64 == n && (1..=n).contains(&i) => {
            Ok(ts[(i - 1) as usize].clone().data(free_union(a, &[2])))
        }
        t => Err(format!("get${i}${n} of {t}")),
    }
}

fn if_(a: &Operands) -> Result<Data, String> {
    if ks(a, 0)? != KsType::Scalar(DType::Bool) {
        return Err(format!("condition must be Bool, got {}", ks(a, 0)?));
    }
    let (x, y) = (ks(a, 1)?, ks(a, 2)?);
    if x != y {
        return Err(format!("branches differ: {x} and {y}"));
    }
    Ok(x.data(free_union(a, &[0, 1, 2])))
}

fn assert(a: &Operands) -> Result<Data, String> {
    if ks(a, 0)? != KsType::Scalar(DType::Bool) {
        return Err(format!("condition must be Bool, got {}", ks(a, 0)?));
    }
    Ok(ks(a, 1)?.data(free_union(a, &[0, 1])))
}

/// `call` and `opaque`: the declared type over any Knossos operands.
fn call(a: &Operands) -> Result<Data, String> {
    let ret = ty_sym(a, 1)?;
    for i in 2..a.len() {
        ks(a, i)?;
    }
    let args: Vec<usize> = (2..a.len()).collect();
    Ok(ret.data(free_union(a, &args)))
}

#[cfg(test)]
mod tests {
    use crate::analysis::{Data, TensorAnalysis};
    use crate::lang::Mdl;

    fn data(s: &str) -> Data {
        let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
        let id = eg.add_expr(&s.parse().unwrap());
        eg[id].data.clone()
    }

    fn free(s: &str) -> Vec<String> {
        data(s).free().iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn let_binds_its_variable_in_the_body_only() {
        assert_eq!(
            free("(let x (var x Float) (add (var x Float) (var y Float)))"),
            ["x", "y"]
        );
        assert_eq!(
            free("(let x (var z Float) (add (var x Float) (var y Float)))"),
            ["y", "z"]
        );
    }

    #[test]
    fn lam_binds_and_build_types_a_vector() {
        assert_eq!(
            free("(lam i Integer (var i Integer))"),
            Vec::<String>::new()
        );
        match data("(build (scalar 3.0 int64) (lam i Integer (cast (var i Integer) float64)))") {
            Data::Ks(k) => assert_eq!(k.ty.to_string(), "Vec<Float>"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn ill_typed_knossos_terms_are_invalid() {
        assert!(matches!(
            data("(index (scalar 1.0 float64) (var v Vec<Float>))"),
            Data::Invalid(_)
        ));
        assert!(matches!(
            data("(if (var p Bool) (var a Float) (var b Integer))"),
            Data::Invalid(_)
        ));
        assert!(matches!(
            data("(get 3 2 (tuple (var a Float) (var b Float)))"),
            Data::Invalid(_)
        ));
    }

    #[test]
    fn tensor_n_loops_index_with_tuples_of_integers() {
        let m = "(build (tuple (scalar 2.0 int64) (scalar 3.0 int64)) (lam ij Tuple<Integer,Integer> (scalar 1.0 float64)))";
        match data(m) {
            Data::Ks(k) => assert_eq!(k.ty.to_string(), "Tensor2<Float>"),
            d => panic!("{d:?}"),
        }
        match data("(size (var m Tensor2<Float>))") {
            Data::Ks(k) => assert_eq!(k.ty.to_string(), "Tuple<Integer,Integer>"),
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            data("(index (scalar 1.0 int64) (var m Tensor2<Float>))"),
            Data::Invalid(_)
        ));
        let ok = "(index (tuple (scalar 1.0 int64) (scalar 0.0 int64)) (var m Tensor2<Float>))";
        assert!(matches!(data(ok), Data::Tensor(_)));
    }

    #[test]
    fn opaque_terms_carry_the_free_variables_of_their_operands() {
        assert_eq!(
            free("(ks_opaque o$1 Tensor2<Float> (var m Tensor2<Float>) (var x Float))"),
            ["m", "x"]
        );
        assert_eq!(
            free("(let x (var y Float) (ks_opaque o$1 Unit (var x Float)))"),
            ["y"]
        );
    }

    #[test]
    fn scalar_arithmetic_is_the_tensor_dialect_on_rank0() {
        match data("(add (var a Float) (mul (var b Float) (scalar 2.0 float64)))") {
            Data::Tensor(t) => {
                assert!(t.shape.is_empty());
                assert_eq!(t.dtype.name(), "float64");
                assert_eq!(t.free.iter().count(), 2);
            }
            d => panic!("{d:?}"),
        }
    }
}
