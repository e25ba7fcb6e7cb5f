//! The hlo dialect: XLA HLO operators the general tensor dialect cannot express exactly.
//!
//! Each operator follows XLA's operation semantics
//! (<https://openxla.org/xla/operation_semantics>): `dot_general` is HLO `dot` with its
//! dimension numbers, `convolution` is HLO `convolution` with `dim_labels`, `window` and
//! group counts, `broadcast_in_dim` is HLO `broadcast` with `dimensions=`, `iota`,
//! `reduce_window` (an add, max or min window reduction whose padding value is that
//! reduction's identity) and `concatenate` (any number of operands). The HLO front end
//! (`tensat_py.frontends.hlo`) translates into them and prints them back; their NumPy
//! semantics are in `tensat_py.ops.hlo`.
//!
//! ```
//! use _core::analysis::TensorAnalysis;
//! let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
//! let id = eg.add_expr(
//!     &"(dot_general (input a@8_2_3) (input b@8_3_5) [0] [0] [2] [1])".parse().unwrap(),
//! );
//! assert_eq!(eg[id].data.tensor().unwrap().shape, vec![8, 2, 5]);
//! ```

use super::taso::same_dtype;
use super::{op, Arg, Dialect, OpDecl, Operands, Output};
use crate::analysis::{DType, Data, Tensor};
use Arg::{Int, List, Sym, Tensor as T};

/// The hlo dialect.
pub static DIALECT: Dialect = Dialect {
    name: "hlo",
    ops: &[
        op(
            "dot_general",
            &[
                T("lhs"),
                T("rhs"),
                List("lhs_batch"),
                List("rhs_batch"),
                List("lhs_contract"),
                List("rhs_contract"),
            ],
            dot_general,
            "HLO dot: contract the listed axes, batch axes first, then lhs and rhs free axes",
        ),
        op(
            "convolution",
            &[
                T("x"),
                T("w"),
                List("strides"),
                List("padding"),
                List("lhs_dilation"),
                List("rhs_dilation"),
                Sym("dim_labels"),
                Int("feature_groups"),
                Int("batch_groups"),
            ],
            convolution,
            "HLO convolution with dim_labels, window and group counts",
        ),
        op(
            "broadcast_in_dim",
            &[T("x"), List("shape"), List("dims")],
            broadcast_in_dim,
            "HLO broadcast: operand axis i becomes output axis dims[i]",
        ),
        op(
            "iota",
            &[List("shape"), Sym("dtype"), Int("dim")],
            iota,
            "HLO iota: the index along one axis",
        ),
        op(
            "reduce_window",
            &[
                T("x"),
                Sym("kind"),
                List("window"),
                List("strides"),
                List("padding"),
            ],
            reduce_window,
            "HLO reduce-window with add, max or min, padded with its identity",
        ),
        OpDecl {
            name: "concatenate",
            operands: &[Int("dim")],
            variadic: Some(T("x")),
            output: Output::Tensor,
            infer: concatenate,
            summary: "HLO concatenate of any number of operands along one axis",
            rlo_cost: None,
        },
    ],
};

fn numbers(t: &Tensor) -> Result<(), String> {
    if t.dtype == DType::Bool {
        return Err("needs numbers, got a bool tensor".into());
    }
    Ok(())
}

/// Check a list of distinct axes below `rank`; returns them as `usize`.
fn axes(what: &str, l: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(l.len());
    for &a in l {
        let ok = a >= 0 && (a as usize) < rank && !out.contains(&(a as usize));
        if !ok {
            return Err(format!(
                "{what} {l:?} must be distinct axes below the rank {rank}"
            ));
        }
        out.push(a as usize);
    }
    Ok(out)
}

