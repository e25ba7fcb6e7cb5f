//! The rule DSL: rewrite rules in text files, parsed into egg patterns plus conditions.
//!
//! ```text
//! # comment
//! name: source => target                      # one direction
//! name: source <=> target                     # both: `name` and `name-rev`
//! name: src1, src2 => tgt1, tgt2              # multi-pattern (shared variables)
//! name: source => target if dim(?x, 1) == 2 * dim(?w, 1) and const(?w)
//! ```
//!
//! Patterns are s-expressions over [`crate::lang::Mdl`] with `?variables`, integer and
//! symbol literals; operators, arity and operand kinds are checked against
//! the operators' declarations ([`crate::lang::OpDecl`]). Conditions are described in [`cond`]. A rule continues on
//! the next line when that line starts with whitespace or while a parenthesis is open.
//! Every error reads `file:line:col: message`. The full reference is `docs/rules.md`.
//!
//! ```
//! let rs = _core::rules::parse(
//!     "ewadd-comm: (ewadd ?a ?b) <=> (ewadd ?b ?a)\n\
//!      fuse: (relu ?x), (relu ?y)\n  => (split_0 (split 0 (relu (concat 0 2 ?x ?y)))),\n     \
//!      (split_1 (split 0 (relu (concat 0 2 ?x ?y))))",
//!     "doc.rules",
//! ).unwrap();
//! assert_eq!(rs.names(), ["ewadd-comm", "ewadd-comm-rev", "fuse"]);
//! assert!(rs.rules[2].is_multi());
//! let err = _core::rules::parse("bad: (relu ?x ?y) => ?x", "doc.rules").unwrap_err();
//! assert_eq!(err.to_string(), "doc.rules:1:7: wrong arity: `relu` takes 1 operand (x), got 2");
//! ```

pub mod cond;
mod pattern;
mod text;

pub use cond::{Cmp, Condition, Expr};

use crate::analysis::{Data, TensorAnalysis};
use crate::lang::{Float, Mdl};
use egg::{EGraph, ENodeOrVar, Language, Pattern, Subst, Var};
use pattern::{parse_pattern, Vars};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use text::{end_pos, find_top, split_commas, trim, Ch, Kind, Pos};

/// A rule-file error, displayed as `file:line:col: message` (1-based line and column).
///
/// ```
/// let e = _core::rules::parse("r: (frob ?x) => ?x", "my.rules").unwrap_err();
/// assert_eq!(e.to_string(), "my.rules:1:5: unknown operator `frob`");
/// assert_eq!((e.line, e.col), (1, 5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The file name given to [`parse`] (or the path given to [`load`]).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What is wrong.
    pub message: String,
}

impl RuleError {
    pub(crate) fn at(file: &str, pos: Pos, message: impl Into<String>) -> RuleError {
        RuleError {
            file: file.to_string(),
            line: pos.line,
            col: pos.col,
            message: message.into(),
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for RuleError {}

/// One directed rewrite rule: single-pattern (one source, one target) or multi-pattern
/// (n sources sharing variables, n targets; target i is unioned with the match of
/// source i). A `<=>` rule in the file yields two `Rule`s, `name` and `name-rev`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule's name (`name-rev` for the right-to-left half of a `<=>` rule).
    pub name: String,
    /// Source patterns, searched in the e-graph.
    pub sources: Vec<Pattern<Mdl>>,
    /// Target patterns, one per source, instantiated with the combined substitution.
    pub targets: Vec<Pattern<Mdl>>,
    /// Conditions that must all hold ([`Rule::check`]).
    pub conditions: Vec<Condition>,
    /// 1-based line where the rule starts in its file.
    pub line: usize,
    /// A target leaf computed from the match (constant folding, [`constant_folding`]; a
    /// matched tensor's shape, [`layout_rules`]); `None` for every rule read from a file.
    pub fold: Option<Fold>,
}

/// The arithmetic a [`Fold`] evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (never for a zero divisor).
    Div,
    /// `a == b`, a Bool literal (`1.0` true, `0.0` false).
    Eq,
    /// `a > b`, a Bool literal.
    Gt,
    /// `a >= b`, a Bool literal.
    Gte,
    /// `ln a` (`b` unused; never for `a <= 0`).
    Log,
    /// `e^a` (`b` unused; never when it overflows).
    Exp,
    /// Not arithmetic: `out` is bound to the Knossos type of the term matched by `a`, a
    /// type symbol such as `Float` or `Vec<Float>` (`b`, `integral`, `single` unused):
    /// RLO's `cse_bind` renames a variable to another of that type.
    TypeOf,
    /// Not arithmetic: `out` is bound to the shape of the tensor matched by `a`, an
    /// integer-list leaf ([`Mdl::List`]); `b`, `integral` and `single` are unused
    /// ([`layout_rules`] binds a `resize`'s sizes to the shape of the tensor it matches).
    ShapeOf,
}

impl FoldOp {
    fn name(self) -> &'static str {
        match self {
            FoldOp::Add => "add",
            FoldOp::Sub => "sub",
            FoldOp::Mul => "mul",
            FoldOp::Div => "div",
            FoldOp::Eq => "equal",
            FoldOp::Gt => "greater",
            FoldOp::Gte => "greater_equal",
            FoldOp::Log => "log",
            FoldOp::Exp => "exp",
            FoldOp::TypeOf => "type_of",
            FoldOp::ShapeOf => "shape_of",
        }
    }
}

/// A computed target leaf. Constant folding: `out` is bound, when the rule applies, to a
/// float leaf holding `op` of the float leaves matched by `a` and `b`. RLO's
/// `cprop_add`, `cprop_sub`, `cprop_mul` and `cprop_div` (knossos-ksc
/// `rlo/src/rlo/rewrites.py`) fold such pairs of constants. With [`FoldOp::ShapeOf`]
/// ([`Fold::shape_of`]), `out` is bound to the shape of the tensor matched by `a`.
#[derive(Debug, Clone)]
pub struct Fold {
    /// The operation.
    pub op: FoldOp,
    /// Left operand variable (bound by the source to a float leaf).
    pub a: Var,
    /// Right operand variable.
    pub b: Var,
    /// The target variable the folded leaf is bound to.
    pub out: Var,
    /// Whether the result must be an integer (an `int64` scalar).
    pub integral: bool,
    /// Whether the result is rounded to single precision (a `float32` scalar): the
    /// correctly rounded `float32` result, as onnxruntime computes it, since `f64` holds
    /// the exact sum, difference, product or quotient of two `f32` values to more than
    /// twice `f32`'s precision.
    pub single: bool,
}

