//! Rule conditions: small integer/boolean predicates over the e-class analysis.
//!
//! A condition follows `if` at the end of a rule and reads the [`Data`] of the e-classes
//! bound to the rule's variables:
//!
//! ```text
//! conditions := condition ("and" condition)*
//! condition  := ["not"] "const" "(" ?t ")"  |  expr cmp expr
//! cmp        := "==" | "!=" | "<" | "<=" | ">" | ">="
//! expr       := term (("+" | "-") term)*
//! term       := unary ("*" unary)*
//! unary      := "-" unary | primary
//! primary    := INTEGER | ?v | "dim" "(" ?t "," ["-"] INTEGER ")" | "rank" "(" ?t ")"
//!             | "len" "(" ?l ")" | "at" "(" ?l "," ["-"] INTEGER ")" | "shape" "(" ?t ")"
//!             | LIST | "(" expr ")"
//! LIST       := "[" [ ["-"] INTEGER { "," ["-"] INTEGER } ] "]"
//! ```
//!
//! `?v` in an expression must be bound to an integer parameter, except in `==` / `!=`
//! between two lists: `?p == [1,0]`, `?p != ?q` or `shape(?a) == shape(?b)` compare
//! integer-list parameters and tensor shapes.
//! `len(?l)` is the length of a list parameter, `at(?l, k)` its element `k` (negative `k`
//! counts from the end). `dim`/`rank`/`const` take a tensor variable. A condition whose operands are missing or of the wrong kind (a `dim`
//! index out of range, an overflow) is false, so the rule is simply not applied.
//!
//! ```
//! let rs = _core::rules::parse(
//!     "m: (conv2d 1 1 0 0 ?x ?w) => (conv2d 1 1 0 0 ?x (merge ?w 2)) if dim(?x, 1) == 2 * dim(?w, 1)",
//!     "doc.rules",
//! ).unwrap();
//! assert_eq!(rs.rules[0].conditions[0].to_string(), "dim(?x, 1) == 2 * dim(?w, 1)");
//! ```

use super::text::{Ch, Kind, Pos};
use super::RuleError;
use crate::analysis::{Data, TensorAnalysis};
use crate::lang::Mdl;
use egg::{EGraph, Subst, Var};
use std::fmt;

/// An integer expression over literals and the analysis of bound variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// An integer literal.
    Lit(i64),
    /// The value of a variable bound to an integer parameter (`?v`).
    Int(Var),
    /// `dim(?t, k)`: dimension `k` of tensor `?t` (negative `k` counts from the last axis).
    Dim(Var, i64),
    /// `rank(?t)`: number of dimensions of tensor `?t`.
    Rank(Var),
    /// `len(?l)`: length of list parameter `?l`.
    Len(Var),
    /// `at(?l, k)`: element `k` of list parameter `?l` (negative `k` from the end).
    At(Var, i64),
    /// A list literal `[1,0]` (only as a side of `==` / `!=`).
    List(Vec<i64>),
    /// `shape(?t)`: the shape of tensor `?t` as a list (only as a side of `==` / `!=`).
    Shape(Var),
    /// `a + b`.
    Add(Box<Expr>, Box<Expr>),
    /// `a - b`.
    Sub(Box<Expr>, Box<Expr>),
    /// `a * b`.
    Mul(Box<Expr>, Box<Expr>),
    /// `-a`.
    Neg(Box<Expr>),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    fn text(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
    fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// One condition of a rule; a rule applies only when all of its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `a cmp b` over integer expressions.
    Compare(Expr, Cmp, Expr),
    /// `const(?t)` (`expect` true) or `not const(?t)` (`expect` false): whether the tensor
    /// bound to `?t` is weight-only (pre-computable at inference).
    Const(Var, bool),
    /// `free(?x, ?e)` (`expect` true) or `not free(?x, ?e)`: whether the variable named by
    /// symbol `?x` is free in `?e` (Knossos binders; [`crate::analysis::FreeVars`]).
    Free(Var, Var, bool),
    /// `free(name, ?e)` / `not free(name, ?e)` with a literal variable name (`x$f`): the
    /// per-program `inline_call` rules keep a parameter's binder from capturing a later
    /// argument that uses a variable of the same name.
    FreeName(egg::Symbol, Var, bool),
    /// `dtype(?t) == name` (`expect` true) or `dtype(?t) != name`: whether the tensor
    /// bound to `?t` has that element type (`int64`, `float64`, ...; RLO's monomorphic
    /// `$i` / `$f` rules).
    Dtype(Var, String, bool),
}