/// `dot_general` (XLA DotGeneral): output `[batch..., lhs free..., rhs free...]`.
fn dot_general(a: &Operands) -> Result<Data, String> {
    let (l, r) = (a.tensor(0)?, a.tensor(1)?);
    same_dtype(l, r)?;
    numbers(l)?;
    let lb = axes("lhs_batch", a.list(2)?, l.shape.len())?;
    let rb = axes("rhs_batch", a.list(3)?, r.shape.len())?;
    let lc = axes("lhs_contract", a.list(4)?, l.shape.len())?;
    let rc = axes("rhs_contract", a.list(5)?, r.shape.len())?;
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err("batch and contracting lists must pair up".into());
    }
    for (i, j) in lb.iter().zip(&rb).chain(lc.iter().zip(&rc)) {
        if l.shape[*i] != r.shape[*j] {
            return Err(format!(
                "lhs axis {i} ({}) and rhs axis {j} ({}) differ",
                l.shape[*i], r.shape[*j]
            ));
        }
    }
    if lb.iter().any(|x| lc.contains(x)) || rb.iter().any(|x| rc.contains(x)) {
        return Err("an axis is both batch and contracting".into());
    }
    // Output axes: lhs batch, lhs free, rhs free; each keeps the split positions a concat
    // left on the axis it comes from (so `split` can take a merged dot apart, as for
    // TASO's matmul: Tensat section 3).
    let mut from: Vec<(&Tensor, usize)> = lb.iter().map(|i| (l, *i)).collect();
    from.extend(
        (0..l.shape.len())
            .filter(|i| !lb.contains(i) && !lc.contains(i))
            .map(|i| (l, i)),
    );
    from.extend(
        (0..r.shape.len())
            .filter(|i| !rb.contains(i) && !rc.contains(i))
            .map(|i| (r, i)),
    );
    let shape = from.iter().map(|(t, i)| t.shape[*i]).collect();
    let mut t = Tensor::of(l.dtype, shape, l.constant && r.constant);
    t.splits = from.iter().map(|(x, i)| x.splits[*i].clone()).collect();
    Ok(Data::Tensor(t))
}

/// The axes a `dim_labels` string names: `(batch, feature, spatial...)` of the input,
/// `(input feature, output feature, spatial...)` of the kernel and `(batch, feature,
/// spatial...)` of the output.
///
/// ```
/// let l = _core::lang::hlo::parse_dim_labels("b01f_01io->b01f").unwrap();
/// assert_eq!(l.0, vec![0, 3, 1, 2]);
/// assert_eq!(l.1, vec![2, 3, 0, 1]);
/// ```
#[allow(clippy::type_complexity)]
pub fn parse_dim_labels(s: &str) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>), String> {
    let bad = || format!("dim_labels `{s}` is not like b01f_01io->b01f");
    let (ins, out) = s.split_once("->").ok_or_else(bad)?;
    let (inp, ker) = ins.split_once('_').ok_or_else(bad)?;
    let n = inp.len().checked_sub(2).ok_or_else(bad)?;
    let find = |text: &str, a: char, b: char| -> Result<Vec<usize>, String> {
        if text.len() != n + 2 {
            return Err(bad());
        }
        let mut v = vec![text.find(a).ok_or_else(bad)?, text.find(b).ok_or_else(bad)?];
        for d in 0..n {
            let c = char::from_digit(d as u32, 10).ok_or_else(bad)?;
            v.push(text.find(c).ok_or_else(bad)?);
        }
        let mut seen = v.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != n + 2 {
            return Err(bad());
        }
        Ok(v)
    };
    Ok((
        find(inp, 'b', 'f')?,
        find(ker, 'i', 'o')?,
        find(out, 'b', 'f')?,
    ))
}

fn positive(what: &str, l: &[i64], n: usize) -> Result<Vec<usize>, String> {
    if l.len() != n || l.iter().any(|v| *v < 1) {
        return Err(format!("{what} {l:?} must be {n} positive integers"));
    }
    Ok(l.iter().map(|v| *v as usize).collect())
}

/// Output size of one window axis: input `size` dilated by `ld`, padded by `lo`/`hi`,
/// window `k` dilated by `rd`, stride `s` (XLA's ShapeInference for windows).
fn window_out(
    size: usize,
    k: usize,
    s: usize,
    lo: i64,
    hi: i64,
    ld: usize,
    rd: usize,
) -> Result<usize, String> {
    let dilated = (size as i64 - 1) * ld as i64 + 1;
    let padded = dilated + lo + hi;
    let win = (k as i64 - 1) * rd as i64 + 1;
    if padded < win {
        return Err(format!(
            "window {k} (dilated {win}) does not fit the padded size {padded}"
        ));
    }
    Ok(((padded - win) / s as i64 + 1) as usize)
}