impl Fold {
    /// A [`FoldOp::ShapeOf`] leaf: `out` bound to the shape of the tensor matched by `a`.
    ///
    /// ```
    /// let f = _core::rules::Fold::shape_of("?x", "?s");
    /// assert_eq!(f.op, _core::rules::FoldOp::ShapeOf);
    /// ```
    pub fn shape_of(a: &str, out: &str) -> Fold {
        let a: Var = a.parse().expect("shape_of: a `?variable`");
        Fold {
            op: FoldOp::ShapeOf,
            a,
            b: a,
            out: out.parse().expect("shape_of: a `?variable`"),
            integral: false,
            single: false,
        }
    }

    /// The computed leaf for `subst`. For arithmetic, the folded float leaf, or `None`
    /// when an operand is no number, the divisor is zero, the result is not finite or
    /// (for an integral fold) not an integer. For [`FoldOp::ShapeOf`], the shape of the
    /// tensor matched by `a` as a list leaf, or `None` when `a` is not a tensor.
    ///
    /// ```
    /// use _core::analysis::TensorAnalysis;
    /// use egg::Searcher;
    /// let rs = _core::rules::constant_folding();
    /// let div = rs.get("cprop_div").unwrap();
    /// let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
    /// eg.add_expr(&"(div (scalar 15.0 float64) (scalar 2.0 float64))".parse().unwrap());
    /// eg.rebuild();
    /// let m = div.sources[0].search(&eg);
    /// let leaf = div.fold.as_ref().unwrap().leaf(&eg, &m[0].substs[0]).unwrap();
    /// assert_eq!(leaf.to_string(), "7.5");
    /// ```
    pub fn leaf(&self, egraph: &EGraph<Mdl, TensorAnalysis>, subst: &Subst) -> Option<Mdl> {
        if self.op == FoldOp::ShapeOf {
            let Data::Tensor(t) = &egraph[*subst.get(self.a)?].data else {
                return None;
            };
            let dims: Option<Box<[i64]>> = t.shape.iter().map(|&d| i64::try_from(d).ok()).collect();
            return dims.map(Mdl::List);
        }
        if self.op == FoldOp::TypeOf {
            let ty = crate::lang::knossos::KsType::of(&egraph[*subst.get(self.a)?].data).ok()?;
            return Some(Mdl::Var(ty.to_string().into()));
        }
        let val = |v: Var| match egraph[*subst.get(v)?].data {
            Data::Float(x) => Some(x),
            Data::Int(i) => Some(i as f64),
            _ => None,
        };
        let (x, y) = (val(self.a)?, val(self.b)?);
        let r = match self.op {
            FoldOp::Add => x + y,
            FoldOp::Sub => x - y,
            FoldOp::Mul => x * y,
            FoldOp::Div if y == 0.0 => return None,
            FoldOp::Div => x / y,
            FoldOp::Eq => f64::from(u8::from(x == y)),
            FoldOp::Gt => f64::from(u8::from(x > y)),
            FoldOp::Gte => f64::from(u8::from(x >= y)),
            FoldOp::Log if x <= 0.0 => return None,
            FoldOp::Log => x.ln(),
            FoldOp::Exp => x.exp(),
            // Not arithmetic: answered above.
            FoldOp::ShapeOf | FoldOp::TypeOf => return None,
        };
        let r = if self.single { f64::from(r as f32) } else { r };
        if !r.is_finite() || (self.integral && r.fract() != 0.0) {
            return None;
        }
        Float::new(r).map(Mdl::Float)
    }
}

/// The built-in constant-folding rules for scalar constants (`(scalar v dtype)`):
/// `cprop_add`, `cprop_sub`, `cprop_mul`, `cprop_div` on `float64` (the Knossos dialect's
/// literals), the same four on `float32` (`cprop_add_f32`, ..., the scalars of an ONNX
/// program, each result rounded to `float32`), and `cprop_add_int`, `cprop_sub_int`,
/// `cprop_mul_int` on `int64` (integer division truncates in Knossos and is not folded);
/// RLO's comparisons `cprop_eq` (`equal`), `cprop_gt` (`greater`; `cprop_gt.less` for
/// `less` with swapped operands, RLO's `lt`) and `cprop_gteq` (`greater_equal`;
/// `cprop_gteq.less_equal`) on `float64` and (`_int`) `int64`, giving a Bool literal; and
/// `cprop_log`, `cprop_exp` on `float64`. Names and semantics are RLO's (knossos-ksc
/// `rlo/src/rlo/rewrites.py`, `_native_simplify_rules`, `_if_rules`, `_log_exp_rules`).
/// The folded value cannot be written in the rule DSL, so these rules are built here and
/// added by the Knossos front end (see docs/knossos.md) and, as the rule set `fold`, by
/// the ONNX front end's defaults (docs/rules.md).
///
/// ```
/// let rs = _core::rules::constant_folding();
/// assert_eq!(rs.len(), 23);
/// assert!(rs.rules.iter().all(|r| r.fold.is_some()));
/// assert!(rs.get("cprop_gteq").is_some() && rs.get("cprop_exp").is_some());
/// ```
pub fn constant_folding() -> RuleSet {
    let var = |v: &str| -> Var { v.parse().expect("var") };
    let fold = |name: String, src: String, tgt: String, op, unary: bool, integral, single| Rule {
        name,
        sources: vec![src.parse().expect("fold source parses")],
        targets: vec![tgt.parse().expect("fold target parses")],
        conditions: vec![],
        line: 0,
        fold: Some(Fold {
            op,
            a: var("?a"),
            b: var(if unary { "?a" } else { "?b" }),
            out: var("?c"),
            integral,
            single,
        }),
    };
    let mut rules = Vec::new();
    let ops = [FoldOp::Add, FoldOp::Sub, FoldOp::Mul, FoldOp::Div];
    let kinds = [
        ("float64", "", false, false),
        ("float32", "_f32", false, true),
        ("int64", "_int", true, false),
    ];
    for (dtype, suffix, integral, single) in kinds {
        for op in ops {
            if integral && op == FoldOp::Div {
                continue;
            }
            rules.push(fold(
                format!("cprop_{}{suffix}", op.name()),
                format!("({} (scalar ?a {dtype}) (scalar ?b {dtype}))", op.name()),
                format!("(scalar ?c {dtype})"),
                op,
                false,
                integral,
                single,
            ));
        }
    }
    // RLO's comparisons: (name, operator, fold, operands swapped).
    let cmps = [
        ("cprop_eq", "equal", FoldOp::Eq, false),
        ("cprop_gt", "greater", FoldOp::Gt, false),
        ("cprop_gt.less", "less", FoldOp::Gt, true),
        ("cprop_gteq", "greater_equal", FoldOp::Gte, false),
        ("cprop_gteq.less_equal", "less_equal", FoldOp::Gte, true),
    ];
    for (dtype, suffix) in [("float64", ""), ("int64", "_int")] {
        for (name, opname, op, swap) in cmps {
            let (l, r) = if swap { ("?b", "?a") } else { ("?a", "?b") };
            rules.push(fold(
                format!("{name}{suffix}"),
                format!("({opname} (scalar {l} {dtype}) (scalar {r} {dtype}))"),
                "(scalar ?c bool)".into(),
                op,
                false,
                false,
                false,
            ));
        }
    }
    for op in [FoldOp::Log, FoldOp::Exp] {
        rules.push(fold(
            format!("cprop_{}", op.name()),
            format!("({} (scalar ?a float64))", op.name()),
            "(scalar ?c float64)".into(),
            op,
            true,
            false,
            false,
        ));
    }
    RuleSet { rules }
}

