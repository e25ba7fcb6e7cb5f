//! tensat-py's e-graph core: the unified tensor language ([`lang`]), its shape analysis
//! ([`analysis`]), the rule DSL ([`rules`]), exploration with multi-pattern rules and cycle
//! filtering ([`saturate`], [`cycles`]) and greedy extraction ([`extract`]).
//!
//! Python reaches it through the small `tensat_py._core` module in `py` (built with the
//! `python` feature); everything else is plain Rust, tested with `cargo test`.

pub mod analysis;
pub mod cycles;
pub mod extract;
pub mod ks_cost;
pub mod lang;
pub mod merge_tree;
pub mod prune;
pub mod rules;
pub mod saturate;
pub mod term;
#[cfg(test)]
mod xorshift;

#[cfg(feature = "python")]
mod py;

#[cfg(feature = "python")]
pub mod py_extract;