type G = EGraph<Mdl, TensorAnalysis>;

fn list<'a>(eg: &'a G, subst: &Subst, v: Var) -> Option<&'a [i64]> {
    match &eg[*subst.get(v)?].data {
        Data::List(l) => Some(l),
        _ => None,
    }
}

fn tensor<'a>(eg: &'a G, subst: &Subst, v: Var) -> Option<&'a crate::analysis::Tensor> {
    match &eg[*subst.get(v)?].data {
        Data::Tensor(t) => Some(t),
        _ => None,
    }
}

impl Expr {
    /// Evaluate under `subst`; `None` when a variable is unbound or of the wrong kind, a
    /// `dim` index is out of range, or the arithmetic overflows.
    pub fn eval(&self, eg: &G, subst: &Subst) -> Option<i64> {
        Some(match self {
            Expr::Lit(v) => *v,
            Expr::Int(v) => match &eg[*subst.get(*v)?].data {
                Data::Int(i) => *i,
                _ => return None,
            },
            Expr::Dim(v, k) => {
                let t = tensor(eg, subst, *v)?;
                let n = t.shape.len() as i64;
                let k = if *k < 0 { n + *k } else { *k };
                if !(0..n).contains(&k) {
                    return None;
                }
                i64::try_from(t.shape[k as usize]).ok()?
            }
            Expr::Rank(v) => tensor(eg, subst, *v)?.shape.len() as i64,
            Expr::Len(v) => list(eg, subst, *v)?.len() as i64,
            Expr::At(v, k) => {
                let l = list(eg, subst, *v)?;
                let n = l.len() as i64;
                let k = if *k < 0 { n + *k } else { *k };
                *l.get(usize::try_from(k).ok()?)?
            }
            Expr::List(_) | Expr::Shape(_) => return None,
            Expr::Add(a, b) => a.eval(eg, subst)?.checked_add(b.eval(eg, subst)?)?,
            Expr::Sub(a, b) => a.eval(eg, subst)?.checked_sub(b.eval(eg, subst)?)?,
            Expr::Mul(a, b) => a.eval(eg, subst)?.checked_mul(b.eval(eg, subst)?)?,
            Expr::Neg(a) => a.eval(eg, subst)?.checked_neg()?,
        })
    }

    fn vars(&self, out: &mut Vec<(Var, Kind)>) {
        match self {
            Expr::Lit(_) => {}
            Expr::Int(v) => out.push((*v, Kind::Int)),
            Expr::Dim(v, _) | Expr::Rank(v) => out.push((*v, Kind::Tensor)),
            Expr::Len(v) | Expr::At(v, _) => out.push((*v, Kind::List)),
            Expr::Shape(v) => out.push((*v, Kind::Tensor)),
            Expr::List(_) => {}
            Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) => {
                a.vars(out);
                b.vars(out);
            }
            Expr::Neg(a) => a.vars(out),
        }
    }

    /// A bare variable or a list literal: may stand for a list in `==` / `!=`.
    fn is_list_side(&self) -> bool {
        matches!(self, Expr::Int(_) | Expr::List(_) | Expr::Shape(_))
    }

    fn prec(&self) -> u8 {
        match self {
            Expr::Add(..) | Expr::Sub(..) => 1,
            Expr::Mul(..) => 2,
            _ => 3,
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wrap = |f: &mut fmt::Formatter<'_>, e: &Expr, min: u8| {
            if e.prec() < min {
                write!(f, "({e})")
            } else {
                write!(f, "{e}")
            }
        };
        match self {
            Expr::Lit(v) => write!(f, "{v}"),
            Expr::Int(v) => write!(f, "{v}"),
            Expr::Dim(v, k) => write!(f, "dim({v}, {k})"),
            Expr::Rank(v) => write!(f, "rank({v})"),
            Expr::Len(v) => write!(f, "len({v})"),
            Expr::At(v, k) => write!(f, "at({v}, {k})"),
            Expr::List(l) => {
                let items: Vec<String> = l.iter().map(|i| i.to_string()).collect();
                write!(f, "[{}]", items.join(", "))
            }
            Expr::Shape(v) => write!(f, "shape({v})"),
            Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) => {
                let (op, p) = match self {
                    Expr::Add(..) => ("+", 1),
                    Expr::Sub(..) => ("-", 1),
                    _ => ("*", 2),
                };
                wrap(f, a, p)?;
                write!(f, " {op} ")?;
                wrap(f, b, p + 1)
            }
            Expr::Neg(a) => {
                write!(f, "-")?;
                wrap(f, a, 3)
            }
        }
    }
}

