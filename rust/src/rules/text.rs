//! Source text handling: characters tagged with their position, comment stripping, and
//! grouping of lines into rule statements (continuation lines, open parentheses).

use super::RuleError;
use std::fmt;

/// A 1-based line and column in a rule file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: usize,
    pub col: usize,
}

/// One character of a statement and where it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ch {
    pub c: char,
    pub line: usize,
    pub col: usize,
}

impl Ch {
    pub fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }
}

/// What an operand position (or a variable bound there) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Float,
    List,
    Sym,
    Tensor,
    Pair,
    /// Unconstrained (the root of a pattern).
    Any,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Int => "an integer parameter",
            Kind::Float => "a float parameter",
            Kind::List => "an integer-list parameter",
            Kind::Sym => "a symbol parameter",
            Kind::Tensor => "a tensor",
            Kind::Pair => "a split pair",
            Kind::Any => "anything",
        })
    }
}

fn starts_rule_name(line: &str) -> bool {
    let name_len = line
        .chars()
        .take_while(|c| c.is_alphanumeric() || "_-.".contains(*c))
        .count();
    name_len > 0 && line[name_len..].trim_start().starts_with(':')
}

/// Split `text` into statements, each a list of positioned characters (lines joined by a
/// space). Comments (`#` to end of line) and blank lines are dropped. A line continues
/// the previous statement when it starts with whitespace or while parentheses are open.
pub(crate) fn statements(text: &str, file: &str) -> Result<Vec<Vec<Ch>>, RuleError> {
    let mut out: Vec<Vec<Ch>> = vec![];
    let mut open: Vec<Pos> = vec![];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("");
        if content.trim().is_empty() {
            continue;
        }
        let indented = content.starts_with(char::is_whitespace);
        if !open.is_empty() && !indented && starts_rule_name(content) {
            // A new rule begins while the previous one still has an open parenthesis.
            return Err(RuleError::at(file, *open.last().unwrap(), "unclosed `(`"));
        }
        match out.last_mut() {
            Some(stmt) if indented || !open.is_empty() => stmt.push(Ch {
                c: ' ',
                line,
                col: 1,
            }),
            _ => out.push(vec![]),
        }
        let stmt = out.last_mut().unwrap();
        for (j, c) in content.chars().enumerate() {
            let ch = Ch {
                c,
                line,
                col: j + 1,
            };
            if c == '(' {
                open.push(ch.pos());
            } else if c == ')' && open.pop().is_none() {
                return Err(RuleError::at(file, ch.pos(), "unmatched `)`"));
            }
            stmt.push(ch);
        }
    }
    if let Some(p) = open.last() {
        return Err(RuleError::at(file, *p, "unclosed `(`"));
    }
    Ok(out)
}

/// Trim whitespace from both ends of a positioned slice.
pub(crate) fn trim(s: &[Ch]) -> &[Ch] {
    let a = s
        .iter()
        .position(|c| !c.c.is_whitespace())
        .unwrap_or(s.len());
    let b = s
        .iter()
        .rposition(|c| !c.c.is_whitespace())
        .map_or(a, |b| b + 1);
    &s[a..b]
}

/// Split at top-level (depth 0) commas.
pub(crate) fn split_commas(s: &[Ch]) -> Vec<&[Ch]> {
    let mut out = vec![];
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.iter().enumerate() {
        match c.c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Index of the first top-level occurrence of `pat` in `s` for which `ok(i)` holds.
pub(crate) fn find_top(s: &[Ch], pat: &str, ok: impl Fn(usize) -> bool) -> Option<usize> {
    let pat: Vec<char> = pat.chars().collect();
    let mut depth = 0i32;
    for i in 0..s.len() {
        match s[i].c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if depth == 0
            && i + pat.len() <= s.len()
            && s[i..i + pat.len()].iter().zip(&pat).all(|(a, b)| a.c == *b)
            && ok(i)
        {
            return Some(i);
        }
    }
    None
}

/// The position just after the last character of `s` (or `fallback` when empty).
pub(crate) fn end_pos(s: &[Ch], fallback: Pos) -> Pos {
    s.last().map_or(fallback, |c| Pos {
        line: c.line,
        col: c.col + 1,
    })
}
