//! E-class analysis: the single source of truth for types.
//!
//! Every e-node's output is computed here by [`infer`]: an integer or symbol parameter, a
//! tensor (dtype, shape, weight-only flag, split positions left by concat), or the pair of
//! tensors a `split` yields. A rewrite whose target does not type-check is never applied:
//! the saturation applier calls [`infer`] on every new e-node before adding it.
//!
//! Shape rules follow TASO's operator definitions (Jia et al., SOSP 2019, and its source):
//! SAME padding gives `ceil(h / s)`, VALID gives `ceil((h - k + 1) / s)`.
//!
//! ```
//! use _core::analysis::{Data, TensorAnalysis};
//! use _core::lang::Mdl;
//! let mut eg: egg::EGraph<Mdl, TensorAnalysis> = Default::default();
//! let id = eg.add_expr(&"(relu (input x@2_3))".parse().unwrap());
//! match &eg[id].data { Data::Tensor(t) => assert_eq!(t.shape, vec![2, 3]), d => panic!("{d:?}") }
//! ```

use crate::lang::{parse_dims, Mdl, ACTIVATIONS};
use egg::{Analysis, DidMerge, EGraph, Id, Symbol};
use std::sync::Arc;

/// Element type of a tensor. Only `f32` is produced by the TASO front ends today.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
}

impl DType {
    /// Size of one element in bytes.
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
        }
    }
    /// Name as in NumPy (`"float32"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
        }
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
}

