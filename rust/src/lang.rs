//! The unified e-graph language of tensat-py.
//!
//! One `define_language!` enum, one operator per meaning, named after TASO's operators as
//! Tensat uses them (Yang et al., "Equality Saturation for Tensor Graph Superoptimization",
//! MLSys 2021, section 3). Operator parameters (strides, padding mode, activation, axes,
//! shapes) are children like any other: integer leaves ([`Mdl::Num`]) and symbol leaves
//! ([`Mdl::Var`]), so rules can match and bind them with `?variables`.
//!
//! The full operator reference (shapes, layouts, parameters, names in TASO/ONNX) lives in
//! `docs/language.md`; [`SIGNATURES`] is the machine-readable table that Python reads to
//! serialise graphs.
//!
//! ```
//! use _core::lang::Mdl;
//! let expr: egg::RecExpr<Mdl> = "(relu (input x@2_3))".parse().unwrap();
//! assert_eq!(expr.as_ref().len(), 3);
//! ```

use egg::{define_language, Id, Symbol};

define_language! {
    /// A tensor-program operator, a parameter leaf, or a symbol leaf.
    ///
    /// Layouts: conv2d and pooling use NCHW inputs and OIHW weights; matmul multiplies the
    /// last two axes and requires equal leading (batch) axes.
    pub enum Mdl {
        // `(input name@d0_d1_...)`: a runtime input of shape `[d0, d1, ...]`.
        "input" = Input([Id; 1]),
        // `(weight name@d0_d1_...)`: a trained parameter (constant at inference).
        "weight" = Weight([Id; 1]),
        // `(ewadd a b)`: element-wise sum, equal shapes.
        "ewadd" = Ewadd([Id; 2]),
        // `(ewmul a b)`: element-wise product, equal shapes.
        "ewmul" = Ewmul([Id; 2]),
        // `(matmul act a b)`: `act(a @ b)` over the last two axes.
        "matmul" = Matmul([Id; 3]),
        // `(conv2d stride_h stride_w pad act x w)`; grouped when `w`'s I divides `x`'s C.
        "conv2d" = Conv2d([Id; 6]),
        // `(relu x)`.
        "relu" = Relu(Id),
        // `(tanh x)`.
        "tanh" = Tanh(Id),
        // `(sigmoid x)`.
        "sigmoid" = Sigmoid(Id),
        // `(poolmax x kh kw sh sw pad act)`.
        "poolmax" = Poolmax([Id; 7]),
        // `(poolavg x kh kw sh sw pad act)`: average over the window (padding excluded).
        "poolavg" = Poolavg([Id; 7]),
        // `(transpose x perm)`, `perm` a symbol such as `1_0_2`.
        "transpose" = Transpose([Id; 2]),
        // `(enlarge w ref)`: zero-pad kernel `w` (OIHW) to `ref`'s kernel size, centred.
        "enlarge" = Enlarge([Id; 2]),
        // `(concat axis ndim a b)`.
        "concat" = Concat([Id; 4]),
        // `(concat3 axis ndim a b c)`.
        "concat3" = Concat3([Id; 5]),
        // `(concat4 axis ndim a b c d)`.
        "concat4" = Concat4([Id; 6]),
        // `(concat5 axis ndim a b c d e)`.
        "concat5" = Concat5([Id; 7]),
        // `(split axis x)`: split `x` where the concat that produced it joined its inputs.
        "split" = Split([Id; 2]),
        // `(split_0 s)`: first part of a split.
        "split_0" = Split0(Id),
        // `(split_1 s)`: second part of a split.
        "split_1" = Split1(Id),
        // `(merge w count)`: TASO MergeGConv, weight `[O, I, kh, kw]` to `[O, I*count, kh, kw]`.
        "merge" = Merge([Id; 2]),
        // `(reshape x shape)`, `shape` a symbol such as `64_16_64`.
        "reshape" = Reshape([Id; 2]),
        // `(batchnorm x scale bias mean var)`, inference form, epsilon 1e-5, channel axis 1.
        "batchnorm" = BatchNorm([Id; 5]),
        // `(dropout x)`: identity at inference.
        "dropout" = Dropout(Id),
        // `(noop a b)`: joins several outputs under one root; computes nothing.
        "noop" = Noop([Id; 2]),
        // `(opaque name@d0_d1_... x1 x2 ...)`: an operator the language does not model.
        // The first child is a symbol naming it (unique per node) and giving its output
        // shape; the rest are its tensor operands (any number). Rules cannot see inside it.
        "opaque" = Opaque(Box<[Id]>),
        // An integer parameter.
        Num(i64),
        // A symbol parameter (`name@shape`, `1_0`, ...).
        Var(Symbol),
    }
}