impl Condition {
    /// Whether the condition holds for `subst` in `egraph`.
    ///
    /// ```
    /// use _core::analysis::TensorAnalysis;
    /// let rs = _core::rules::parse("r: (relu ?x) => (relu ?x) if rank(?x) == 2", "d").unwrap();
    /// let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
    /// let x = eg.add_expr(&"(input x@2_3)".parse().unwrap());
    /// let mut s = egg::Subst::default();
    /// s.insert("?x".parse().unwrap(), x);
    /// assert!(rs.rules[0].conditions[0].holds(&eg, &s));
    /// ```
    pub fn holds(&self, egraph: &G, subst: &Subst) -> bool {
        match self {
            Condition::Compare(a, c, b) if matches!(c, Cmp::Eq | Cmp::Ne) && a.is_list_side() => {
                fn side(e: &Expr, eg: &G, subst: &Subst) -> Option<Vec<i64>> {
                    match e {
                        Expr::List(l) => Some(l.clone()),
                        Expr::Int(v) => list(eg, subst, *v).map(<[i64]>::to_vec),
                        Expr::Shape(v) => {
                            let t = tensor(eg, subst, *v)?;
                            t.shape.iter().map(|d| i64::try_from(*d).ok()).collect()
                        }
                        _ => None,
                    }
                }
                if let (Expr::Int(x), Expr::Int(y)) = (a, b) {
                    // `?x != ?y` on symbols (variable names).
                    if let (Some(x), Some(y)) = (subst.get(*x), subst.get(*y)) {
                        if let (Data::Sym(p), Data::Sym(q)) = (&egraph[*x].data, &egraph[*y].data) {
                            return (p == q) == (*c == Cmp::Eq);
                        }
                    }
                }
                match (side(a, egraph, subst), side(b, egraph, subst)) {
                    (Some(x), Some(y)) => (x == y) == (*c == Cmp::Eq),
                    // An integer-valued `?v == ?w`.
                    _ => match (a.eval(egraph, subst), b.eval(egraph, subst)) {
                        (Some(x), Some(y)) => c.holds(x, y),
                        _ => false,
                    },
                }
            }
            Condition::Compare(a, c, b) => match (a.eval(egraph, subst), b.eval(egraph, subst)) {
                (Some(x), Some(y)) => c.holds(x, y),
                _ => false,
            },
            Condition::Const(v, expect) => {
                tensor(egraph, subst, *v).is_some_and(|t| t.constant == *expect)
            }
            Condition::Dtype(v, name, expect) => {
                tensor(egraph, subst, *v).is_some_and(|t| (t.dtype.name() == name) == *expect)
            }
            Condition::Free(x, e, expect) => {
                let (Some(x), Some(e)) = (subst.get(*x), subst.get(*e)) else {
                    return false;
                };
                match &egraph[*x].data {
                    Data::Sym(name) => egraph[*e].data.free().contains(*name) == *expect,
                    _ => false,
                }
            }
            Condition::FreeName(name, e, expect) => subst
                .get(*e)
                .is_some_and(|e| egraph[*e].data.free().contains(*name) == *expect),
        }
    }