/// RLO's `cse_bind` (knossos-ksc `rlo/src/rlo/rewrites.py`, `_binding_rules`) for two
/// lets of different names binding the same value: `(let x e (let y e b))` becomes
/// `(let x e (let y x b))`, the inner variable renamed to the outer by an explicit
/// substitution (`inline_let` then takes it to every use); `x` must not be free in `e`
/// (RLO's side condition) nor `y` equal `x` (`cse_bind.same` in
/// `knossos_binding.rules`). The variable `(var x T)` needs `T`, the type of `e`, which
/// the rule DSL cannot name: a [`FoldOp::TypeOf`] leaf binds it.
///
/// ```
/// use _core::analysis::TensorAnalysis;
/// use egg::Searcher;
/// let rs = _core::rules::binding_rules();
/// let r = rs.get("cse_bind").unwrap();
/// let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
/// let e = "(let x (size (var v Vec<Float>)) (let y (size (var v Vec<Float>)) (var y Integer)))";
/// eg.add_expr(&e.parse().unwrap());
/// eg.rebuild();
/// let m = r.sources[0].search(&eg);
/// assert!(r.check(&eg, &m[0].substs[0]));
/// let ty = r.fold.as_ref().unwrap().leaf(&eg, &m[0].substs[0]).unwrap();
/// assert_eq!(ty.to_string(), "Integer");
/// ```
pub fn binding_rules() -> RuleSet {
    let text = "cse_bind: (let ?x ?v (let ?y ?v ?b)) => (let ?x ?v (let ?y ?v ?b)) \
                if ?x != ?y and not free(?x, ?v)";
    let mut rule = parse(text, "binding")
        .expect("cse_bind parses")
        .rules
        .remove(0);
    rule.targets = vec!["(let ?x ?v (let ?y (var ?x ?t) ?b))"
        .parse()
        .expect("cse_bind target parses")];
    rule.fold = Some(Fold {
        op: FoldOp::TypeOf,
        a: "?v".parse().expect("var"),
        b: "?v".parse().expect("var"),
        out: "?t".parse().expect("var"),
        integral: false,
        single: false,
    });
    rule.line = 0;
    RuleSet { rules: vec![rule] }
}

/// The conditions of the squeeze-excite gate rules ([`layout_rules`]): `?x` is
/// `[N, C, H, W]` with `H * W > 1` and the gate `?g` is `[N, C, 1, 1]`.
const SE_GATE: &str = "rank(?x) == 4 and rank(?g) == 4 \
    and dim(?g, 2) == 1 and dim(?g, 3) == 1 \
    and dim(?x, 0) == dim(?g, 0) and dim(?x, 1) == dim(?g, 1) \
    and dim(?x, 2) * dim(?x, 3) > 1";

/// The built-in layout rules (the rule set `layout`): a squeeze-excite gate's broadcast
/// product written with the gate upsampled to the gated tensor's shape.
///
/// * `se-gate-upsample`: `(mul ?x ?g) => (mul ?x (resize ?g ?s nearest))`
/// * `se-gate-upsample-l` (the gate is the left operand):
///   `(mul ?g ?x) => (mul (resize ?g ?s nearest) ?x)`
///
/// when `?x` is `[N, C, H, W]` with `H * W > 1` and `?g` is `[N, C, 1, 1]`; `?s` is bound
/// to the shape of `?x` ([`FoldOp::ShapeOf`]), so the resize is an exact
/// nearest-neighbour broadcast of the gate. The sizes cannot be written in the rule DSL,
/// so the rules are built here. Why: onnxruntime's NCHWc layout pass
/// (`NchwcTransformer`, onnxruntime/core/optimizer/nchwc_transformer.cc) has no NCHWc
/// kernel for a broadcast `Mul` and takes both operands out of the blocked layout, while a
/// nearest `Resize` by whole factors becomes a `com.microsoft.nchwc` `Upsample` and the
/// `Mul` then runs on NCHWc tensors (1.03-1.08x faster on MobileNetV3 and
/// EfficientNet). The rules only offer the rewrite; the cost model decides whether the
/// extracted program takes it.
///
/// ```
/// use _core::analysis::TensorAnalysis;
/// use egg::Searcher;
/// let rs = _core::rules::layout_rules();
/// assert_eq!(rs.names(), ["se-gate-upsample", "se-gate-upsample-l"]);
/// let r = rs.get("se-gate-upsample").unwrap();
/// assert!(r.to_string().starts_with("se-gate-upsample: (mul ?x ?g) => (mul ?x (resize ?g ?s nearest)) if rank(?x) == 4"));
/// assert!(r.to_string().ends_with(" where ?s = shape(?x)"));
/// let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
/// eg.add_expr(&"(mul (input x@1_8_4_4) (input g@1_8_1_1))".parse().unwrap());
/// eg.rebuild();
/// let m = r.sources[0].search(&eg);
/// assert!(r.check(&eg, &m[0].substs[0]));
/// let sizes = r.fold.as_ref().unwrap().leaf(&eg, &m[0].substs[0]).unwrap();
/// assert_eq!(sizes.to_string(), "[1,8,4,4]");
/// ```
pub fn layout_rules() -> RuleSet {
    let rules = [
        (
            "se-gate-upsample",
            "(mul ?x ?g)",
            "(mul ?x (resize ?g ?s nearest))",
        ),
        (
            "se-gate-upsample-l",
            "(mul ?g ?x)",
            "(mul (resize ?g ?s nearest) ?x)",
        ),
    ];
    let rules = rules
        .into_iter()
        .map(|(name, src, tgt)| {
            // The DSL checks the source and the conditions; the target binds `?s`, which
            // only the computed leaf can.
            let text = format!("{name}: {src} => {src} if {SE_GATE}");
            let mut rule = parse(&text, "layout")
                .expect("layout rule parses")
                .rules
                .remove(0);
            rule.targets = vec![tgt.parse().expect("layout target parses")];
            rule.fold = Some(Fold::shape_of("?x", "?s"));
            rule.line = 0;
            rule
        })
        .collect();
    RuleSet { rules }
}

