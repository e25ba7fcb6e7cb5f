//! E-class analysis: the single source of truth for types.
//!
//! Every e-node's output is computed here by [`infer`]: an integer or symbol parameter, a
//! tensor (dtype, shape, weight-only flag, split positions left by concat), or the pair of
//! tensors a `split` yields. A rewrite whose target does not type-check is never applied:
//! the saturation applier calls [`infer`] on every new e-node before adding it.
//!
//! The per-operator type rules live with the operators' declarations
//! ([`crate::lang::taso`], [`crate::lang::tensor`]); this module holds the types and the
//! analysis driver.
//!
//! ```
//! use _core::analysis::{Data, TensorAnalysis};
//! use _core::lang::Mdl;
//! let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
//! let id = eg.add_expr(&"(relu (input x@2_3))".parse().unwrap());
//! match &eg[id].data { Data::Tensor(t) => assert_eq!(t.shape, vec![2, 3]), d => panic!("{d:?}") }
//! ```

use crate::lang::{Mdl, Operands};
use egg::{Analysis, DidMerge, EGraph, Id, Symbol};
use std::sync::Arc;

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// 64-bit IEEE float.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Boolean.
    Bool,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit signed integer.
    I16,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];
    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::Bool | DType::I8 | DType::U8 => 1,
        }
    }
    /// Name as in NumPy (`"float32"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }
    /// The dtype named `name` (NumPy names), if any.
    ///
    /// ```
    /// assert_eq!(_core::analysis::DType::parse("bfloat16"), Some(_core::analysis::DType::BF16));
    /// assert_eq!(_core::analysis::DType::parse("float8"), None);
    /// ```
    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
    /// True for the floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }
    /// True for the integer dtypes, signed or not (not `bool`).
    ///
    /// ```
    /// use _core::analysis::DType;
    /// assert!(DType::U8.is_int() && DType::I64.is_int() && !DType::Bool.is_int());
    /// ```
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }
    /// True for the unsigned integer dtypes.
    pub fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }
}

/// Where a concat joined its inputs along one axis: position `at`, and the split
/// positions inside each part (for nested concats). Tensat section 3, "split".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SplitTree {
    /// Size of the first part along the axis.
    pub at: usize,
    /// Split positions inside the first part.
    pub left: Option<Arc<SplitTree>>,
    /// Split positions inside the second part.
    pub right: Option<Arc<SplitTree>>,
}

/// A tensor value's type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tensor {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first (NCHW for images, OIHW for kernels).
    pub shape: Vec<usize>,
    /// True when every leaf below is a `weight`: pre-computed at inference, costs nothing.
    pub constant: bool,
    /// Per axis, the split positions a concat left (`None` when the axis was not joined).
    pub splits: Vec<Option<Arc<SplitTree>>>,
    /// Free variables (Knossos programs: the `var`s not bound by an enclosing binder);
    /// always empty for tensor programs.
    pub free: FreeVars,
}

/// A set of free variable names, sorted; empty without allocating.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FreeVars(Option<Arc<[Symbol]>>);

impl FreeVars {
    /// The set holding `names` (any order, duplicates allowed).
    pub fn of(names: impl IntoIterator<Item = Symbol>) -> FreeVars {
        let mut v: Vec<Symbol> = names.into_iter().collect();
        v.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        v.dedup();
        if v.is_empty() {
            FreeVars(None)
        } else {
            FreeVars(Some(v.into()))
        }
    }
    /// The names, sorted.
    pub fn iter(&self) -> impl Iterator<Item = Symbol> + '_ {
        self.0.iter().flat_map(|a| a.iter().copied())
    }
    /// Whether `name` is in the set.
    pub fn contains(&self, name: Symbol) -> bool {
        self.iter().any(|s| s == name)
    }
    /// True for the empty set.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
    /// The union of several sets.
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a FreeVars>) -> FreeVars {
        FreeVars::of(sets.into_iter().flat_map(|s| s.iter()))
    }
    /// This set without `name`.
    pub fn without(&self, name: Symbol) -> FreeVars {
        FreeVars::of(self.iter().filter(|s| *s != name))
    }
    /// The names in both sets.
    pub fn intersect(&self, other: &FreeVars) -> FreeVars {
        FreeVars::of(self.iter().filter(|s| other.contains(*s)))
    }
}

