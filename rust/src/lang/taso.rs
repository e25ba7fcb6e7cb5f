//! The TASO dialect: Tensat's tensor operators (Yang et al., "Equality Saturation for
//! Tensor Graph Superoptimization", MLSys 2021, section 3; TASO, Jia et al., SOSP 2019).
//!
//! Layouts: `conv2d` and pooling take NCHW inputs and OIHW weights; `matmul` multiplies
//! the last two axes and requires equal leading (batch) axes. Padding codes (TASO
//! `PaddingMode`): 0 SAME gives `ceil(h / s)`, 1 VALID gives `ceil((h - k + 1) / s)`.
//! Activation codes (TASO `ActiMode`): 0 none, 1 sigmoid, 2 relu, 3 tanh. `ewadd` and
//! `ewmul` take equal shapes; the tensor dialect's `add` and `mul` broadcast.
//!
//! ```
//! let d = _core::lang::decl("conv2d").unwrap();
//! assert_eq!(d.operands.len(), 6);
//! ```

use super::{op, Arg, Dialect, OpDecl, Operands, Output};
use crate::analysis::{Data, SplitTree, Tensor};
use crate::lang::parse_leaf_type;
use std::sync::Arc;
use Arg::{Int, List, Pair, Sym, Tensor as T};

/// Activation codes (TASO `ActiMode`): 0 none, 1 sigmoid, 2 relu, 3 tanh.
pub const ACTIVATIONS: [i64; 4] = [0, 1, 2, 3];

const POOL: &[Arg] = &[
    T("x"),
    Int("kernel_h"),
    Int("kernel_w"),
    Int("stride_h"),
    Int("stride_w"),
    Int("pad"),
    Int("act"),
];

/// The TASO dialect.
pub static DIALECT: Dialect = Dialect {
    name: "taso",
    ops: &[
        op(
            "input",
            &[Sym("name@shape")],
            leaf,
            "a runtime input, typed by its `name@d0_d1[:dtype]` symbol",
        ),
        op(
            "weight",
            &[Sym("name@shape")],
            leaf,
            "a trained parameter (constant at inference)",
        ),
        op("ewadd", &[T("a"), T("b")], ew_binary, "a + b, equal shapes"),
        op("ewmul", &[T("a"), T("b")], ew_binary, "a * b, equal shapes"),
        op(
            "matmul",
            &[Int("act"), T("a"), T("b")],
            matmul,
            "act(a @ b) over the last two axes",
        ),
        op(
            "conv2d",
            &[
                Int("stride_h"),
                Int("stride_w"),
                Int("pad"),
                Int("act"),
                T("x"),
                T("w"),
            ],
            conv2d,
            "grouped 2-D cross-correlation, NCHW x OIHW, then act",
        ),
        op("relu", &[T("x")], same, "max(x, 0)"),
        op("tanh", &[T("x")], same_float, "tanh(x)"),
        op("sigmoid", &[T("x")], same_float, "1 / (1 + exp(-x))"),
        op("poolmax", POOL, pool, "window maximum, NCHW"),
        op(
            "poolavg",
            POOL,
            pool,
            "window mean over non-padding elements, NCHW",
        ),
        op(
            "transpose",
            &[T("x"), List("perm")],
            transpose,
            "output axis i is input axis perm[i]",
        ),
        op(
            "enlarge",
            &[T("w"), T("ref")],
            enlarge,
            "zero-pad kernel w (OIHW) to ref's kernel size, centred",
        ),
        op(
            "concat",
            &[Int("axis"), Int("ndim"), T("a"), T("b")],
            concat,
            "join along axis",
        ),
        op(
            "concat3",
            &[Int("axis"), Int("ndim"), T("a"), T("b"), T("c")],
            concat,
            "join three along axis",
        ),
        op(
            "concat4",
            &[Int("axis"), Int("ndim"), T("a"), T("b"), T("c"), T("d")],
            concat,
            "join four along axis",
        ),
        op(
            "concat5",
            &[
                Int("axis"),
                Int("ndim"),
                T("a"),
                T("b"),
                T("c"),
                T("d"),
                T("e"),
            ],
            concat,
            "join five along axis",
        ),
        OpDecl {
            name: "split",
            operands: &[Int("axis"), T("x")],
            variadic: None,
            output: Output::Pair,
            infer: split,
            summary: "cut x where the concat that produced it joined its inputs",
            rlo_cost: None,
        },
        op("split_0", &[Pair("s")], split_part, "first part of a split"),
        op(
            "split_1",
            &[Pair("s")],
            split_part,
            "second part of a split",
        ),
        op(
            "merge",
            &[T("w"), Int("count")],
            merge,
            "TASO MergeGConv: [O, I, kh, kw] -> [O, I*count, kh, kw]",
        ),
        op(
            "reshape",
            &[T("x"), List("shape")],
            reshape,
            "row-major reshape",
        ),
        op(
            "batchnorm",
            &[T("x"), T("scale"), T("bias"), T("mean"), T("var")],
            batchnorm,
            "inference batch normalisation on axis 1, epsilon 1e-5",
        ),
        op("dropout", &[T("x")], same, "identity at inference"),
        op(
            "noop",
            &[T("a"), T("b")],
            noop,
            "joins several outputs under one root",
        ),
        OpDecl {
            name: "opaque",
            operands: &[Sym("type")],
            variadic: Some(T("x")),
            output: Output::Tensor,
            infer: opaque,
            summary: "an operator the language does not model",
            rlo_cost: None,
        },
    ],
};