    /// The variables the condition reads, with the kind each must be bound to.
    pub(crate) fn vars(&self) -> Vec<(Var, Kind)> {
        let mut out = vec![];
        match self {
            Condition::Compare(a, c, b) => {
                if matches!(c, Cmp::Eq | Cmp::Ne)
                    && a.is_list_side()
                    && b.is_list_side()
                    && [a, b]
                        .iter()
                        .any(|e| matches!(e, Expr::List(_) | Expr::Shape(_)))
                {
                    // `?p == [1,0]`, `?p == shape(?t)`: ?p is a list.
                    for e in [a, b] {
                        match e {
                            Expr::Int(v) => out.push((*v, Kind::List)),
                            Expr::Shape(v) => out.push((*v, Kind::Tensor)),
                            _ => {}
                        }
                    }
                } else if matches!(c, Cmp::Eq | Cmp::Ne) && a.is_list_side() && b.is_list_side() {
                    // `?p == ?q`: integers or lists, as the patterns bind them.
                    for e in [a, b] {
                        if let Expr::Int(v) = e {
                            out.push((*v, Kind::Any));
                        }
                    }
                } else {
                    a.vars(&mut out);
                    b.vars(&mut out);
                }
            }
            Condition::Const(v, _) | Condition::Dtype(v, _, _) => out.push((*v, Kind::Tensor)),
            Condition::Free(x, e, _) => {
                out.push((*x, Kind::Sym));
                out.push((*e, Kind::Tensor));
            }
            Condition::FreeName(_, e, _) => out.push((*e, Kind::Tensor)),
        }
        out
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Compare(a, c, b) => write!(f, "{a} {} {b}", c.text()),
            Condition::Const(v, true) => write!(f, "const({v})"),
            Condition::Const(v, false) => write!(f, "not const({v})"),
            Condition::Dtype(v, d, true) => write!(f, "dtype({v}) == {d}"),
            Condition::Dtype(v, d, false) => write!(f, "dtype({v}) != {d}"),
            Condition::Free(x, e, true) => write!(f, "free({x}, {e})"),
            Condition::Free(x, e, false) => write!(f, "not free({x}, {e})"),
            Condition::FreeName(x, e, true) => write!(f, "free({x}, {e})"),
            Condition::FreeName(x, e, false) => write!(f, "not free({x}, {e})"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Var(String),
    Word(String),
    Punct(&'static str),
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Int(v) => write!(f, "`{v}`"),
            Tok::Var(v) | Tok::Word(v) => write!(f, "`{v}`"),
            Tok::Punct(p) => write!(f, "`{p}`"),
        }
    }
}

const PUNCT: [&str; 15] = [
    "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "(", ")", ",", "!", "[", "]",
];

fn lex(text: &[Ch], file: &str) -> Result<Vec<(Tok, Pos)>, RuleError> {
    let mut out = vec![];
    let mut i = 0;
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    while i < text.len() {
        let c = text[i].c;
        let pos = text[i].pos();
        if c.is_whitespace() {
            i += 1;
        } else if c == '?' || word(c) {
            let start = i;
            i += 1;
            while i < text.len() && word(text[i].c) {
                i += 1;
            }
            let s: String = text[start..i].iter().map(|c| c.c).collect();
            let tok =
                if c == '?' {
                    if s.len() == 1 {
                        return Err(RuleError::at(file, pos, "`?` must be followed by a name"));
                    }
                    Tok::Var(s)
                } else if c.is_ascii_digit() {
                    Tok::Int(s.parse().map_err(|_| {
                        RuleError::at(file, pos, format!("`{s}` is not an integer"))
                    })?)
                } else {
                    Tok::Word(s)
                };
            out.push((tok, pos));
        } else {
            let rest: String = text[i..text.len().min(i + 2)].iter().map(|c| c.c).collect();
            let Some(p) = PUNCT.iter().find(|p| rest.starts_with(**p)) else {
                return Err(RuleError::at(
                    file,
                    pos,
                    format!("bad condition: unexpected character `{c}` (comparisons are == != < <= > >=)"),
                ));
            };
            if *p == "!" {
                return Err(RuleError::at(
                    file,
                    pos,
                    "bad condition: unexpected `!` (use `not const(?t)` or `!=`)",
                ));
            }
            out.push((Tok::Punct(p), pos));
            i += p.len();
        }
    }
    Ok(out)
}

struct P<'a> {
    toks: Vec<(Tok, Pos)>,
    i: usize,
    end: Pos,
    file: &'a str,
}