impl Rule {
    /// True for a multi-pattern rule (more than one source).
    ///
    /// ```
    /// let rs = _core::rules::parse("r: (relu ?x), (tanh ?x) => (relu ?x), (tanh ?x)", "d").unwrap();
    /// assert!(rs.rules[0].is_multi());
    /// ```
    pub fn is_multi(&self) -> bool {
        self.sources.len() > 1
    }

    /// True when all conditions hold for this substitution (always true without
    /// conditions). Integer-parameter variables read [`crate::analysis::Data::Int`],
    /// tensor variables [`crate::analysis::Data::Tensor`].
    ///
    /// ```
    /// use _core::analysis::TensorAnalysis;
    /// use egg::Searcher;
    /// let rs = _core::rules::parse(
    ///     "g: (conv2d 1 1 0 0 ?x ?w) => (conv2d 1 1 0 0 ?x (merge ?w 2)) if dim(?x, 1) == 2 * dim(?w, 1)",
    ///     "d",
    /// ).unwrap();
    /// let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
    /// eg.add_expr(&"(conv2d 1 1 0 0 (input x@1_8_4_4) (weight w@8_4_3_3))".parse().unwrap());
    /// eg.rebuild();
    /// let m = rs.rules[0].sources[0].search(&eg);
    /// assert!(rs.rules[0].check(&eg, &m[0].substs[0]));
    /// ```
    pub fn check(&self, egraph: &EGraph<Mdl, TensorAnalysis>, subst: &Subst) -> bool {
        self.conditions.iter().all(|c| c.holds(egraph, subst))
    }

    /// True for a two-source rule whose application to the matched e-classes `(b, a)` is
    /// the mirror image of its application to `(a, b)`: the two sources are one pattern up
    /// to renaming its variables, and swapping those variables turns each target into the
    /// other one's mirror (the two tensor operands of every `concat` swapped, `split_0` and
    /// `split_1` exchanged). Tensat's merges of two operators sharing an input are such
    /// rules: the mirrored application builds the same merged operator with its
    /// concatenation order reversed, at the same cost, so exploration applies them once per
    /// pair of e-classes ([`crate::saturate`]). A merge that treats its operands
    /// differently (`conv-enlarge-merge` pads the first kernel to the second's size) is not
    /// mirror-symmetric.
    ///
    /// ```
    /// let rs = _core::rules::parse(
    ///     "m: (relu ?a), (relu ?b) => (split_0 (split 0 (relu (concat 0 2 ?a ?b)))), \
    ///      (split_1 (split 0 (relu (concat 0 2 ?a ?b))))\n\
    ///      e: (conv2d 1 1 0 0 ?x ?w1), (conv2d 1 1 0 0 ?x ?w2) => \
    ///      (split_0 (split 1 (conv2d 1 1 0 0 ?x (concat 0 4 (enlarge ?w1 ?w2) ?w2)))), \
    ///      (split_1 (split 1 (conv2d 1 1 0 0 ?x (concat 0 4 (enlarge ?w1 ?w2) ?w2))))",
    ///     "d",
    /// ).unwrap();
    /// assert!(rs.rules[0].is_mirror_symmetric());
    /// assert!(!rs.rules[1].is_mirror_symmetric());
    /// ```
    pub fn is_mirror_symmetric(&self) -> bool {
        if self.sources.len() != 2 || self.targets.len() != 2 {
            return false;
        }
        let (k0, vars0) = canonical(&self.sources[0]);
        let (k1, vars1) = canonical(&self.sources[1]);
        if k0 != k1 {
            return false;
        }
        let mut swap: HashMap<Var, Var> = HashMap::new();
        for (a, b) in vars0.iter().zip(&vars1) {
            swap.insert(*a, *b);
            swap.insert(*b, *a);
        }
        let same = HashMap::new();
        let t = &self.targets;
        mirror_text(&t[0], &swap, true) == mirror_text(&t[1], &same, false)
            && mirror_text(&t[1], &swap, true) == mirror_text(&t[0], &same, false)
    }
}

/// A pattern's key up to the names of its variables (renamed `?0`, `?1`, ... in order of
/// first appearance), and its variables in that order: two sources with one key match
/// the same e-nodes.
pub(crate) fn canonical(p: &Pattern<Mdl>) -> (String, Vec<Var>) {
    let mut order: Vec<Var> = Vec::new();
    let mut key = String::new();
    for node in p.ast.as_ref() {
        match node {
            ENodeOrVar::Var(v) => {
                let i = order.iter().position(|o| o == v).unwrap_or_else(|| {
                    order.push(*v);
                    order.len() - 1
                });
                key.push_str(&format!("?{i} "));
            }
            ENodeOrVar::ENode(n) => {
                key.push_str(&format!("{}{:?} ", n, n.children()));
            }
        }
    }
    (key, order)
}

