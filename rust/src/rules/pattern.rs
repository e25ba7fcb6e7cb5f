//! Pattern parsing: s-expressions over the language, checked against the operators'
//! declarations ([`crate::lang::OpDecl`]: names, arity, operand kinds) and compiled to egg
//! patterns. Variables record the kind of position they are bound at, so that a variable
//! used both as a tensor and as an integer parameter is reported.

use super::text::{Ch, Kind, Pos};
use super::RuleError;
use crate::lang::{decl, Arg, Mdl, Output};
use egg::{ENodeOrVar, Id, Pattern, PatternAst, Var};
use indexmap::IndexMap;

enum Sexp {
    Atom(String, Pos),
    List(Vec<Sexp>, Pos),
}

/// Variables of a rule side: kind and first position, in order of appearance.
pub(crate) type Vars = IndexMap<Var, (Kind, Pos)>;

fn tokens(text: &[Ch]) -> Vec<(String, Pos)> {
    let mut out = vec![];
    let mut i = 0;
    while i < text.len() {
        let c = text[i].c;
        if c.is_whitespace() {
            i += 1;
        } else if c == '[' {
            // A list literal is one token; spaces inside it are dropped: `[1, 0]` = `[1,0]`.
            let start = i;
            let mut tok = String::new();
            while i < text.len() {
                let ch = text[i].c;
                i += 1;
                if !ch.is_whitespace() {
                    tok.push(ch);
                }
                if ch == ']' {
                    break;
                }
            }
            out.push((tok, text[start].pos()));
        } else if c == '(' || c == ')' {
            out.push((c.to_string(), text[i].pos()));
            i += 1;
        } else {
            let start = i;
            while i < text.len() && !text[i].c.is_whitespace() && !"()".contains(text[i].c) {
                i += 1;
            }
            out.push((
                text[start..i].iter().map(|c| c.c).collect(),
                text[start].pos(),
            ));
        }
    }
    out
}

fn sexp(toks: &[(String, Pos)], i: &mut usize, file: &str) -> Result<Sexp, RuleError> {
    let (t, pos) = &toks[*i];
    *i += 1;
    if t == ")" {
        return Err(RuleError::at(file, *pos, "unmatched `)`"));
    }
    if t != "(" {
        return Ok(Sexp::Atom(t.clone(), *pos));
    }
    let mut items = vec![];
    loop {
        match toks.get(*i) {
            None => return Err(RuleError::at(file, *pos, "unclosed `(`")),
            Some((t, _)) if t == ")" => {
                *i += 1;
                return Ok(Sexp::List(items, *pos));
            }
            Some(_) => items.push(sexp(toks, i, file)?),
        }
    }
}

struct Builder<'a> {
    file: &'a str,
    ast: PatternAst<Mdl>,
    vars: &'a mut Vars,
}

/// What a position expects, and how to describe it in messages.
struct Slot {
    kind: Kind,
    what: String,
}

fn arg_kind(a: &Arg) -> (Kind, &'static str) {
    let kind = match a {
        Arg::Int(_) => Kind::Int,
        Arg::Float(_) => Kind::Float,
        Arg::List(_) => Kind::List,
        Arg::Sym(_) => Kind::Sym,
        Arg::Tensor(_) => Kind::Tensor,
        Arg::Pair(_) => Kind::Pair,
    };
    (kind, a.name())
}