impl Tensor {
    fn new(shape: Vec<usize>, constant: bool) -> Tensor {
        let splits = vec![None; shape.len()];
        Tensor {
            dtype: DType::F32,
            shape,
            constant,
            splits,
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
    /// A symbol parameter.
    Sym(Symbol),
    /// A tensor.
    Tensor(Tensor),
    /// The two parts of a `split`.
    Pair(Box<(Tensor, Tensor)>),
    /// An e-node that does not type-check; never produced by saturation, which checks first.
    Invalid(String),
}

impl Data {
    /// The tensor, if this is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Data::Tensor(t) => Some(t),
            _ => None,
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
                // b gains what a had that it lacked: report both directions conservatively.
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

fn out_size(size: usize, kernel: usize, stride: usize, pad: i64) -> Result<usize, String> {
    if stride == 0 {
        return Err("stride must be positive".into());
    }
    match pad {
        0 => Ok(size.div_ceil(stride)),
        1 => {
            if kernel > size {
                return Err(format!("VALID padding with kernel {kernel} > size {size}"));
            }
            Ok((size - kernel + 1).div_ceil(stride))
        }
        p => Err(format!("padding mode {p} is not 0 (SAME) or 1 (VALID)")),
    }
}

fn act_ok(act: i64) -> Result<(), String> {
    if ACTIVATIONS.contains(&act) {
        Ok(())
    } else {
        Err(format!("activation {act} is not 0..=3"))
    }
}

/// Compute the output [`Data`] of `enode` from its children's data.
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
    let name = enode_name(enode);
    let err = |msg: String| format!("{name}: {msg}");
    let int = |id: Id| match data(id) {
        Data::Int(v) => Ok(*v),
        d => Err(err(format!(
            "expected an integer parameter, got {}",
            describe(d)
        ))),
    };
    let sym = |id: Id| match data(id) {
        Data::Sym(s) => Ok(*s),
        d => Err(err(format!(
            "expected a symbol parameter, got {}",
            describe(d)
        ))),
    };
    let ten = |id: Id| match data(id) {
        Data::Tensor(t) => Ok(t),
        d => Err(err(format!(
            "expected a tensor operand, got {}",
            describe(d)
        ))),
    };
    let out = match enode {
        Mdl::Num(v) => Data::Int(*v),
        Mdl::Var(s) => Data::Sym(*s),
        Mdl::Input([n]) | Mdl::Weight([n]) => {
            let s = sym(*n)?;
            let text = s.as_str();
            let dims = text
                .rsplit_once('@')
                .and_then(|(_, d)| parse_dims(d))
                .ok_or_else(|| err(format!("name `{text}` is not `name@d0_d1_...`")))?;
            Data::Tensor(Tensor::new(dims, matches!(enode, Mdl::Weight(_))))
        }
        Mdl::Ewadd([a, b]) | Mdl::Ewmul([a, b]) | Mdl::Noop([a, b]) => {
            let (x, y) = (ten(*a)?, ten(*b)?);
            if matches!(enode, Mdl::Noop(_)) {
                Data::Tensor(Tensor::new(vec![], x.constant && y.constant))
            } else {
                if x.shape != y.shape {
                    return Err(err(format!(
                        "shapes differ: {:?} and {:?}",
                        x.shape, y.shape
                    )));
                }
                let mut t = x.clone();
                t.constant = x.constant && y.constant;
                for (s, o) in t.splits.iter_mut().zip(&y.splits) {
                    if s.is_none() {
                        s.clone_from(o);
                    }
                }
                Data::Tensor(t)
            }
        }
        Mdl::Relu(x) | Mdl::Tanh(x) | Mdl::Sigmoid(x) | Mdl::Dropout(x) => {
            Data::Tensor(ten(*x)?.clone())
        }
        Mdl::Matmul([act, a, b]) => {
            act_ok(int(*act)?).map_err(err)?;
            let (x, y) = (ten(*a)?, ten(*b)?);
            let n = x.shape.len();
            if n < 2 || y.shape.len() != n {
                return Err(err(format!(
                    "operands must have the same rank >= 2: {:?} @ {:?}",
                    x.shape, y.shape
                )));
            }
            if x.shape[..n - 2] != y.shape[..n - 2] {
                return Err(err(format!(
                    "batch dimensions differ: {:?} @ {:?}",
                    x.shape, y.shape
                )));
            }
            if x.shape[n - 1] != y.shape[n - 2] {
                return Err(err(format!(
                    "inner dimensions differ: {:?} @ {:?}",
                    x.shape, y.shape
                )));
            }
            let mut shape = x.shape.clone();
            shape[n - 1] = y.shape[n - 1];
            let mut t = Tensor::new(shape, x.constant && y.constant);
            t.splits[..n - 1].clone_from_slice(&x.splits[..n - 1]);
            t.splits[n - 1].clone_from(&y.splits[n - 1]);
            Data::Tensor(t)
        }
        Mdl::Conv2d([sh, sw, pad, act, x, w]) => {
            let (sh, sw, pad) = (int(*sh)?, int(*sw)?, int(*pad)?);
            act_ok(int(*act)?).map_err(err)?;
            let (x, w) = (ten(*x)?, ten(*w)?);
            if x.shape.len() != 4 || w.shape.len() != 4 {
                return Err(err(format!(
                    "input and weight must be 4-D (NCHW, OIHW): {:?}, {:?}",
                    x.shape, w.shape
                )));
            }
            let (c, wi, o) = (x.shape[1], w.shape[1], w.shape[0]);
            if wi == 0 || c % wi != 0 || o % (c / wi) != 0 {
                return Err(err(format!(
                    "weight {:?} does not fit input {:?} (groups = C / I must divide O)",
                    w.shape, x.shape
                )));
            }
            if sh < 1 || sw < 1 {
                return Err(err(format!("strides must be positive, got {sh}, {sw}")));
            }
            let h = out_size(x.shape[2], w.shape[2], sh as usize, pad).map_err(err)?;
            let wd = out_size(x.shape[3], w.shape[3], sw as usize, pad).map_err(err)?;
            let mut t = Tensor::new(vec![x.shape[0], o, h, wd], x.constant && w.constant);
            t.splits[0].clone_from(&x.splits[0]);
            t.splits[1].clone_from(&w.splits[0]);
            Data::Tensor(t)
        }
        Mdl::Poolmax([x, kh, kw, sh, sw, pad, act])
        | Mdl::Poolavg([x, kh, kw, sh, sw, pad, act]) => {
            let x = ten(*x)?;
            let (kh, kw, sh, sw, pad) = (int(*kh)?, int(*kw)?, int(*sh)?, int(*sw)?, int(*pad)?);
            act_ok(int(*act)?).map_err(err)?;
            if x.shape.len() != 4 {
                return Err(err(format!("input must be 4-D NCHW: {:?}", x.shape)));
            }
            if kh < 1 || kw < 1 || sh < 1 || sw < 1 {
                return Err(err("kernel and strides must be positive".into()));
            }
            let h = out_size(x.shape[2], kh as usize, sh as usize, pad).map_err(err)?;
            let w = out_size(x.shape[3], kw as usize, sw as usize, pad).map_err(err)?;
            let mut t = Tensor::new(vec![x.shape[0], x.shape[1], h, w], x.constant);
            t.splits[..2].clone_from_slice(&x.splits[..2]);
            Data::Tensor(t)
        }
        Mdl::Transpose([x, perm]) => {
            let x = ten(*x)?;
            let p = sym(*perm)?;
            let perm = parse_dims(p.as_str())
                .ok_or_else(|| err(format!("permutation `{p}` is not `d0_d1_...`")))?;
            let mut seen = perm.clone();
            seen.sort_unstable();
            if seen != (0..x.shape.len()).collect::<Vec<_>>() {
                return Err(err(format!("`{p}` is not a permutation of {:?}", x.shape)));
            }
            let mut t = Tensor::new(perm.iter().map(|&i| x.shape[i]).collect(), x.constant);
            t.splits = perm.iter().map(|&i| x.splits[i].clone()).collect();
            Data::Tensor(t)
        }
        Mdl::Enlarge([w, r]) => {
            let (w, r) = (ten(*w)?, ten(*r)?);
            if w.shape.len() != 4 || r.shape.len() != 4 {
                return Err(err(format!(
                    "kernels must be 4-D: {:?}, {:?}",
                    w.shape, r.shape
                )));
            }
            let (kh, kw) = (r.shape[2], r.shape[3]);
            if w.shape[2] > kh
                || w.shape[3] > kw
                || (kh - w.shape[2]) % 2 != 0
                || (kw - w.shape[3]) % 2 != 0
            {
                return Err(err(format!(
                    "kernel {:?} cannot be centred in {}x{}",
                    w.shape, kh, kw
                )));
            }
            let mut t = Tensor::new(vec![w.shape[0], w.shape[1], kh, kw], w.constant);
            t.splits[..2].clone_from_slice(&w.splits[..2]);
            Data::Tensor(t)
        }
        Mdl::Concat([axis, nd, rest @ ..]) => {
            concat(int(*axis)?, int(*nd)?, rest, &ten).map_err(err)?
        }
        Mdl::Concat3([axis, nd, rest @ ..]) => {
            concat(int(*axis)?, int(*nd)?, rest, &ten).map_err(err)?
        }
        Mdl::Concat4([axis, nd, rest @ ..]) => {
            concat(int(*axis)?, int(*nd)?, rest, &ten).map_err(err)?
        }
        Mdl::Concat5([axis, nd, rest @ ..]) => {
            concat(int(*axis)?, int(*nd)?, rest, &ten).map_err(err)?
        }
        Mdl::Split([axis, x]) => {
            let axis = int(*axis)?;
            let x = ten(*x)?;
            let ax = usize::try_from(axis)
                .ok()
                .filter(|a| *a < x.shape.len())
                .ok_or_else(|| err(format!("axis {axis} out of range for {:?}", x.shape)))?;
            let tree = x.splits[ax].clone().ok_or_else(|| {
                err(format!(
                    "axis {axis} of {:?} was not joined by a concat",
                    x.shape
                ))
            })?;
            let mut l = x.clone();
            let mut r = x.clone();
            l.shape[ax] = tree.at;
            r.shape[ax] = x.shape[ax] - tree.at;
            l.splits[ax].clone_from(&tree.left);
            r.splits[ax].clone_from(&tree.right);
            Data::Pair(Box::new((l, r)))
        }
        Mdl::Split0(s) | Mdl::Split1(s) => match data(*s) {
            Data::Pair(p) => Data::Tensor(if matches!(enode, Mdl::Split0(_)) {
                p.0.clone()
            } else {
                p.1.clone()
            }),
            d => return Err(err(format!("expected a split, got {}", describe(d)))),
        },
        Mdl::Merge([w, count]) => {
            let w = ten(*w)?;
            let count = int(*count)?;
            if w.shape.len() != 4 || count < 1 || w.shape[0] % count as usize != 0 {
                return Err(err(format!(
                    "weight {:?} cannot merge {count} groups (O must be a multiple of count)",
                    w.shape
                )));
            }
            let mut shape = w.shape.clone();
            shape[1] *= count as usize;
            let mut t = Tensor::new(shape, w.constant);
            t.splits[0].clone_from(&w.splits[0]);
            Data::Tensor(t)
        }
        Mdl::Reshape([x, s]) => {
            let x = ten(*x)?;
            let s = sym(*s)?;
            let shape = parse_dims(s.as_str())
                .ok_or_else(|| err(format!("shape `{s}` is not `d0_d1_...`")))?;
            if shape.iter().product::<usize>() != x.volume() {
                return Err(err(format!("cannot reshape {:?} to {:?}", x.shape, shape)));
            }
            Data::Tensor(Tensor::new(shape, x.constant))
        }
        Mdl::Opaque(children) => {
            let (first, operands) = children
                .split_first()
                .ok_or_else(|| err("needs a `name@d0_d1_...` type symbol".into()))?;
            let s = sym(*first)?;
            let text = s.as_str();
            let dims = text
                .rsplit_once('@')
                .and_then(|(_, d)| parse_dims(d))
                .ok_or_else(|| err(format!("type `{text}` is not `name@d0_d1_...`")))?;
            for x in operands {
                ten(*x)?;
            }
            // Never constant (it is not pre-computed) and no split positions: nothing the
            // rules know about its operands is carried through it.
            Data::Tensor(Tensor::new(dims, false))
        }
        Mdl::BatchNorm([x, rest @ ..]) => {
            let x = ten(*x)?;
            if x.shape.len() < 2 {
                return Err(err(format!(
                    "input must have a channel axis: {:?}",
                    x.shape
                )));
            }
            let mut constant = x.constant;
            for p in rest {
                let p = ten(*p)?;
                if p.shape != [x.shape[1]] {
                    return Err(err(format!(
                        "parameter {:?} must be [C] = [{}]",
                        p.shape, x.shape[1]
                    )));
                }
                constant &= p.constant;
            }
            let mut t = x.clone();
            t.constant = constant;
            Data::Tensor(t)
        }
    };
    Ok(out)
}

fn concat<'a>(
    axis: i64,
    ndim: i64,
    parts: &[Id],
    ten: &impl Fn(Id) -> Result<&'a Tensor, String>,
) -> Result<Data, String> {
    let ts: Vec<&Tensor> = parts.iter().map(|p| ten(*p)).collect::<Result<_, _>>()?;
    let first = ts[0];
    let n = first.shape.len();
    if ndim != n as i64 {
        return Err(format!(
            "ndim parameter {ndim} differs from operand rank {n}"
        ));
    }
    let ax = usize::try_from(axis)
        .ok()
        .filter(|a| *a < n)
        .ok_or_else(|| format!("axis {axis} out of range for rank {n}"))?;
    for t in &ts[1..] {
        let ok = t.shape.len() == n && (0..n).all(|i| i == ax || t.shape[i] == first.shape[i]);
        if !ok {
            return Err(format!(
                "operands disagree off axis {axis}: {:?} and {:?}",
                first.shape, t.shape
            ));
        }
    }
    let mut out = first.clone();
    out.shape[ax] = ts.iter().map(|t| t.shape[ax]).sum();
    out.constant = ts.iter().all(|t| t.constant);
    // Nest to the right: concat3(a, b, c) splits into a | concat(b, c).
    let mut tree = ts.last().unwrap().splits[ax].clone();
    let mut acc = ts.last().unwrap().shape[ax];
    for t in ts[..ts.len() - 1].iter().rev() {
        tree = Some(Arc::new(SplitTree {
            at: t.shape[ax],
            left: t.splits[ax].clone(),
            right: tree,
        }));
        acc += t.shape[ax];
    }
    debug_assert_eq!(acc, out.shape[ax]);
    out.splits[ax] = tree;
    for i in 0..n {
        if i != ax && out.splits[i].is_none() {
            out.splits[i] = ts.iter().find_map(|t| t.splits[i].clone());
        }
    }
    Ok(Data::Tensor(out))
}

/// The operator name of an e-node (`"matmul"`, or `"num"` / `"symbol"` for leaves).
pub fn enode_name(enode: &Mdl) -> String {
    match enode {
        Mdl::Num(_) => "num".into(),
        Mdl::Var(_) => "symbol".into(),
        e => e.to_string(),
    }
}

fn describe(d: &Data) -> String {
    match d {
        Data::Int(v) => format!("integer {v}"),
        Data::Sym(s) => format!("symbol `{s}`"),
        Data::Tensor(t) => format!("tensor {:?}", t.shape),
        Data::Pair(_) => "a split pair".into(),
        Data::Invalid(e) => format!("an ill-typed operand ({e})"),
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