impl P<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.0)
    }
    fn pos(&self) -> Pos {
        self.toks.get(self.i).map_or(self.end, |t| t.1)
    }
    fn err<T>(&self, what: &str) -> Result<T, RuleError> {
        let found = match self.peek() {
            Some(t) => t.to_string(),
            None => "end of condition".into(),
        };
        Err(RuleError::at(
            self.file,
            self.pos(),
            format!("bad condition: expected {what}, found {found}"),
        ))
    }
    fn punct(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Punct(q)) if *q == p) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: &str) -> Result<(), RuleError> {
        if self.punct(p) {
            Ok(())
        } else {
            self.err(&format!("`{p}`"))
        }
    }
    fn word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Word(x)) if x == w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn var(&mut self) -> Result<Var, RuleError> {
        match self.peek() {
            Some(Tok::Var(v)) => {
                let v = v.parse().expect("lexer yields `?name`");
                self.i += 1;
                Ok(v)
            }
            _ => self.err("a variable `?name`"),
        }
    }

    fn conditions(&mut self) -> Result<Vec<Condition>, RuleError> {
        let mut out = vec![self.condition()?];
        while self.word("and") {
            out.push(self.condition()?);
        }
        if self.peek().is_some() {
            return self.err("`and` or the end of the rule");
        }
        Ok(out)
    }

    fn condition(&mut self) -> Result<Condition, RuleError> {
        let negated = self.word("not");
        if self.word("free") {
            self.expect("(")?;
            let name = match self.peek() {
                Some(Tok::Word(w)) => Some(egg::Symbol::from(w.as_str())),
                _ => None,
            };
            if name.is_some() {
                self.i += 1;
            }
            let x = if name.is_none() {
                Some(self.var()?)
            } else {
                None
            };
            self.expect(",")?;
            let e = self.var()?;
            self.expect(")")?;
            return Ok(match (name, x) {
                (Some(n), _) => Condition::FreeName(n, e, !negated),
                (None, Some(x)) => Condition::Free(x, e, !negated),
                (None, None) => unreachable!("a name or a variable was read"),
            });
        }
        if !negated && self.word("dtype") {
            self.expect("(")?;
            let v = self.var()?;
            self.expect(")")?;
            let eq = if self.punct("==") {
                true
            } else if self.punct("!=") {
                false
            } else {
                return self.err("`==` or `!=` after `dtype(?t)`");
            };
            let name = match self.peek() {
                Some(Tok::Word(w)) if crate::analysis::DType::parse(w).is_some() => w.clone(),
                _ => return self.err("a dtype name (`int64`, `float64`, ...)"),
            };
            self.i += 1;
            return Ok(Condition::Dtype(v, name, eq));
        }
        if negated || matches!(self.peek(), Some(Tok::Word(w)) if w == "const") {
            if !self.word("const") {
                return self.err("`const` or `free` after `not`");
            }
            self.expect("(")?;
            let v = self.var()?;
            self.expect(")")?;
            return Ok(Condition::Const(v, !negated));
        }
        let a = self.expr()?;
        let cmp = match self.peek() {
            Some(Tok::Punct(p)) => match *p {
                "==" => Cmp::Eq,
                "!=" => Cmp::Ne,
                "<" => Cmp::Lt,
                "<=" => Cmp::Le,
                ">" => Cmp::Gt,
                ">=" => Cmp::Ge,
                _ => return self.err("a comparison (== != < <= > >=)"),
            },
            _ => return self.err("a comparison (== != < <= > >=)"),
        };
        self.i += 1;
        let b = self.expr()?;
        Ok(Condition::Compare(a, cmp, b))
    }

    fn signed_int(&mut self) -> Result<i64, RuleError> {
        let neg = self.punct("-");
        match self.peek() {
            Some(Tok::Int(k)) => {
                let k = *k;
                self.i += 1;
                Ok(if neg { -k } else { k })
            }
            _ => self.err("an integer"),
        }
    }

    fn expr(&mut self) -> Result<Expr, RuleError> {
        let mut e = self.term()?;
        loop {
            if self.punct("+") {
                e = Expr::Add(Box::new(e), Box::new(self.term()?));
            } else if self.punct("-") {
                e = Expr::Sub(Box::new(e), Box::new(self.term()?));
            } else {
                return Ok(e);
            }
        }
    }

    fn term(&mut self) -> Result<Expr, RuleError> {
        let mut e = self.unary()?;
        while self.punct("*") {
            e = Expr::Mul(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, RuleError> {
        if self.punct("-") {
            return Ok(match self.unary()? {
                Expr::Lit(v) => Expr::Lit(-v),
                e => Expr::Neg(Box::new(e)),
            });
        }
        match self.peek().cloned() {
            Some(Tok::Int(v)) => {
                self.i += 1;
                Ok(Expr::Lit(v))
            }
            Some(Tok::Var(_)) => Ok(Expr::Int(self.var()?)),
            Some(Tok::Punct("(")) => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Word(w)) if w == "dim" => {
                self.i += 1;
                self.expect("(")?;
                let v = self.var()?;
                self.expect(",")?;
                let neg = self.punct("-");
                let k = match self.peek() {
                    Some(Tok::Int(k)) => *k,
                    _ => return self.err("an integer axis"),
                };
                self.i += 1;
                self.expect(")")?;
                Ok(Expr::Dim(v, if neg { -k } else { k }))
            }
            Some(Tok::Word(w)) if w == "rank" || w == "len" || w == "shape" => {
                self.i += 1;
                self.expect("(")?;
                let v = self.var()?;
                self.expect(")")?;
                Ok(match w.as_str() {
                    "rank" => Expr::Rank(v),
                    "len" => Expr::Len(v),
                    _ => Expr::Shape(v),
                })
            }
            Some(Tok::Word(w)) if w == "at" => {
                self.i += 1;
                self.expect("(")?;
                let v = self.var()?;
                self.expect(",")?;
                let k = self.signed_int()?;
                self.expect(")")?;
                Ok(Expr::At(v, k))
            }
            Some(Tok::Punct("[")) => {
                self.i += 1;
                let mut items = vec![];
                if !self.punct("]") {
                    loop {
                        items.push(self.signed_int()?);
                        if self.punct("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Ok(Expr::List(items))
            }
            Some(Tok::Word(w)) if w == "const" => {
                self.err("an integer expression (`const(?t)` is a condition of its own)")
            }
            Some(Tok::Word(w)) => Err(RuleError::at(
                self.file,
                self.pos(),
                format!("bad condition: unknown function `{w}` (known: dim, rank, len, at, shape, const)"),
            )),
            _ => self.err("an integer, `?var`, `dim(?t, k)`, `rank(?t)` or `(`"),
        }
    }
}

/// Parse the text after `if` into conditions; `end` is where the rule text ends (for
/// "found end of condition" errors).
pub(crate) fn parse_conditions(
    text: &[Ch],
    end: Pos,
    file: &str,
) -> Result<Vec<Condition>, RuleError> {
    let toks = lex(text, file)?;
    let mut p = P {
        toks,
        i: 0,
        end,
        file,
    };
    if p.peek().is_none() {
        return p.err("a condition after `if`");
    }
    p.conditions()
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    fn cond(text: &str) -> Result<String, String> {
        let src = format!("r: (matmul ?act ?a ?b) => (matmul ?act ?a ?b) if {text}");
        parse(&src, "c.rules")
            .map(|rs| {
                rs.rules[0]
                    .conditions
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn arithmetic_respects_precedence_and_round_trips() {
        assert_eq!(
            cond("dim(?a, 1) + 2 * (?act - 1) >= -dim(?b,-1)").unwrap(),
            "dim(?a, 1) + 2 * (?act - 1) >= -dim(?b, -1)"
        );
    }

    #[test]
    fn conjunctions_and_const_parse() {
        assert_eq!(
            cond("const(?b) and not const(?a) and rank(?a) == 2").unwrap(),
            "const(?b) and not const(?a) and rank(?a) == 2"
        );
    }

    #[test]
    fn dtype_conditions_parse_round_trip_and_hold_by_element_type() {
        assert_eq!(
            cond("dtype(?a) == int64 and dtype(?a) != float64").unwrap(),
            "dtype(?a) == int64 and dtype(?a) != float64"
        );
        assert!(cond("dtype(?a) == integer")
            .unwrap_err()
            .contains("a dtype name"));
        let rs = crate::rules::parse(
            "z: (sub ?a ?a) => (scalar 0.0 int64) if dtype(?a) == int64",
            "d",
        )
        .unwrap();
        let r = &rs.rules[0];
        for (term, holds) in [
            ("(sub (var i Integer) (var i Integer))", true),
            ("(sub (var x Float) (var x Float))", false),
        ] {
            let mut eg: super::G = Default::default();
            eg.add_expr(&term.parse().unwrap());
            eg.rebuild();
            let m = egg::Searcher::search(&r.sources[0], &eg);
            assert_eq!(r.check(&eg, &m[0].substs[0]), holds, "{term}");
        }
    }

    #[test]
    fn missing_comparison_is_a_syntax_error() {
        let e = cond("dim(?a, 1)").unwrap_err();
        assert!(e.starts_with("c.rules:1:"), "{e}");
        assert!(e.contains("expected a comparison"), "{e}");
    }

    #[test]
    fn unknown_function_and_empty_condition_are_errors() {
        assert!(cond("size(?a) == 1")
            .unwrap_err()
            .contains("unknown function `size`"));
        assert!(cond("").unwrap_err().contains("a condition after `if`"));
        assert!(cond("?act == 1 or ?act == 2")
            .unwrap_err()
            .contains("`and` or the end"));
    }

    #[test]
    fn condition_error_points_at_the_token() {
        let e = cond("dim(?a 1) == 2").unwrap_err();
        // "r: (matmul ?act ?a ?b) => (matmul ?act ?a ?b) if dim(?a 1)": `1` is at column 57.
        assert_eq!(e, "c.rules:1:57: bad condition: expected `,`, found `1`");
    }

    #[test]
    fn kinds_of_condition_variables_are_checked() {
        assert!(cond("dim(?act, 0) == 1").unwrap_err().contains("?act"));
        assert!(cond("?a == 1").unwrap_err().contains("?a"));
    }

    #[test]
    fn list_parameters_compare_in_conditions() {
        use crate::analysis::TensorAnalysis;
        use crate::lang::Mdl;
        use egg::Searcher;
        let rs = parse(
            "t: (transpose (transpose ?x ?p) ?q) => ?x if ?p == ?q and ?p == [1, 0] and len(?q) == 2 and at(?q, -1) == 0",
            "c.rules",
        )
        .unwrap();
        let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
        let yes = eg.add_expr(
            &"(transpose (transpose (input a@2_3) [1,0]) [1,0])"
                .parse()
                .unwrap(),
        );
        let no = eg.add_expr(
            &"(transpose (transpose (input a@2_3_4) [1,0,2]) [1,0,2])"
                .parse()
                .unwrap(),
        );
        eg.rebuild();
        let r = &rs.rules[0];
        let matches = r.sources[0].search(&eg);
        let holds = |root| {
            matches
                .iter()
                .filter(|m| m.eclass == eg.find(root))
                .flat_map(|m| m.substs.iter())
                .any(|s| r.check(&eg, s))
        };
        assert!(holds(yes));
        assert!(!holds(no));
        assert!(cond("len(?a) == 2").unwrap_err().contains("?a"));
        assert_eq!(
            cond("shape(?a) == shape(?b)").unwrap(),
            "shape(?a) == shape(?b)"
        );
    }
}