/// `p` as text with its variables renamed by `rename` (others kept) and, with `mirror`,
/// the tensor operands of each `concat` swapped and `split_0` / `split_1` exchanged.
fn mirror_text(p: &Pattern<Mdl>, rename: &HashMap<Var, Var>, mirror: bool) -> String {
    fn go(ast: &[ENodeOrVar<Mdl>], at: usize, rename: &HashMap<Var, Var>, mirror: bool) -> String {
        match &ast[at] {
            ENodeOrVar::Var(v) => rename.get(v).unwrap_or(v).to_string(),
            ENodeOrVar::ENode(n) => {
                let mut kids: Vec<String> = n
                    .children()
                    .iter()
                    .map(|c| go(ast, usize::from(*c), rename, mirror))
                    .collect();
                let mut name = n.to_string();
                if mirror {
                    match name.as_str() {
                        "split_0" => name = "split_1".to_string(),
                        "split_1" => name = "split_0".to_string(),
                        "concat" if kids.len() == 4 => kids.swap(2, 3),
                        _ => {}
                    }
                }
                if kids.is_empty() {
                    name
                } else {
                    format!("({name} {})", kids.join(" "))
                }
            }
        }
    }
    let ast = p.ast.as_ref();
    go(ast, ast.len() - 1, rename, mirror)
}

impl fmt::Display for Rule {
    /// The rule in DSL syntax (one direction, one line).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |ps: &[Pattern<Mdl>]| {
            ps.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "{}: {} => {}",
            self.name,
            join(&self.sources),
            join(&self.targets)
        )?;
        for (i, c) in self.conditions.iter().enumerate() {
            write!(f, " {} {c}", if i == 0 { "if" } else { "and" })?;
        }
        if let Some(fold) = &self.fold {
            match fold.op {
                FoldOp::ShapeOf => return write!(f, " where {} = shape({})", fold.out, fold.a),
                FoldOp::TypeOf => return write!(f, " where {} = type({})", fold.out, fold.a),
                FoldOp::Log | FoldOp::Exp => {
                    return write!(f, " where {} = ({} {})", fold.out, fold.op.name(), fold.a)
                }
                _ => {}
            }
            write!(
                f,
                " where {} = ({} {} {})",
                fold.out,
                fold.op.name(),
                fold.a,
                fold.b
            )?;
        }
        Ok(())
    }
}

/// The rules of one file, in file order (`name` before `name-rev`).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// All rules, single- and multi-pattern.
    pub rules: Vec<Rule>,
}

impl RuleSet {
    /// Number of rules (after `<=>` expansion).
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
    /// Rule names in order.
    pub fn names(&self) -> Vec<String> {
        self.rules.iter().map(|r| r.name.clone()).collect()
    }
    /// Number of multi-pattern rules.
    pub fn num_multi(&self) -> usize {
        self.rules.iter().filter(|r| r.is_multi()).count()
    }
    /// The rule called `name`.
    ///
    /// ```
    /// let rs = _core::rules::parse("a: (relu ?x) <=> (relu ?x)", "d").unwrap();
    /// assert_eq!(rs.get("a-rev").unwrap().line, 1);
    /// ```
    pub fn get(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.name == name)
    }
    /// All rules of `sets`, in order (e.g. `taso.rules` then `tensor.rules`).
    ///
    /// Errors: a rule name that two sets share.
    ///
    /// ```
    /// let a = _core::rules::parse("a: (relu ?x) => (relu ?x)", "a").unwrap();
    /// let b = _core::rules::parse("b: (tanh ?x) => (tanh ?x)", "b").unwrap();
    /// assert_eq!(_core::rules::RuleSet::union(&[a.clone(), b]).unwrap().len(), 2);
    /// assert!(_core::rules::RuleSet::union(&[a.clone(), a]).is_err());
    /// ```
    pub fn union(sets: &[RuleSet]) -> Result<RuleSet, String> {
        let mut seen = std::collections::HashSet::new();
        let mut rules = Vec::new();
        for set in sets {
            for r in &set.rules {
                if !seen.insert(r.name.clone()) {
                    return Err(format!("rule `{}` is defined in two rule sets", r.name));
                }
                rules.push(r.clone());
            }
        }
        Ok(RuleSet { rules })
    }
}

/// Rule names: letters, digits and `_-.$` (`$` for RLO's monomorphic rule names such as
/// `add_zero$i`).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || "_-.$".contains(c)
}