/// `convolution` (XLA Conv with ConvolutionDimensionNumbers from `dim_labels`).
fn convolution(a: &Operands) -> Result<Data, String> {
    let (x, w) = (a.tensor(0)?, a.tensor(1)?);
    same_dtype(x, w)?;
    numbers(x)?;
    let (il, kl, ol) = parse_dim_labels(a.sym(6)?.as_str())?;
    let n = il.len() - 2;
    if x.shape.len() != n + 2 || w.shape.len() != n + 2 {
        return Err(format!(
            "input {:?} and kernel {:?} must have rank {} for dim_labels `{}`",
            x.shape,
            w.shape,
            n + 2,
            a.sym(6)?
        ));
    }
    let strides = positive("strides", a.list(2)?, n)?;
    let pad = a.list(3)?;
    if pad.len() != 2 * n {
        return Err(format!(
            "padding {pad:?} must be {} integers (lo, hi per axis)",
            2 * n
        ));
    }
    let ld = positive("lhs_dilation", a.list(4)?, n)?;
    let rd = positive("rhs_dilation", a.list(5)?, n)?;
    let (fg, bg) = (a.int(7)?, a.int(8)?);
    if fg < 1 || bg < 1 {
        return Err("group counts must be positive".into());
    }
    let (fg, bg) = (fg as usize, bg as usize);
    let (batch, feat) = (x.shape[il[0]], x.shape[il[1]]);
    let (kin, kout) = (w.shape[kl[0]], w.shape[kl[1]]);
    if feat != kin * fg || kout % fg != 0 {
        return Err(format!(
            "input features {feat} must be kernel input features {kin} x feature_groups {fg}, \
             and output features {kout} divisible by it"
        ));
    }
    if batch % bg != 0 || kout % bg != 0 || (bg > 1 && fg > 1) {
        return Err(format!(
            "batch_groups {bg} must divide batch {batch} and features {kout}"
        ));
    }
    let mut shape = vec![0; n + 2];
    shape[ol[0]] = batch / bg;
    shape[ol[1]] = kout;
    for d in 0..n {
        shape[ol[2 + d]] = window_out(
            x.shape[il[2 + d]],
            w.shape[kl[2 + d]],
            strides[d],
            pad[2 * d],
            pad[2 * d + 1],
            ld[d],
            rd[d],
        )?;
    }
    Ok(Data::Tensor(Tensor::of(
        x.dtype,
        shape,
        x.constant && w.constant,
    )))
}

/// `broadcast_in_dim` (XLA Broadcast/BroadcastInDim): operand axis `i` maps to output axis
/// `dims[i]` (strictly increasing) and has that axis's size or size 1.
fn broadcast_in_dim(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let s = a.list(1)?;
    let dims = a.list(2)?;
    if s.iter().any(|d| *d < 1) {
        return Err(format!("shape {s:?} must have positive dimensions"));
    }
    let shape: Vec<usize> = s.iter().map(|d| *d as usize).collect();
    if dims.len() != x.shape.len() || dims.windows(2).any(|p| p[0] >= p[1]) {
        return Err(format!(
            "dims {dims:?} must be {} increasing axes",
            x.shape.len()
        ));
    }
    let mut t = Tensor::of(x.dtype, shape.clone(), x.constant);
    for (i, &d) in dims.iter().enumerate() {
        let ok = d >= 0 && (d as usize) < shape.len();
        if !ok || (x.shape[i] != 1 && x.shape[i] != shape[d as usize]) {
            return Err(format!(
                "cannot broadcast {:?} to {shape:?} along {dims:?}",
                x.shape
            ));
        }
        if x.shape[i] == shape[d as usize] {
            t.splits[d as usize].clone_from(&x.splits[i]);
        }
    }
    Ok(Data::Tensor(t))
}

/// `iota` (XLA Iota): constant, the index along axis `dim`.
fn iota(a: &Operands) -> Result<Data, String> {
    let s = a.list(0)?;
    let dtype = a.dtype(1)?;
    let dim = a.int(2)?;
    if s.is_empty() || s.iter().any(|d| *d < 1) {
        return Err(format!(
            "shape {s:?} must be non-empty with positive dimensions"
        ));
    }
    if dim < 0 || dim as usize >= s.len() || dtype == DType::Bool {
        return Err(format!("dim {dim} out of range (or a bool dtype)"));
    }
    Ok(Data::Tensor(Tensor::of(
        dtype,
        s.iter().map(|d| *d as usize).collect(),
        true,
    )))
}