/// Kind of one operand of an operator, as recorded in [`SIGNATURES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// An integer parameter leaf (name given).
    Int(&'static str),
    /// A symbol parameter leaf (name given).
    Sym(&'static str),
    /// A tensor operand (name given).
    Tensor(&'static str),
    /// A split pair (only `split_0` / `split_1` take one).
    Pair(&'static str),
}

use Arg::{Int, Pair, Sym, Tensor};

/// Operator signatures: name and ordered operands. The single source of truth for arity
/// and for the order of parameters; exported to Python as `tensat_py._core.signatures()`.
///
/// ```
/// let (_, args) = _core::lang::SIGNATURES.iter().find(|(n, _)| *n == "matmul").unwrap();
/// assert_eq!(args.len(), 3);
/// ```
pub const SIGNATURES: &[(&str, &[Arg])] = &[
    ("input", &[Sym("name@shape")]),
    ("weight", &[Sym("name@shape")]),
    ("ewadd", &[Tensor("a"), Tensor("b")]),
    ("ewmul", &[Tensor("a"), Tensor("b")]),
    ("matmul", &[Int("act"), Tensor("a"), Tensor("b")]),
    (
        "conv2d",
        &[
            Int("stride_h"),
            Int("stride_w"),
            Int("pad"),
            Int("act"),
            Tensor("x"),
            Tensor("w"),
        ],
    ),
    ("relu", &[Tensor("x")]),
    ("tanh", &[Tensor("x")]),
    ("sigmoid", &[Tensor("x")]),
    (
        "poolmax",
        &[
            Tensor("x"),
            Int("kernel_h"),
            Int("kernel_w"),
            Int("stride_h"),
            Int("stride_w"),
            Int("pad"),
            Int("act"),
        ],
    ),
    (
        "poolavg",
        &[
            Tensor("x"),
            Int("kernel_h"),
            Int("kernel_w"),
            Int("stride_h"),
            Int("stride_w"),
            Int("pad"),
            Int("act"),
        ],
    ),
    ("transpose", &[Tensor("x"), Sym("perm")]),
    ("enlarge", &[Tensor("w"), Tensor("ref")]),
    (
        "concat",
        &[Int("axis"), Int("ndim"), Tensor("a"), Tensor("b")],
    ),
    (
        "concat3",
        &[
            Int("axis"),
            Int("ndim"),
            Tensor("a"),
            Tensor("b"),
            Tensor("c"),
        ],
    ),
    (
        "concat4",
        &[
            Int("axis"),
            Int("ndim"),
            Tensor("a"),
            Tensor("b"),
            Tensor("c"),
            Tensor("d"),
        ],
    ),
    (
        "concat5",
        &[
            Int("axis"),
            Int("ndim"),
            Tensor("a"),
            Tensor("b"),
            Tensor("c"),
            Tensor("d"),
            Tensor("e"),
        ],
    ),
    ("split", &[Int("axis"), Tensor("x")]),
    ("split_0", &[Pair("s")]),
    ("split_1", &[Pair("s")]),
    ("merge", &[Tensor("w"), Int("count")]),
    ("reshape", &[Tensor("x"), Sym("shape")]),
    (
        "batchnorm",
        &[
            Tensor("x"),
            Tensor("scale"),
            Tensor("bias"),
            Tensor("mean"),
            Tensor("var"),
        ],
    ),
    ("dropout", &[Tensor("x")]),
    ("noop", &[Tensor("a"), Tensor("b")]),
    // Variadic: the `type` symbol is followed by any number of tensor operands, which this
    // table does not list (rules cannot write an opaque node with operands).
    ("opaque", &[Sym("type")]),
];

/// Activation codes (TASO `ActiMode`): 0 none, 1 sigmoid, 2 relu, 3 tanh.
pub const ACTIVATIONS: [i64; 4] = [0, 1, 2, 3];

/// The signature of operator `op`, if it is one.
///
/// ```
/// assert!(_core::lang::signature("relu").is_some());
/// assert!(_core::lang::signature("frobnicate").is_none());
/// ```
pub fn signature(op: &str) -> Option<&'static [Arg]> {
    SIGNATURES
        .iter()
        .find(|(name, _)| *name == op)
        .map(|(_, args)| *args)
}

/// Parse a `d0_d1_...` dimension list (the part after `@` in `input`/`weight` names, and
/// `reshape` / `transpose` symbols). Returns `None` on a malformed list.
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