impl Tensor {
    /// A float32 tensor of `shape` without split positions.
    pub fn new(shape: Vec<usize>, constant: bool) -> Tensor {
        Tensor::of(DType::F32, shape, constant)
    }
    /// A tensor of `dtype` and `shape` without split positions.
    pub fn of(dtype: DType, shape: Vec<usize>, constant: bool) -> Tensor {
        let splits = vec![None; shape.len()];
        Tensor {
            dtype,
            shape,
            constant,
            splits,
            free: FreeVars::default(),
        }
    }
    /// Number of elements.
    pub fn volume(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The analysis value of an e-class.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// An integer parameter.
    Int(i64),
    /// A float parameter.
    Float(f64),
    /// An integer-list parameter.
    List(Vec<i64>),
    /// A symbol parameter.
    Sym(Symbol),
    /// A tensor.
    Tensor(Tensor),
    /// The two parts of a `split`.
    Pair(Box<(Tensor, Tensor)>),
    /// A Knossos value that is not a scalar (vectors, tuples, lambdas, strings); Knossos
    /// scalars are rank-0 tensors (`Float` float64, `Integer` int64, `Bool` bool).
    Ks(Box<KsData>),
    /// An e-node that does not type-check; never produced by saturation, which checks first.
    Invalid(String),
}

/// The type and free variables of a non-scalar Knossos value ([`Data::Ks`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KsData {
    /// Its Knossos type (never a scalar: those are [`Data::Tensor`]).
    pub ty: crate::lang::knossos::KsType,
    /// Free variables.
    pub free: FreeVars,
}

impl Data {
    /// The tensor, if this is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Data::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// Free variables of a value (empty for parameters and tensor programs).
    pub fn free(&self) -> &FreeVars {
        static EMPTY: FreeVars = FreeVars(None);
        match self {
            Data::Tensor(t) => &t.free,
            Data::Ks(k) => &k.free,
            _ => &EMPTY,
        }
    }
    /// Replace the free variables of a value (no effect on parameters).
    pub fn set_free(&mut self, free: FreeVars) {
        match self {
            Data::Tensor(t) => t.free = free,
            Data::Ks(k) => k.free = free,
            _ => {}
        }
    }
}

/// The e-class analysis computing [`Data`] for every e-class.
#[derive(Debug, Default, Clone)]
pub struct TensorAnalysis;

impl Analysis<Mdl> for TensorAnalysis {
    type Data = Data;

    fn make(egraph: &mut EGraph<Mdl, Self>, enode: &Mdl, _id: Id) -> Data {
        infer(enode, |id| &egraph[id].data).unwrap_or_else(Data::Invalid)
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        match (a, b) {
            (Data::Tensor(x), Data::Tensor(y)) => {
                let mut changed = false;
                if y.constant && !x.constant {
                    x.constant = true;
                    changed = true;
                }
                for (sx, sy) in x.splits.iter_mut().zip(y.splits) {
                    if sx.is_none() && sy.is_some() {
                        *sx = sy;
                        changed = true;
                    }
                }
                // Equal terms: a variable free in only one of them is not really used.
                if !x.free.is_empty() {
                    let both = x.free.intersect(&y.free);
                    changed |= both != x.free;
                    x.free = both;
                }
                // b gains what a had that it lacked: report both directions conservatively.
                DidMerge(changed, true)
            }
            (Data::Ks(x), Data::Ks(y)) => {
                let both = x.free.intersect(&y.free);
                let changed = both != x.free;
                x.free = both;
                DidMerge(changed, true)
            }
            (a @ Data::Invalid(_), b) => {
                let changed = !matches!(b, Data::Invalid(_));
                *a = b;
                DidMerge(changed, false)
            }
            _ => DidMerge(false, false),
        }
    }
}

/// Compute the output [`Data`] of `enode` from its children's data, by the type rule
/// declared with its operator ([`crate::lang::OpDecl::infer`]).
///
/// Errors: a message naming the operator and the offending shapes or parameters
/// (e.g. `matmul: inner dimensions differ: [2, 3] @ [4, 5]`).
///
/// ```
/// use _core::analysis::{infer, Data};
/// use _core::lang::Mdl;
/// let a = Data::Int(0);
/// assert!(infer(&Mdl::Num(3), |_| &a).is_ok());
/// ```
pub fn infer<'a>(enode: &Mdl, data: impl Fn(Id) -> &'a Data) -> Result<Data, String> {
    match enode {
        Mdl::Num(v) => Ok(Data::Int(*v)),
        Mdl::Float(v) => Ok(Data::Float(v.get())),
        Mdl::List(v) => Ok(Data::List(v.to_vec())),
        Mdl::Var(s) => Ok(Data::Sym(*s)),
        Mdl::Op(op, children) => {
            let decl = op.decl();
            let args: Vec<&Data> = children.iter().map(|c| data(*c)).collect();
            let mut out = (decl.infer)(&Operands::new(decl, &args))
                .map_err(|m| format!("{}: {m}", decl.name))?;
            // Binders (the knossos dialect) compute their free variables in their type
            // rule; every other operator has those of its operands.
            if op.dialect().name != "knossos" && args.iter().any(|a| !a.free().is_empty()) {
                out.set_free(FreeVars::union(args.iter().map(|a| a.free())));
            }
            Ok(out)
        }
    }
}