fn check_bound(file: &str, used: &Vars, bound: &Vars, what: &str) -> Result<(), RuleError> {
    for (v, (k, p)) in used {
        match bound.get(v) {
            None => return Err(RuleError::at(file, *p, format!("variable `{v}` {what}"))),
            Some((bk, bp)) if *k != Kind::Any && *bk != Kind::Any && k != bk => {
                return Err(RuleError::at(
                    file,
                    *p,
                    format!(
                        "variable `{v}` is used as {k} here but bound to {bk} at line {}, column {}",
                        bp.line, bp.col
                    ),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn is_bare_var(p: &Pattern<Mdl>) -> bool {
    matches!(p.ast.as_ref().last(), Some(ENodeOrVar::Var(_)))
}

/// Parse one statement into one rule, or two for `<=>`.
fn statement(stmt: &[Ch], file: &str) -> Result<Vec<Rule>, RuleError> {
    let t = trim(stmt);
    let start = t[0].pos();
    let name_len = t.iter().take_while(|c| is_name_char(c.c)).count();
    if name_len == 0 {
        return Err(RuleError::at(
            file,
            start,
            "expected a rule name followed by `:`",
        ));
    }
    let name: String = t[..name_len].iter().map(|c| c.c).collect();
    let after = &t[name_len..];
    let skip = after.iter().take_while(|c| c.c.is_whitespace()).count();
    if after.get(skip).map(|c| c.c) != Some(':') {
        let at = after.get(skip).map_or(end_pos(t, start), |c| c.pos());
        return Err(RuleError::at(
            file,
            at,
            format!("expected `:` after the rule name `{name}`"),
        ));
    }
    let body = &after[skip + 1..];
    let body_end = end_pos(t, start);
    let Some(arrow) = find_top(body, "=>", |_| true) else {
        return Err(RuleError::at(
            file,
            trim(body).first().map_or(body_end, |c| c.pos()),
            "expected `=>` or `<=>` between source and target",
        ));
    };
    let both = arrow > 0 && body[arrow - 1].c == '<';
    let arrow_start = if both { arrow - 1 } else { arrow };
    let arrow_pos = body[arrow_start].pos();
    let lhs = &body[..arrow_start];
    let rest = &body[arrow + 2..];
    let if_at = find_top(rest, "if", |i| {
        let before = i == 0 || rest[i - 1].c.is_whitespace() || rest[i - 1].c == ')';
        let after = rest
            .get(i + 2)
            .is_none_or(|c| c.c.is_whitespace() || c.c == '(');
        before && after
    });
    let (rhs, cond_text) = match if_at {
        Some(i) => (&rest[..i], Some((&rest[i + 2..], rest[i].pos()))),
        None => (rest, None),
    };

    let mut svars = Vars::default();
    let mut sources = vec![];
    for part in split_commas(lhs) {
        sources.push(parse_pattern(trim(part), arrow_pos, file, &mut svars)?);
    }
    let mut tvars = Vars::default();
    let mut targets = vec![];
    let tgt_empty = cond_text.map_or(body_end, |(_, p)| p);
    for part in split_commas(rhs) {
        targets.push(parse_pattern(trim(part), tgt_empty, file, &mut tvars)?);
    }
    if sources.len() != targets.len() {
        return Err(RuleError::at(
            file,
            arrow_pos,
            format!(
                "multi-pattern rule has {} source{} but {} target{}: each source needs exactly one target",
                sources.len(),
                if sources.len() == 1 { "" } else { "s" },
                targets.len(),
                if targets.len() == 1 { "" } else { "s" },
            ),
        ));
    }
    check_bound(
        file,
        &tvars,
        &svars,
        "in the target is not bound by the sources",
    )?;
    if both {
        check_bound(
            file,
            &svars,
            &tvars,
            "of the source is not bound by the target (required by `<=>`)",
        )?;
    }
    for (ps, side) in [(&sources, "source"), (&targets, "target")] {
        if (side == "source" || both) && ps.iter().any(is_bare_var) {
            return Err(RuleError::at(
                file,
                arrow_pos,
                format!(
                    "a {side} pattern is a bare variable, which would match every e-class{}",
                    if side == "target" {
                        " (needed as a source by `<=>`)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }

    let mut conditions = vec![];
    if let Some((text, if_pos)) = cond_text {
        conditions = cond::parse_conditions(text, body_end, file)?;
        for c in &conditions {
            for (v, kind) in c.vars() {
                let mut sides = vec![(&svars, "the sources")];
                if both {
                    sides.push((&tvars, "the target (needed for `<=>`)"));
                }
                for (vars, which) in sides {
                    match vars.get(&v) {
                        None => {
                            return Err(RuleError::at(
                                file,
                                if_pos,
                                format!(
                                    "variable `{v}` in the condition is not bound by {which}"
                                ),
                            ))
                        }
                        Some((k, _))
                            if *k != Kind::Any
                                && *k != kind
                                && !(kind == Kind::Any && matches!(k, Kind::Int | Kind::List | Kind::Sym)) =>
                        {
                            return Err(RuleError::at(
                                file,
                                if_pos,
                                format!(
                                    "variable `{v}` in the condition must be {kind}, but it is bound to {k}"
                                ),
                            ))
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    let line = start.line;
    let mut out = vec![];
    if both {
        out.push(Rule {
            name: name.clone(),
            sources: sources.clone(),
            targets: targets.clone(),
            conditions: conditions.clone(),
            line,
            fold: None,
        });
        out.push(Rule {
            name: format!("{name}-rev"),
            sources: targets,
            targets: sources,
            conditions,
            line,
            fold: None,
        });
    } else {
        out.push(Rule {
            name,
            sources,
            targets,
            conditions,
            line,
            fold: None,
        });
    }
    Ok(out)
}

/// Parse rule-file text; `file` names it in error messages.
///
/// ```
/// let rs = _core::rules::parse("# matmul\nassoc: (matmul 0 ?a (matmul 0 ?b ?c))\n  <=> (matmul 0 (matmul 0 ?a ?b) ?c)\n", "x.rules").unwrap();
/// assert_eq!(rs.len(), 2);
/// assert_eq!(rs.rules[1].to_string(), "assoc-rev: (matmul 0 (matmul 0 ?a ?b) ?c) => (matmul 0 ?a (matmul 0 ?b ?c))");
/// ```
pub fn parse(text: &str, file: &str) -> Result<RuleSet, RuleError> {
    let mut rules: Vec<Rule> = vec![];
    let mut seen: HashMap<String, Pos> = HashMap::new();
    for stmt in text::statements(text, file)? {
        let start = trim(&stmt)[0].pos();
        for rule in statement(&stmt, file)? {
            if let Some(p) = seen.get(&rule.name) {
                return Err(RuleError::at(
                    file,
                    start,
                    format!(
                        "duplicate rule name `{}` (first defined at line {})",
                        rule.name, p.line
                    ),
                ));
            }
            seen.insert(rule.name.clone(), start);
            rules.push(rule);
        }
    }
    Ok(RuleSet { rules })
}

/// Read and parse a rule file; errors name the path as given.
///
/// ```
/// let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../python/tensat_py/rules/taso.rules");
/// let rs = _core::rules::load(&path).unwrap();
/// assert!(rs.num_multi() > 0);
/// ```
pub fn load(path: &Path) -> Result<RuleSet, RuleError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| RuleError {
        file: file.clone(),
        line: 1,
        col: 1,
        message: format!("cannot read rule file: {e}"),
    })?;
    parse(&text, &file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use egg::{RecExpr, Searcher};

    fn err(text: &str) -> String {
        parse(text, "t.rules").unwrap_err().to_string()
    }

    #[test]
    fn single_rule_parses_into_one_source_and_target() {
        let rs = parse(
            "r: (relu (conv2d 1 1 0 0 ?x ?w)) => (conv2d 1 1 0 2 ?x ?w)",
            "t",
        )
        .unwrap();
        assert_eq!(rs.len(), 1);
        let r = &rs.rules[0];
        assert_eq!(r.name, "r");
        assert!(!r.is_multi());
        assert_eq!(r.sources[0].to_string(), "(relu (conv2d 1 1 0 0 ?x ?w))");
        assert_eq!(r.targets[0].to_string(), "(conv2d 1 1 0 2 ?x ?w)");
    }

    #[test]
    fn bidirectional_rule_expands_into_rev() {
        let rs = parse("c: (ewadd ?a ?b) <=> (ewadd ?b ?a)", "t").unwrap();
        assert_eq!(rs.names(), ["c", "c-rev"]);
        assert_eq!(rs.rules[1].sources[0].to_string(), "(ewadd ?b ?a)");
    }

    #[test]
    fn reference_style_without_spaces_parses() {
        let rs = parse(
            "r:(relu ?input_1)=>(split_0 (split 1 (relu (concat 1 2 ?input_1 ?input_2))))",
            "t",
        );
        // ?input_2 is unbound: the error must point at it.
        assert_eq!(
            rs.unwrap_err().to_string(),
            "t:1:65: variable `?input_2` in the target is not bound by the sources"
        );
    }

    #[test]
    fn continuation_lines_and_comments() {
        let text = "# head
m: (relu ?x), # first
   (relu ?y)
  => (split_0 (split 0 (relu (concat 0 2 ?x ?y)))),
     (split_1 (split 0 (relu
(concat 0 2 ?x ?y))))

n: (tanh ?x) => (tanh ?x)
";
        let rs = parse(text, "t").unwrap();
        assert_eq!(rs.names(), ["m", "n"]);
        assert!(rs.rules[0].is_multi());
        assert_eq!(rs.rules[0].line, 2);
        assert_eq!(rs.rules[1].line, 8);
        assert_eq!(rs.num_multi(), 1);
    }

    #[test]
    fn list_and_integer_literals_become_leaves() {
        let rs = parse("t: (transpose (transpose ?x [1, 0]) [1,0]) => ?x", "t").unwrap();
        let expr: RecExpr<Mdl> = "(transpose (transpose (input a@2_3) [1,0]) [1,0])"
            .parse()
            .unwrap();
        let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
        eg.add_expr(&expr);
        eg.rebuild();
        assert_eq!(rs.rules[0].sources[0].search(&eg).len(), 1);
        let e = parse("t: (transpose ?x 1_0) => ?x", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("t:1:18") && e.contains("integer-list"), "{e}");
    }

    #[test]
    fn unknown_operator_is_reported_at_its_name() {
        assert_eq!(
            err("r: (relu (frob ?x)) => ?x"),
            "t.rules:1:11: unknown operator `frob`"
        );
    }

    #[test]
    fn wrong_arity_names_the_operands() {
        assert_eq!(
            err("r: (matmul ?a ?b) => ?a"),
            "t.rules:1:5: wrong arity: `matmul` takes 3 operands (act, a, b), got 2"
        );
    }

    #[test]
    fn rlo_comparison_and_log_exp_folds_compute_their_literals() {
        let rs = constant_folding();
        let leaf = |rule: &str, term: &str| -> Option<String> {
            let r = rs.get(rule).unwrap();
            let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
            eg.add_expr(&term.parse().unwrap());
            eg.rebuild();
            let m = r.sources[0].search(&eg);
            let f = r.fold.as_ref().unwrap();
            f.leaf(&eg, &m[0].substs[0]).map(|l| l.to_string())
        };
        let gt = "(greater (scalar 3.0 float64) (scalar 2.0 float64))";
        assert_eq!(leaf("cprop_gt", gt).as_deref(), Some("1.0"));
        // RLO's `lt a b` is `gt b a`: 3 < 2 is false.
        let lt = "(less (scalar 3.0 float64) (scalar 2.0 float64))";
        assert_eq!(leaf("cprop_gt.less", lt).as_deref(), Some("0.0"));
        let ge = "(greater_equal (scalar 2 int64) (scalar 2 int64))";
        assert_eq!(leaf("cprop_gteq_int", ge).as_deref(), Some("1.0"));
        let eq = "(equal (scalar 1.5 float64) (scalar 2.0 float64))";
        assert_eq!(leaf("cprop_eq", eq).as_deref(), Some("0.0"));
        let e = leaf("cprop_exp", "(exp (scalar 0.0 float64))");
        assert_eq!(e.as_deref(), Some("1.0"));
        assert_eq!(leaf("cprop_log", "(log (scalar 0.0 float64))"), None);
        assert_eq!(leaf("cprop_log", "(log (scalar -1.0 float64))"), None);
    }

    #[test]
    fn operand_kinds_are_checked() {
        assert!(err("r: (relu 3) => (relu 3)")
            .contains("operand `x` of `relu` must be a tensor, found integer `3`"));
        assert!(err("r: (relu x) => (relu x)").contains("found symbol `x`"));
        assert!(err("r: (matmul (relu ?a) ?a ?b) => ?a").contains("must be an integer parameter"));
        assert!(err("r: (split_0 (relu ?x)) => ?x").contains("a split pair"));
        assert!(err("r: (relu (split 0 ?x)) => ?x").contains("must be a tensor"));
        assert!(err("r: (matmul ?a ?a ?b) => ?b").contains("variable `?a` is used as a tensor"));
        assert!(err("r: (ewadd ?a ?b) => (matmul ?a ?b ?b)").contains("bound to a tensor"));
        assert!(err("r: relu => relu").contains("must be applied in parentheses"));
    }

    #[test]
    fn unbound_target_variable_is_an_error() {
        assert_eq!(
            err("r: (relu ?x) => (ewadd ?x ?y)"),
            "t.rules:1:27: variable `?y` in the target is not bound by the sources"
        );
    }

    #[test]
    fn bidirectional_rule_needs_source_variables_bound_by_target() {
        let e = err("r: (ewadd ?x ?y) <=> (relu ?x)");
        assert_eq!(e, "t.rules:1:14: variable `?y` of the source is not bound by the target (required by `<=>`)");
        assert!(err("r: (relu ?x) <=> ?x").contains("bare variable"));
    }

    #[test]
    fn bare_variable_source_is_rejected() {
        assert!(err("r: ?x => (relu ?x)").contains("source pattern is a bare variable"));
    }

    #[test]
    fn unbound_condition_variable_is_an_error() {
        assert_eq!(
            err("r: (relu ?x) => (relu ?x) if rank(?z) == 2"),
            "t.rules:1:27: variable `?z` in the condition is not bound by the sources"
        );
    }

    #[test]
    fn unbalanced_parentheses_are_reported() {
        assert_eq!(
            err("r: (relu (tanh ?x) => ?x\n"),
            "t.rules:1:4: unclosed `(`"
        );
        assert_eq!(err("r: (relu ?x)) => ?x"), "t.rules:1:13: unmatched `)`");
        assert_eq!(
            err("r: (relu (tanh ?x) => ?x\ns: (relu ?x) => (relu ?x)"),
            "t.rules:1:4: unclosed `(`"
        );
    }

    #[test]
    fn unequal_multi_pattern_sides_are_an_error() {
        assert_eq!(
            err("r: (relu ?x), (relu ?y) => (relu ?x)"),
            "t.rules:1:25: multi-pattern rule has 2 sources but 1 target: each source needs exactly one target"
        );
    }

    #[test]
    fn duplicate_rule_names_are_an_error() {
        assert_eq!(
            err("r: (relu ?x) => (relu ?x)\n\nr: (tanh ?x) => (tanh ?x)"),
            "t.rules:3:1: duplicate rule name `r` (first defined at line 1)"
        );
        // The reverse of a `<=>` rule takes the name `name-rev`.
        assert!(
            err("r: (relu ?x) <=> (relu ?x)\nr-rev: (tanh ?x) => (tanh ?x)")
                .contains("duplicate rule name `r-rev`")
        );
    }

    #[test]
    fn missing_pieces_are_syntax_errors() {
        assert_eq!(
            err("(relu ?x) => ?x"),
            "t.rules:1:1: expected a rule name followed by `:`"
        );
        assert_eq!(
            err("r (relu ?x) => ?x"),
            "t.rules:1:3: expected `:` after the rule name `r`"
        );
        assert_eq!(
            err("r: (relu ?x)"),
            "t.rules:1:4: expected `=>` or `<=>` between source and target"
        );
        assert_eq!(err("r: => (relu ?x)"), "t.rules:1:4: expected a pattern");
        assert_eq!(
            err("r: (relu ?x) (relu ?x) => ?x"),
            "t.rules:1:14: unexpected `(` after the pattern (separate patterns with `,`)"
        );
        assert!(err("r: () => ?x").contains("empty pattern"));
        assert!(err("r: (relu ?) => ?x").contains("bad variable name"));
    }

    #[test]
    fn bad_condition_syntax_is_reported() {
        let e = err("r: (relu ?x) => (relu ?x) if rank(?x) = 2");
        assert!(e.starts_with("t.rules:1:"), "{e}");
        assert!(e.contains("bad condition"), "{e}");
    }

    fn graph(expr: &str) -> (EGraph<Mdl, TensorAnalysis>, egg::Id) {
        let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
        let id = eg.add_expr(&expr.parse().unwrap());
        eg.rebuild();
        (eg, id)
    }

    #[test]
    fn check_evaluates_dim_condition_against_analysis() {
        let rs = parse(
            "g: (conv2d 1 1 0 0 ?x ?w) => (conv2d 1 1 0 0 ?x (merge ?w 2)) if dim(?x, 1) == 2 * dim(?w, 1)",
            "t",
        )
        .unwrap();
        let r = &rs.rules[0];
        let (eg, _) = graph("(conv2d 1 1 0 0 (input x@1_8_4_4) (weight w@8_4_3_3))");
        let m = r.sources[0].search(&eg);
        assert!(r.check(&eg, &m[0].substs[0]));
        let (eg, _) = graph("(conv2d 1 1 0 0 (input x@1_8_4_4) (weight w@8_8_3_3))");
        let m = r.sources[0].search(&eg);
        assert!(!r.check(&eg, &m[0].substs[0]));
    }

    #[test]
    fn check_reads_integer_parameters_and_const() {
        let rs = parse(
            "r: (matmul ?act ?a ?b) => (matmul ?act ?a ?b) if ?act + 1 == 3 and const(?b) and not const(?a)",
            "t",
        )
        .unwrap();
        let r = &rs.rules[0];
        let (eg, _) = graph("(matmul 2 (input a@2_3) (weight b@3_4))");
        assert!(r.check(&eg, &r.sources[0].search(&eg)[0].substs[0]));
        let (eg, _) = graph("(matmul 0 (input a@2_3) (weight b@3_4))");
        assert!(!r.check(&eg, &r.sources[0].search(&eg)[0].substs[0]));
        let (eg, _) = graph("(matmul 2 (input a@2_3) (input b@3_4))");
        assert!(!r.check(&eg, &r.sources[0].search(&eg)[0].substs[0]));
    }

    #[test]
    fn out_of_range_dim_makes_the_condition_false() {
        let rs = parse("r: (relu ?x) => (relu ?x) if dim(?x, 5) == 1 or", "t");
        assert!(rs.is_err());
        let rs = parse("r: (relu ?x) => (relu ?x) if dim(?x, 5) >= 0", "t").unwrap();
        let (eg, _) = graph("(relu (input a@2_3))");
        let r = &rs.rules[0];
        assert!(!r.check(&eg, &r.sources[0].search(&eg)[0].substs[0]));
        let rs = parse("r: (relu ?x) => (relu ?x) if dim(?x, -1) == 3", "t").unwrap();
        let r = &rs.rules[0];
        assert!(r.check(&eg, &r.sources[0].search(&eg)[0].substs[0]));
    }

    #[test]
    fn rules_are_send_and_sync() {
        fn ok<T: Send + Sync>() {}
        ok::<RuleSet>();
        ok::<RuleError>();
    }

    #[test]
    fn display_round_trips_through_the_parser() {
        let text =
            "r: (relu ?x), (tanh ?y) => (relu ?x), (tanh ?y) if rank(?x) == rank(?y) and const(?y)";
        let rs = parse(text, "t").unwrap();
        assert_eq!(rs.rules[0].to_string(), text);
        let again = parse(&rs.rules[0].to_string(), "t").unwrap();
        assert_eq!(again.rules[0].to_string(), text);
    }

    #[test]
    fn shipped_taso_rules_parse() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../python/tensat_py/rules/taso.rules");
        let rs = load(&path).unwrap_or_else(|e| panic!("{e}"));
        let multi = rs.num_multi();
        eprintln!("taso.rules: {} rules, {} multi", rs.len(), multi);
        assert_eq!(multi, 14);
        assert!(rs
            .get("conv-merge-group-1")
            .is_some_and(|r| r.conditions.len() == 1));
    }
}