/// `reduce_window` (XLA ReduceWindow with an add, max or min computation).
fn reduce_window(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    numbers(x)?;
    let kind = a.sym(1)?;
    if !matches!(kind.as_str(), "add" | "max" | "min") {
        return Err(format!("kind `{kind}` is not add, max or min"));
    }
    let r = x.shape.len();
    let win = positive("window", a.list(2)?, r)?;
    let strides = positive("strides", a.list(3)?, r)?;
    let pad = a.list(4)?;
    if pad.len() != 2 * r || pad.iter().any(|p| *p < 0) {
        return Err(format!(
            "padding {pad:?} must be {} non-negative integers",
            2 * r
        ));
    }
    let shape = (0..r)
        .map(|d| {
            window_out(
                x.shape[d],
                win[d],
                strides[d],
                pad[2 * d],
                pad[2 * d + 1],
                1,
                1,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Data::Tensor(Tensor::of(x.dtype, shape, x.constant)))
}

/// `concatenate` (XLA ConcatInDim): operands agree off axis `dim`.
fn concatenate(a: &Operands) -> Result<Data, String> {
    let dim = a.int(0)?;
    let ts = a.tensors(1)?;
    let first = ts.first().ok_or("needs at least one operand")?;
    let r = first.shape.len();
    if dim < 0 || dim as usize >= r {
        return Err(format!("dim {dim} out of range for rank {r}"));
    }
    let d = dim as usize;
    let mut shape = first.shape.clone();
    shape[d] = 0;
    for t in &ts {
        same_dtype(first, t)?;
        let ok = t.shape.len() == r && (0..r).all(|i| i == d || t.shape[i] == first.shape[i]);
        if !ok {
            return Err(format!(
                "operands {:?} and {:?} differ off axis {d}",
                first.shape, t.shape
            ));
        }
        shape[d] += t.shape[d];
    }
    let constant = ts.iter().all(|t| t.constant);
    Ok(Data::Tensor(Tensor::of(first.dtype, shape, constant)))
}

#[cfg(test)]
mod tests {
    use crate::lang::testing::{error, shape};

    #[test]
    fn dot_general_keeps_the_split_positions_of_a_concatenated_rhs() {
        let m = "(split_1 (split 1 (dot_general (input x@4_2) \
                 (concat 1 2 (weight a@2_3) (weight b@2_5)) [] [] [1] [0])))";
        assert_eq!(shape(m), vec![4, 5]);
    }

    #[test]
    fn dot_general_orders_batch_then_free_axes() {
        assert_eq!(
            shape("(dot_general (input a@2_3) (input b@3_4) [] [] [1] [0])"),
            vec![2, 4]
        );
        assert_eq!(
            shape("(dot_general (input a@7_2_3) (input b@4_3_7) [0] [2] [2] [1])"),
            vec![7, 2, 4]
        );
        assert!(
            error("(dot_general (input a@2_3) (input b@4_4) [] [] [1] [0])").contains("differ")
        );
    }

    #[test]
    fn convolution_follows_dim_labels_and_window() {
        // NHWC input, HWIO kernel, 5x5 window, padding 2 each side.
        assert_eq!(
            shape("(convolution (input x@4_16_16_3) (input w@5_5_3_8) [1,1] [2,2,2,2] [1,1] [1,1] b01f_01io->b01f 1 1)"),
            vec![4, 16, 16, 8]
        );
        // stride 2, pad 0_1: (300 + 1 - 3) / 2 + 1 = 150.
        assert_eq!(
            shape("(convolution (input x@1_300_300_3) (input w@3_3_3_32) [2,2] [0,1,0,1] [1,1] [1,1] b01f_01io->b01f 1 1)"),
            vec![1, 150, 150, 32]
        );
        // depthwise: 8 groups of one channel.
        assert_eq!(
            shape("(convolution (input x@1_6_6_8) (input w@3_3_1_8) [1,1] [1,1,1,1] [1,1] [1,1] b01f_01io->b01f 8 1)"),
            vec![1, 6, 6, 8]
        );
        assert!(error("(convolution (input x@1_6_6_8) (input w@3_3_2_8) [1,1] [1,1,1,1] [1,1] [1,1] b01f_01io->b01f 1 1)").contains("features"));
    }

    #[test]
    fn broadcast_iota_reduce_window_concatenate() {
        assert_eq!(
            shape("(broadcast_in_dim (input x@3) [2,3,4] [1])"),
            vec![2, 3, 4]
        );
        assert!(error("(broadcast_in_dim (input x@3) [2,3,4] [2])").contains("cannot broadcast"));
        assert_eq!(shape("(iota [2,5] int32 1)"), vec![2, 5]);
        assert_eq!(
            shape("(reduce_window (input x@1_8_8_2) max [1,3,3,1] [1,2,2,1] [0,0,0,1,0,1,0,0])"),
            vec![1, 4, 4, 2]
        );
        assert_eq!(
            shape("(concatenate 1 (input a@2_3) (input b@2_1) (input c@2_2))"),
            vec![2, 6]
        );
        assert!(error("(concatenate 0 (input a@2_3) (input b@2_1))").contains("differ"));
    }
}