fn leaf(a: &Operands) -> Result<Data, String> {
    let s = a.sym(0)?;
    let (dtype, dims) = parse_leaf_type(s.as_str())
        .ok_or_else(|| format!("name `{s}` is not `name@d0_d1_...[:dtype]`"))?;
    let constant = a.op_name() == "weight";
    Ok(Data::Tensor(Tensor::of(dtype, dims, constant)))
}

/// Merge split positions of `y` into `t` where `t` has none (operands of equal shapes).
pub(crate) fn merge_splits(t: &mut Tensor, y: &Tensor) {
    for (s, o) in t.splits.iter_mut().zip(&y.splits) {
        if s.is_none() {
            s.clone_from(o);
        }
    }
}

fn ew_binary(a: &Operands) -> Result<Data, String> {
    let (x, y) = (a.tensor(0)?, a.tensor(1)?);
    if x.shape != y.shape {
        return Err(format!("shapes differ: {:?} and {:?}", x.shape, y.shape));
    }
    same_dtype(x, y)?;
    let mut t = x.clone();
    t.constant = x.constant && y.constant;
    merge_splits(&mut t, y);
    Ok(Data::Tensor(t))
}

pub(crate) fn same_dtype(x: &Tensor, y: &Tensor) -> Result<(), String> {
    if x.dtype != y.dtype {
        return Err(format!(
            "dtypes differ: {} and {}",
            x.dtype.name(),
            y.dtype.name()
        ));
    }
    Ok(())
}

fn noop(a: &Operands) -> Result<Data, String> {
    let (x, y) = (a.tensor(0)?, a.tensor(1)?);
    Ok(Data::Tensor(Tensor::new(vec![], x.constant && y.constant)))
}

pub(crate) fn same(a: &Operands) -> Result<Data, String> {
    Ok(Data::Tensor(a.tensor(0)?.clone()))
}

pub(crate) fn same_float(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    if !x.dtype.is_float() {
        return Err(format!("needs a float tensor, got {}", x.dtype.name()));
    }
    Ok(Data::Tensor(x.clone()))
}