impl Builder<'_> {
    fn mismatch(&self, pos: Pos, slot: &Slot, found: &str) -> RuleError {
        RuleError::at(
            self.file,
            pos,
            format!("{} must be {}, found {found}", slot.what, slot.kind),
        )
    }

    fn build(&mut self, s: &Sexp, slot: &Slot) -> Result<Id, RuleError> {
        match s {
            Sexp::Atom(a, pos) if a.starts_with('?') => {
                let ok = a.len() > 1 && a[1..].chars().all(|c| c.is_alphanumeric() || c == '_');
                if !ok {
                    return Err(RuleError::at(
                        self.file,
                        *pos,
                        format!("bad variable name `{a}` (use `?` then letters, digits, `_`)"),
                    ));
                }
                let v: Var = a.parse().expect("checked above");
                match self.vars.get_mut(&v) {
                    None => {
                        self.vars.insert(v, (slot.kind, *pos));
                    }
                    Some((k, p)) => {
                        if *k == Kind::Any {
                            *k = slot.kind;
                        } else if slot.kind != Kind::Any && *k != slot.kind {
                            return Err(RuleError::at(
                                self.file,
                                *pos,
                                format!(
                                    "variable `{a}` is used as {} here but as {} at line {}, column {}",
                                    slot.kind, k, p.line, p.col
                                ),
                            ));
                        }
                    }
                }
                Ok(self.ast.add(ENodeOrVar::Var(v)))
            }
            Sexp::Atom(a, pos) => {
                if decl(a).is_some() && slot.kind != Kind::Sym {
                    return Err(RuleError::at(
                        self.file,
                        *pos,
                        format!("operator `{a}` must be applied in parentheses: `({a} ...)`"),
                    ));
                }
                let leaf = Mdl::leaf(a).map_err(|e| RuleError::at(self.file, *pos, e))?;
                let (kind, what) = match &leaf {
                    Mdl::Num(_) => (Kind::Int, format!("integer `{a}`")),
                    Mdl::Float(_) => (Kind::Float, format!("float `{a}`")),
                    Mdl::List(_) => (Kind::List, format!("list `{a}`")),
                    _ => (
                        Kind::Sym,
                        format!("symbol `{a}` (variables start with `?`)"),
                    ),
                };
                // An integer literal may stand for a float parameter (`1` for `1.0`).
                let fits = slot.kind == Kind::Any
                    || slot.kind == kind
                    || (kind == Kind::Int && matches!(slot.kind, Kind::Sym | Kind::Float));
                if !fits {
                    return Err(self.mismatch(*pos, slot, &what));
                }
                let leaf = match (&leaf, slot.kind) {
                    (Mdl::Num(v), Kind::Float) => Mdl::leaf(&format!("{v}.0"))
                        .map_err(|e| RuleError::at(self.file, *pos, e))?,
                    _ => leaf,
                };
                Ok(self.ast.add(ENodeOrVar::ENode(leaf)))
            }
            Sexp::List(items, pos) => {
                let Some(Sexp::Atom(op, op_pos)) = items.first() else {
                    let msg = if items.is_empty() {
                        "empty pattern `()`"
                    } else {
                        "expected an operator name after `(`"
                    };
                    return Err(RuleError::at(self.file, *pos, msg));
                };
                let Some(d) = decl(op) else {
                    return Err(RuleError::at(
                        self.file,
                        *op_pos,
                        format!("unknown operator `{op}`"),
                    ));
                };
                let sig = d.operands;
                let args = &items[1..];
                if d.variadic.is_some() && op == "opaque" {
                    return Err(RuleError::at(
                        self.file,
                        *op_pos,
                        format!("`{op}` takes any number of operands and cannot appear in a rule"),
                    ));
                }
                let arity_ok = if d.variadic.is_some() {
                    args.len() >= sig.len()
                } else {
                    args.len() == sig.len()
                };
                if !arity_ok {
                    let names: Vec<&str> = sig.iter().map(|a| arg_kind(a).1).collect();
                    return Err(RuleError::at(
                        self.file,
                        *op_pos,
                        format!(
                            "wrong arity: `{op}` takes {} operand{} ({}), got {}",
                            sig.len(),
                            if sig.len() == 1 { "" } else { "s" },
                            names.join(", "),
                            args.len()
                        ),
                    ));
                }
                let out = match d.output {
                    Output::Pair => Kind::Pair,
                    Output::Tensor => Kind::Tensor,
                };
                if !matches!(slot.kind, Kind::Any) && slot.kind != out {
                    return Err(self.mismatch(*pos, slot, &format!("`({op} ...)`, {out}")));
                }
                let mut ids = vec![];
                let extra = d.variadic.iter().cycle();
                for (a, s) in sig.iter().chain(extra).zip(args) {
                    let (kind, name) = arg_kind(a);
                    let slot = Slot {
                        kind,
                        what: format!("operand `{name}` of `{op}`"),
                    };
                    ids.push(self.build(s, &slot)?);
                }
                let node = Mdl::op(op, ids).map_err(|e| {
                    RuleError::at(self.file, *op_pos, format!("cannot build `{op}`: {e}"))
                })?;
                Ok(self.ast.add(ENodeOrVar::ENode(node)))
            }
        }
    }
}

/// Parse one pattern (one side of a rule, one of possibly several comma-separated ones),
/// recording its variables into `vars`. `empty_at` locates the "expected a pattern" error.
pub(crate) fn parse_pattern(
    text: &[Ch],
    empty_at: Pos,
    file: &str,
    vars: &mut Vars,
) -> Result<Pattern<Mdl>, RuleError> {
    let toks = tokens(text);
    if toks.is_empty() {
        return Err(RuleError::at(file, empty_at, "expected a pattern"));
    }
    let mut i = 0;
    let s = sexp(&toks, &mut i, file)?;
    if let Some((t, pos)) = toks.get(i) {
        return Err(RuleError::at(
            file,
            *pos,
            format!("unexpected `{t}` after the pattern (separate patterns with `,`)"),
        ));
    }
    let mut b = Builder {
        file,
        ast: PatternAst::default(),
        vars,
    };
    let slot = Slot {
        kind: Kind::Any,
        what: "the pattern".into(),
    };
    b.build(&s, &slot)?;
    Ok(Pattern::new(b.ast))
}