/// The operator name of an e-node (`"matmul"`, or `"num"` / `"float"` / `"list"` /
/// `"symbol"` for leaves).
pub fn enode_name(enode: &Mdl) -> String {
    match enode {
        Mdl::Num(_) => "num".into(),
        Mdl::Float(_) => "float".into(),
        Mdl::List(_) => "list".into(),
        Mdl::Var(_) => "symbol".into(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use egg::RecExpr;

    fn type_of(s: &str) -> Data {
        let mut eg: EGraph<Mdl, TensorAnalysis> = Default::default();
        let e: RecExpr<Mdl> = s.parse().unwrap();
        let id = eg.add_expr(&e);
        eg[id].data.clone()
    }

    fn shape(s: &str) -> Vec<usize> {
        match type_of(s) {
            Data::Tensor(t) => t.shape,
            d => panic!("{s}: {d:?}"),
        }
    }

    #[test]
    fn conv_same_and_valid_shapes() {
        assert_eq!(
            shape("(conv2d 2 2 0 0 (input x@1_3_224_224) (weight w@64_3_7_7))"),
            vec![1, 64, 112, 112]
        );
        assert_eq!(
            shape("(conv2d 1 1 1 2 (input x@1_3_8_8) (weight w@4_3_3_3))"),
            vec![1, 4, 6, 6]
        );
    }

    #[test]
    fn grouped_conv_accepts_dividing_channels() {
        assert_eq!(
            shape("(conv2d 1 1 0 0 (input x@1_8_4_4) (weight w@8_4_3_3))"),
            vec![1, 8, 4, 4]
        );
        assert!(matches!(
            type_of("(conv2d 1 1 0 0 (input x@1_8_4_4) (weight w@8_3_3_3))"),
            Data::Invalid(_)
        ));
    }

    #[test]
    fn split_reads_position_left_by_concat() {
        let s = "(split_1 (split 1 (relu (concat 1 2 (input a@2_3) (input b@2_5)))))";
        assert_eq!(shape(s), vec![2, 5]);
        let m = "(split_0 (split 1 (matmul 0 (input x@4_2) (concat 1 2 (weight a@2_3) (weight b@2_5)))))";
        assert_eq!(shape(m), vec![4, 3]);
    }

    #[test]
    fn split_without_concat_is_ill_typed() {
        assert!(matches!(
            type_of("(split 0 (input a@2_3))"),
            Data::Invalid(_)
        ));
    }

    #[test]
    fn weight_only_subgraphs_are_constant() {
        match type_of("(concat 0 2 (weight a@2_3) (weight b@2_3))") {
            Data::Tensor(t) => assert!(t.constant),
            d => panic!("{d:?}"),
        }
        match type_of("(ewadd (weight a@2_3) (input b@2_3))") {
            Data::Tensor(t) => assert!(!t.constant),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn matmul_rejects_mismatched_inner_dims() {
        match type_of("(matmul 0 (input a@2_3) (input b@4_5))") {
            Data::Invalid(e) => assert!(e.contains("matmul") && e.contains("[2, 3]")),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn opaque_takes_its_type_from_the_symbol() {
        assert_eq!(shape("(opaque softmax_3@2_5 (input x@2_5))"), vec![2, 5]);
        assert_eq!(
            shape("(opaque ln_1@4 (input x@4) (weight g@4) (weight b@4))"),
            vec![4]
        );
        assert_eq!(shape("(opaque rand_0@3_3)"), vec![3, 3]);
        // Weight-only operands do not make it constant, and concat splits stop at it.
        match type_of("(opaque f_0@4_3 (concat 0 2 (weight a@2_3) (weight b@2_3)))") {
            Data::Tensor(t) => assert!(!t.constant && t.splits.iter().all(|s| s.is_none())),
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            type_of("(opaque f_0@4_3 (split 0 (concat 0 2 (weight a@2_3) (weight b@2_3))))"),
            Data::Invalid(_)
        ));
        assert!(matches!(
            type_of("(opaque f_0 (input x@2))"),
            Data::Invalid(_)
        ));
    }

    #[test]
    fn merge_and_enlarge_shapes() {
        assert_eq!(shape("(merge (weight w@8_4_3_3) 2)"), vec![8, 8, 3, 3]);
        assert_eq!(
            shape("(enlarge (weight w@8_4_1_1) (weight r@8_4_3_3))"),
            vec![8, 4, 3, 3]
        );
    }
}