fn act_ok(act: i64) -> Result<(), String> {
    if ACTIVATIONS.contains(&act) {
        Ok(())
    } else {
        Err(format!("activation {act} is not 0..=3"))
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

fn matmul(a: &Operands) -> Result<Data, String> {
    act_ok(a.int(0)?)?;
    let (x, y) = (a.tensor(1)?, a.tensor(2)?);
    same_dtype(x, y)?;
    let n = x.shape.len();
    if n < 2 || y.shape.len() != n {
        return Err(format!(
            "operands must have the same rank >= 2: {:?} @ {:?}",
            x.shape, y.shape
        ));
    }
    if x.shape[..n - 2] != y.shape[..n - 2] {
        return Err(format!(
            "batch dimensions differ: {:?} @ {:?}",
            x.shape, y.shape
        ));
    }
    if x.shape[n - 1] != y.shape[n - 2] {
        return Err(format!(
            "inner dimensions differ: {:?} @ {:?}",
            x.shape, y.shape
        ));
    }
    let mut shape = x.shape.clone();
    shape[n - 1] = y.shape[n - 1];
    let mut t = Tensor::of(x.dtype, shape, x.constant && y.constant);
    t.splits[..n - 1].clone_from_slice(&x.splits[..n - 1]);
    t.splits[n - 1].clone_from(&y.splits[n - 1]);
    Ok(Data::Tensor(t))
}

fn conv2d(a: &Operands) -> Result<Data, String> {
    let (sh, sw, pad) = (a.int(0)?, a.int(1)?, a.int(2)?);
    act_ok(a.int(3)?)?;
    let (x, w) = (a.tensor(4)?, a.tensor(5)?);
    same_dtype(x, w)?;
    if x.shape.len() != 4 || w.shape.len() != 4 {
        return Err(format!(
            "input and weight must be 4-D (NCHW, OIHW): {:?}, {:?}",
            x.shape, w.shape
        ));
    }
    let (c, wi, o) = (x.shape[1], w.shape[1], w.shape[0]);
    if wi == 0 || c % wi != 0 || o % (c / wi) != 0 {
        return Err(format!(
            "weight {:?} does not fit input {:?} (groups = C / I must divide O)",
            w.shape, x.shape
        ));
    }
    if sh < 1 || sw < 1 {
        return Err(format!("strides must be positive, got {sh}, {sw}"));
    }
    let h = out_size(x.shape[2], w.shape[2], sh as usize, pad)?;
    let wd = out_size(x.shape[3], w.shape[3], sw as usize, pad)?;
    let mut t = Tensor::of(
        x.dtype,
        vec![x.shape[0], o, h, wd],
        x.constant && w.constant,
    );
    t.splits[0].clone_from(&x.splits[0]);
    t.splits[1].clone_from(&w.splits[0]);
    Ok(Data::Tensor(t))
}

fn pool(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let (kh, kw, sh, sw, pad) = (a.int(1)?, a.int(2)?, a.int(3)?, a.int(4)?, a.int(5)?);
    act_ok(a.int(6)?)?;
    if x.shape.len() != 4 {
        return Err(format!("input must be 4-D NCHW: {:?}", x.shape));
    }
    if kh < 1 || kw < 1 || sh < 1 || sw < 1 {
        return Err("kernel and strides must be positive".into());
    }
    let h = out_size(x.shape[2], kh as usize, sh as usize, pad)?;
    let w = out_size(x.shape[3], kw as usize, sw as usize, pad)?;
    let mut t = Tensor::of(x.dtype, vec![x.shape[0], x.shape[1], h, w], x.constant);
    t.splits[..2].clone_from_slice(&x.splits[..2]);
    Ok(Data::Tensor(t))
}

fn transpose(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let perm = a.list(1)?;
    let mut seen = perm.to_vec();
    seen.sort_unstable();
    if seen != (0..x.shape.len() as i64).collect::<Vec<_>>() {
        return Err(format!(
            "{perm:?} is not a permutation of the axes of {:?}",
            x.shape
        ));
    }
    let mut t = Tensor::of(
        x.dtype,
        perm.iter().map(|&i| x.shape[i as usize]).collect(),
        x.constant,
    );
    t.splits = perm.iter().map(|&i| x.splits[i as usize].clone()).collect();
    Ok(Data::Tensor(t))
}

fn enlarge(a: &Operands) -> Result<Data, String> {
    let (w, r) = (a.tensor(0)?, a.tensor(1)?);
    if w.shape.len() != 4 || r.shape.len() != 4 {
        return Err(format!("kernels must be 4-D: {:?}, {:?}", w.shape, r.shape));
    }
    let (kh, kw) = (r.shape[2], r.shape[3]);
    if w.shape[2] > kh
        || w.shape[3] > kw
        || (kh - w.shape[2]) % 2 != 0
        || (kw - w.shape[3]) % 2 != 0
    {
        return Err(format!(
            "kernel {:?} cannot be centred in {kh}x{kw}",
            w.shape
        ));
    }
    let mut t = Tensor::of(w.dtype, vec![w.shape[0], w.shape[1], kh, kw], w.constant);
    t.splits[..2].clone_from_slice(&w.splits[..2]);
    Ok(Data::Tensor(t))
}

fn concat(a: &Operands) -> Result<Data, String> {
    let (axis, ndim) = (a.int(0)?, a.int(1)?);
    let ts = a.tensors(2)?;
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
        same_dtype(first, t)?;
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
    for t in ts[..ts.len() - 1].iter().rev() {
        tree = Some(Arc::new(SplitTree {
            at: t.shape[ax],
            left: t.splits[ax].clone(),
            right: tree,
        }));
    }
    out.splits[ax] = tree;
    for i in 0..n {
        if i != ax && out.splits[i].is_none() {
            out.splits[i] = ts.iter().find_map(|t| t.splits[i].clone());
        }
    }
    Ok(Data::Tensor(out))
}

fn split(a: &Operands) -> Result<Data, String> {
    let axis = a.int(0)?;
    let x = a.tensor(1)?;
    let ax = usize::try_from(axis)
        .ok()
        .filter(|a| *a < x.shape.len())
        .ok_or_else(|| format!("axis {axis} out of range for {:?}", x.shape))?;
    let tree = x.splits[ax]
        .clone()
        .ok_or_else(|| format!("axis {axis} of {:?} was not joined by a concat", x.shape))?;
    let mut l = x.clone();
    let mut r = x.clone();
    l.shape[ax] = tree.at;
    r.shape[ax] = x.shape[ax] - tree.at;
    l.splits[ax].clone_from(&tree.left);
    r.splits[ax].clone_from(&tree.right);
    Ok(Data::Pair(Box::new((l, r))))
}

fn split_part(a: &Operands) -> Result<Data, String> {
    let p = a.pair(0)?;
    Ok(Data::Tensor(if a.op_name() == "split_0" {
        p.0.clone()
    } else {
        p.1.clone()
    }))
}

fn merge(a: &Operands) -> Result<Data, String> {
    let w = a.tensor(0)?;
    let count = a.int(1)?;
    if w.shape.len() != 4 || count < 1 || w.shape[0] % count as usize != 0 {
        return Err(format!(
            "weight {:?} cannot merge {count} groups (O must be a multiple of count)",
            w.shape
        ));
    }
    let mut shape = w.shape.clone();
    shape[1] *= count as usize;
    let mut t = Tensor::of(w.dtype, shape, w.constant);
    t.splits[0].clone_from(&w.splits[0]);
    Ok(Data::Tensor(t))
}

fn reshape(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let s = a.list(1)?;
    if s.iter().any(|d| *d < 1) {
        return Err(format!("target shape {s:?} must have positive dimensions"));
    }
    let shape: Vec<usize> = s.iter().map(|d| *d as usize).collect();
    if shape.iter().product::<usize>() != x.volume() {
        return Err(format!("cannot reshape {:?} to {:?}", x.shape, shape));
    }
    Ok(Data::Tensor(Tensor::of(x.dtype, shape, x.constant)))
}

fn batchnorm(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    if x.shape.len() < 2 {
        return Err(format!("input must have a channel axis: {:?}", x.shape));
    }
    let mut constant = x.constant;
    for p in a.tensors(1)? {
        same_dtype(x, p)?;
        if p.shape != [x.shape[1]] {
            return Err(format!(
                "parameter {:?} must be [C] = [{}]",
                p.shape, x.shape[1]
            ));
        }
        constant &= p.constant;
    }
    let mut t = x.clone();
    t.constant = constant;
    Ok(Data::Tensor(t))
}

fn opaque(a: &Operands) -> Result<Data, String> {
    let s = a.sym(0)?;
    let (dtype, dims) = parse_leaf_type(s.as_str())
        .ok_or_else(|| format!("type `{s}` is not `name@d0_d1_...[:dtype]`"))?;
    a.tensors(1)?;
    // Never constant (it is not pre-computed) and no split positions: nothing the rules
    // know about its operands is carried through it.
    Ok(Data::Tensor(Tensor::of(dtype, dims, false)))
}
