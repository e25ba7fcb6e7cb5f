//! The tensor dialect: general tensor operators with NumPy/ONNX broadcasting, which the
//! ONNX and HLO front ends translate into.
//!
//! Binary and ternary elementwise operators broadcast multidirectionally (NumPy's rule,
//! ONNX "Broadcasting in ONNX"): shapes are right-aligned and each pair of dimensions is
//! equal or one of them is 1. Operands of one operator share one dtype; comparisons yield
//! `bool`; `cast` is the only operator that changes a dtype. Axes and lists are
//! non-negative and normalised by the front ends. The semantics of every operator are in
//! docs/language.md and in `tensat_py.ops.tensor` (the NumPy reference).
//!
//! ```
//! use _core::analysis::{Data, TensorAnalysis};
//! let mut eg: egg::EGraph<_core::lang::Mdl, TensorAnalysis> = Default::default();
//! let id = eg.add_expr(&"(add (input x@4_1_3) (input y@5_1))".parse().unwrap());
//! assert_eq!(eg[id].data.tensor().unwrap().shape, vec![4, 5, 3]);
//! ```

use super::taso::{merge_splits, same, same_dtype, same_float};
use super::{op, Arg, Dialect, Operands};
use crate::analysis::{DType, Data, Tensor};
use Arg::{Float as F, Int, List, Sym, Tensor as T};

const AB: &[Arg] = &[T("a"), T("b")];
const X: &[Arg] = &[T("x")];
const REDUCE: &[Arg] = &[T("x"), List("axes"), Int("keepdims")];

/// The tensor dialect.
pub static DIALECT: Dialect = Dialect {
    name: "tensor",
    ops: &[
        op("add", AB, arith, "a + b, broadcasting").rlo(1.0),
        op("sub", AB, arith, "a - b, broadcasting").rlo(1.0),
        op("mul", AB, arith, "a * b, broadcasting").rlo(2.0),
        op(
            "div",
            AB,
            arith,
            "a / b, broadcasting (integers truncate toward zero)",
        )
        .rlo(2.0),
        op("pow", AB, arith, "a ** b, broadcasting"),
        op("max", AB, arith, "elementwise maximum, broadcasting").rlo(1.0),
        op("min", AB, arith, "elementwise minimum, broadcasting").rlo(1.0),
        op("equal", AB, compare, "a == b -> bool, broadcasting").rlo(1.0),
        op("less", AB, compare, "a < b -> bool, broadcasting").rlo(1.0),
        op("less_equal", AB, compare, "a <= b -> bool, broadcasting").rlo(1.0),
        op("greater", AB, compare, "a > b -> bool, broadcasting").rlo(1.0),
        op("greater_equal", AB, compare, "a >= b -> bool, broadcasting").rlo(1.0),
        op(
            "select",
            &[T("cond"), T("a"), T("b")],
            select,
            "cond ? a : b, broadcasting (ONNX Where, HLO select)",
        ),
        op("neg", X, signed, "-x").rlo(1.0),
        op("abs", X, signed, "|x|").rlo(1.0),
        op("exp", X, same_float, "e ** x").rlo(4.0),
        op("log", X, same_float, "natural logarithm").rlo(4.0),
        op("sqrt", X, same_float, "square root").rlo(4.0),
        op("rsqrt", X, same_float, "1 / sqrt(x)"),
        op("reciprocal", X, same_float, "1 / x"),
        op("erf", X, same_float, "the error function").rlo(4.0),
        op("gelu", X, same_float, "0.5 x (1 + erf(x / sqrt 2))"),
        op(
            "gelu_tanh",
            X,
            same_float,
            "0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))",
        ),
        op("hard_swish", X, same_float, "x max(0, min(1, x / 6 + 0.5))"),
        op("softplus", X, same_float, "log(1 + exp(x))"),
        op(
            "clip",
            &[T("x"), F("lo"), F("hi")],
            clip,
            "min(max(x, lo), hi)",
        ),
        op(
            "hard_sigmoid",
            &[T("x"), F("alpha"), F("beta")],
            float_params,
            "max(0, min(1, alpha x + beta))",
        ),
        op(
            "leaky_relu",
            &[T("x"), F("alpha")],
            float_params,
            "x if x >= 0 else alpha x",
        ),
        op("reduce_sum", REDUCE, reduce, "sum over axes"),
        op("reduce_mean", REDUCE, reduce, "mean over axes"),
        op("reduce_max", REDUCE, reduce, "maximum over axes"),
        op("reduce_min", REDUCE, reduce, "minimum over axes"),
        op("reduce_prod", REDUCE, reduce, "product over axes"),
        op(
            "softmax",
            &[T("x"), Int("axis")],
            softmax,
            "exp(x - max) / sum over one axis",
        ),
        op(
            "layer_norm",
            &[T("x"), T("scale"), T("bias"), Int("axis"), F("epsilon")],
            layer_norm,
            "normalise over axes [axis, rank), then scale and bias",
        ),
        op(
            "global_avg_pool",
            X,
            global_avg_pool,
            "mean over the spatial axes of [N, C, ...]",
        ),
        op(
            "broadcast_to",
            &[T("x"), List("shape")],
            broadcast_to,
            "numpy.broadcast_to",
        ),
        op(
            "slice",
            &[
                T("x"),
                List("starts"),
                List("ends"),
                List("axes"),
                List("steps"),
            ],
            slice,
            "Python slices start:end:step on the given axes",
        ),
        op(
            "pad",
            &[T("x"), List("pads"), Sym("mode"), F("value")],
            pad,
            "numpy.pad, ONNX pads order [begins..., ends...]",
        ),
        op(
            "gather",
            &[T("x"), Int("axis"), List("indices")],
            gather,
            "numpy.take with constant indices",
        ),
        op(
            "resize",
            &[T("x"), List("sizes"), Sym("mode")],
            resize,
            "nearest (asymmetric, floor) or linear (half-pixel) resampling",
        ),
        op("cast", &[T("x"), Sym("dtype")], cast, "convert to dtype").rlo(1.0),
        op(
            "scalar",
            &[F("value"), Sym("dtype")],
            scalar,
            "a rank-0 constant",
        )
        .rlo(0.0),
    ],
};

/// NumPy's broadcast of two shapes, or an error naming both.
///
/// ```
/// assert_eq!(_core::lang::tensor::broadcast(&[3, 1], &[4]), Ok(vec![3, 4]));
/// assert!(_core::lang::tensor::broadcast(&[3], &[4]).is_err());
/// ```
pub fn broadcast(x: &[usize], y: &[usize]) -> Result<Vec<usize>, String> {
    let n = x.len().max(y.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let a = if i + x.len() >= n {
            x[i + x.len() - n]
        } else {
            1
        };
        let b = if i + y.len() >= n {
            y[i + y.len() - n]
        } else {
            1
        };
        out[i] = match (a, b) {
            (a, b) if a == b => a,
            (1, b) => b,
            (a, 1) => a,
            _ => {
                return Err(format!(
                    "shapes {x:?} and {y:?} do not broadcast (axis {i}: {a} vs {b})"
                ))
            }
        };
    }
    Ok(out)
}

/// The broadcast result of `ts` with `dtype`; split positions come from operands whose
/// shape is the result's.
fn broadcast_all(ts: &[&Tensor], dtype: DType) -> Result<Tensor, String> {
    let mut shape = ts[0].shape.clone();
    for t in &ts[1..] {
        shape = broadcast(&shape, &t.shape)?;
    }
    let mut out = Tensor::of(dtype, shape, ts.iter().all(|t| t.constant));
    for t in ts {
        if t.shape == out.shape {
            merge_splits(&mut out, t);
        }
    }
    Ok(out)
}

fn arith(a: &Operands) -> Result<Data, String> {
    let (x, y) = (a.tensor(0)?, a.tensor(1)?);
    same_dtype(x, y)?;
    if x.dtype == DType::Bool {
        return Err("needs numbers, got bool tensors".into());
    }
    Ok(Data::Tensor(broadcast_all(&[x, y], x.dtype)?))
}

fn compare(a: &Operands) -> Result<Data, String> {
    let (x, y) = (a.tensor(0)?, a.tensor(1)?);
    same_dtype(x, y)?;
    Ok(Data::Tensor(broadcast_all(&[x, y], DType::Bool)?))
}

fn select(a: &Operands) -> Result<Data, String> {
    let (c, x, y) = (a.tensor(0)?, a.tensor(1)?, a.tensor(2)?);
    if c.dtype != DType::Bool {
        return Err(format!("condition must be bool, got {}", c.dtype.name()));
    }
    same_dtype(x, y)?;
    Ok(Data::Tensor(broadcast_all(&[c, x, y], x.dtype)?))
}

fn signed(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    if x.dtype == DType::Bool {
        return Err("needs numbers, got a bool tensor".into());
    }
    same(a)
}

fn float_params(a: &Operands) -> Result<Data, String> {
    for i in 1..a.len() {
        a.float(i)?;
    }
    same_float(a)
}

fn clip(a: &Operands) -> Result<Data, String> {
    let (lo, hi) = (a.float(1)?, a.float(2)?);
    if lo > hi {
        return Err(format!("lo {lo:?} is above hi {hi:?}"));
    }
    signed(a)
}

/// Check `axes` are strictly increasing and below `rank`.
fn axes_ok(axes: &[i64], rank: usize) -> Result<(), String> {
    let ok =
        axes.iter().all(|&a| a >= 0 && (a as usize) < rank) && axes.windows(2).all(|w| w[0] < w[1]);
    if !ok {
        return Err(format!(
            "axes {axes:?} must be increasing, non-negative and below the rank {rank}"
        ));
    }
    Ok(())
}

fn axis_ok(axis: i64, rank: usize) -> Result<usize, String> {
    usize::try_from(axis)
        .ok()
        .filter(|a| *a < rank)
        .ok_or_else(|| format!("axis {axis} out of range for rank {rank}"))
}

fn reduce(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let axes = a.list(1)?;
    let keep = a.int(2)?;
    if axes.is_empty() {
        return Err("axes must not be empty".into());
    }
    axes_ok(axes, x.shape.len())?;
    if !(0..=1).contains(&keep) {
        return Err(format!("keepdims must be 0 or 1, got {keep}"));
    }
    if x.dtype == DType::Bool {
        return Err("needs numbers, got a bool tensor".into());
    }
    if a.op_name() == "reduce_mean" && !x.dtype.is_float() {
        return Err(format!("needs a float tensor, got {}", x.dtype.name()));
    }
    let mut shape = vec![];
    let mut splits = vec![];
    for (i, d) in x.shape.iter().enumerate() {
        if axes.contains(&(i as i64)) {
            if keep == 1 {
                shape.push(1);
                splits.push(None);
            }
        } else {
            shape.push(*d);
            splits.push(x.splits[i].clone());
        }
    }
    let mut t = Tensor::of(x.dtype, shape, x.constant);
    t.splits = splits;
    Ok(Data::Tensor(t))
}

fn softmax(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let ax = axis_ok(a.int(1)?, x.shape.len())?;
    let mut t = same_float(a)?;
    if let Data::Tensor(t) = &mut t {
        t.splits[ax] = None;
    }
    Ok(t)
}

fn layer_norm(a: &Operands) -> Result<Data, String> {
    let (x, s, b) = (a.tensor(0)?, a.tensor(1)?, a.tensor(2)?);
    let ax = axis_ok(a.int(3)?, x.shape.len())?;
    let eps = a.float(4)?;
    if eps <= 0.0 {
        return Err(format!("epsilon must be positive, got {eps:?}"));
    }
    same_dtype(x, s)?;
    same_dtype(x, b)?;
    let norm = &x.shape[ax..];
    if s.shape != norm || b.shape != norm {
        return Err(format!(
            "scale {:?} and bias {:?} must have the normalised shape {norm:?}",
            s.shape, b.shape
        ));
    }
    let mut t = Tensor::of(
        x.dtype,
        x.shape.clone(),
        x.constant && s.constant && b.constant,
    );
    t.splits[..ax].clone_from_slice(&x.splits[..ax]);
    if !x.dtype.is_float() {
        return Err(format!("needs a float tensor, got {}", x.dtype.name()));
    }
    Ok(Data::Tensor(t))
}

fn global_avg_pool(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    if x.shape.len() < 3 {
        return Err(format!("input must be [N, C, spatial...]: {:?}", x.shape));
    }
    if !x.dtype.is_float() {
        return Err(format!("needs a float tensor, got {}", x.dtype.name()));
    }
    let mut shape = x.shape.clone();
    for d in &mut shape[2..] {
        *d = 1;
    }
    let mut t = Tensor::of(x.dtype, shape, x.constant);
    t.splits[..2].clone_from_slice(&x.splits[..2]);
    Ok(Data::Tensor(t))
}

fn positive_dims(what: &str, s: &[i64]) -> Result<Vec<usize>, String> {
    if s.iter().any(|d| *d < 1) {
        return Err(format!("{what} {s:?} must have positive dimensions"));
    }
    Ok(s.iter().map(|d| *d as usize).collect())
}

fn broadcast_to(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let shape = positive_dims("shape", a.list(1)?)?;
    let n = shape.len();
    let r = x.shape.len();
    let ok = r <= n
        && x.shape
            .iter()
            .enumerate()
            .all(|(i, d)| *d == 1 || *d == shape[n - r + i]);
    if !ok {
        return Err(format!("cannot broadcast {:?} to {shape:?}", x.shape));
    }
    let mut t = Tensor::of(x.dtype, shape, x.constant);
    for i in 0..r {
        if x.shape[i] == t.shape[n - r + i] {
            t.splits[n - r + i].clone_from(&x.splits[i]);
        }
    }
    Ok(Data::Tensor(t))
}

/// Length of `range(*slice(start, end, step).indices(dim))` (Python semantics).
///
/// ```
/// use _core::lang::tensor::slice_len;
/// assert_eq!(slice_len(10, 2, 8, 3), 2);
/// assert_eq!(slice_len(10, -1, -11, -1), 10);
/// assert_eq!(slice_len(5, 0, i64::MAX, 1), 5);
/// ```
pub fn slice_len(dim: usize, start: i64, end: i64, step: i64) -> usize {
    let d = dim as i64;
    let (lower, upper) = if step > 0 { (0, d) } else { (-1, d - 1) };
    let clamp = |v: i64| {
        if v < 0 {
            v.saturating_add(d).max(lower)
        } else {
            v.min(upper)
        }
    };
    let (s, e) = (clamp(start), clamp(end));
    let n = if step > 0 {
        if e > s {
            (e - s - 1) / step + 1
        } else {
            0
        }
    } else if s > e {
        (s - e - 1) / (-step) + 1
    } else {
        0
    };
    n as usize
}

fn slice(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let (starts, ends, axes, steps) = (a.list(1)?, a.list(2)?, a.list(3)?, a.list(4)?);
    let k = starts.len();
    if ends.len() != k || axes.len() != k || steps.len() != k {
        return Err(format!(
            "starts, ends, axes and steps need equal lengths: {starts:?} {ends:?} {axes:?} {steps:?}"
        ));
    }
    let mut shape = x.shape.clone();
    let mut splits = x.splits.clone();
    let mut seen = vec![false; x.shape.len()];
    for i in 0..k {
        let ax = axis_ok(axes[i], x.shape.len())?;
        if seen[ax] {
            return Err(format!("axis {ax} is sliced twice"));
        }
        seen[ax] = true;
        if steps[i] == 0 {
            return Err("step must not be 0".into());
        }
        let n = slice_len(x.shape[ax], starts[i], ends[i], steps[i]);
        if n == 0 {
            return Err(format!(
                "slice {}:{}:{} of axis {ax} (size {}) is empty",
                starts[i], ends[i], steps[i], x.shape[ax]
            ));
        }
        if n != x.shape[ax] {
            splits[ax] = None;
        }
        shape[ax] = n;
    }
    let mut t = Tensor::of(x.dtype, shape, x.constant);
    t.splits = splits;
    Ok(Data::Tensor(t))
}

fn pad(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let pads = a.list(1)?;
    let mode = a.sym(2)?;
    a.float(3)?;
    let r = x.shape.len();
    if pads.len() != 2 * r || pads.iter().any(|p| *p < 0) {
        return Err(format!(
            "pads {pads:?} must be {} non-negative integers (begins, then ends)",
            2 * r
        ));
    }
    match mode.as_str() {
        "constant" | "edge" => {}
        "reflect" => {
            for i in 0..r {
                if pads[i].max(pads[r + i]) as usize >= x.shape[i] {
                    return Err(format!(
                        "reflect padding {} on axis {i} needs a size above it, got {}",
                        pads[i].max(pads[r + i]),
                        x.shape[i]
                    ));
                }
            }
        }
        m => return Err(format!("mode `{m}` is not constant, reflect or edge")),
    }
    let shape = (0..r)
        .map(|i| x.shape[i] + (pads[i] + pads[r + i]) as usize)
        .collect();
    Ok(Data::Tensor(Tensor::of(x.dtype, shape, x.constant)))
}

fn gather(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let ax = axis_ok(a.int(1)?, x.shape.len())?;
    let idx = a.list(2)?;
    let d = x.shape[ax] as i64;
    if idx.is_empty() || idx.iter().any(|i| *i < -d || *i >= d) {
        return Err(format!(
            "indices {idx:?} must be non-empty and in [-{d}, {d})"
        ));
    }
    let mut t = x.clone();
    t.shape[ax] = idx.len();
    t.splits[ax] = None;
    Ok(Data::Tensor(t))
}

fn resize(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let sizes = positive_dims("sizes", a.list(1)?)?;
    let mode = a.sym(2)?;
    if sizes.len() != x.shape.len() {
        return Err(format!(
            "sizes {sizes:?} must have the input's rank {}",
            x.shape.len()
        ));
    }
    if !matches!(mode.as_str(), "nearest" | "linear") {
        return Err(format!("mode `{mode}` is not nearest or linear"));
    }
    if !x.dtype.is_float() {
        return Err(format!("needs a float tensor, got {}", x.dtype.name()));
    }
    Ok(Data::Tensor(Tensor::of(x.dtype, sizes, x.constant)))
}

fn cast(a: &Operands) -> Result<Data, String> {
    let x = a.tensor(0)?;
    let dtype = a.dtype(1)?;
    let mut t = x.clone();
    t.dtype = dtype;
    Ok(Data::Tensor(t))
}

fn scalar(a: &Operands) -> Result<Data, String> {
    let v = a.float(0)?;
    let dtype = a.dtype(1)?;
    let ok = match dtype {
        DType::Bool => v == 0.0 || v == 1.0,
        d if d.is_unsigned() => v.fract() == 0.0 && v >= 0.0,
        d if d.is_int() => v.fract() == 0.0,
        _ => true,
    };
    if !ok {
        return Err(format!("value {v:?} is not a {}", dtype.name()));
    }
    Ok(Data::Tensor(Tensor::of(dtype, vec![], true)))
}

#[cfg(test)]
mod tests {
    use crate::analysis::Data;
    use crate::lang::testing::{error, shape, type_of};

    #[test]
    fn binary_operators_broadcast_like_numpy() {
        assert_eq!(shape("(mul (input x@2_1_4) (input y@3_1))"), vec![2, 3, 4]);
        assert_eq!(shape("(sub (input x@) (input y@5))"), vec![5]);
        assert!(error("(add (input x@2_3) (input y@4))").contains("do not broadcast"));
    }

    #[test]
    fn operand_dtypes_must_agree_and_comparisons_give_bool() {
        assert!(error("(add (input x@2:float16) (input y@2))").contains("dtypes differ"));
        match type_of("(less (input x@2:int64) (input y@2:int64))") {
            Data::Tensor(t) => assert_eq!(t.dtype.name(), "bool"),
            d => panic!("{d:?}"),
        }
        match type_of("(cast (input x@2) int32)") {
            Data::Tensor(t) => assert_eq!(t.dtype.name(), "int32"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn reductions_drop_or_keep_axes() {
        assert_eq!(shape("(reduce_sum (input x@2_3_4) [0,2] 0)"), vec![3]);
        assert_eq!(shape("(reduce_max (input x@2_3_4) [1] 1)"), vec![2, 1, 4]);
        assert!(error("(reduce_mean (input x@2_3) [2] 0)").contains("axes"));
    }

    #[test]
    fn slicing_follows_python_slices() {
        assert_eq!(
            shape("(slice (input x@10_4) [2,-1] [8,-5] [0,1] [3,-1])"),
            vec![2, 4]
        );
        assert!(error("(slice (input x@4) [3] [1] [0] [1])").contains("empty"));
    }

    #[test]
    fn shape_operators() {
        assert_eq!(shape("(broadcast_to (input x@3_1) [2,3,4])"), vec![2, 3, 4]);
        assert_eq!(
            shape("(pad (input x@2_3) [0,1,1,2] constant 0.0)"),
            vec![3, 6]
        );
        assert_eq!(shape("(gather (input x@5_3) 0 [4,0,-1])"), vec![3, 3]);
        assert_eq!(
            shape("(resize (input x@1_2_3_3) [1,2,6,6] nearest)"),
            vec![1, 2, 6, 6]
        );
        assert_eq!(
            shape("(global_avg_pool (input x@1_8_7_7))"),
            vec![1, 8, 1, 1]
        );
        assert_eq!(
            shape("(layer_norm (input x@2_5) (weight g@5) (weight b@5) 1 1e-05)"),
            vec![2, 5]
        );
        assert_eq!(shape("(transpose (input x@4) [0])"), vec![4]);
        assert_eq!(shape("(reshape (input x@2_3) [6])"), vec![6]);
        assert!(shape("(scalar 1.0 float32)").is_empty());
        assert_eq!(shape("(softplus (input x@2_3))"), vec![2, 3]);
        assert!(error("(softplus (input i@2:int64))").contains("float"));
    }

    #[test]
    fn select_needs_a_bool_condition() {
        assert_eq!(
            shape("(select (less (input a@3) (input b@3)) (input x@2_3) (input y@3))"),
            vec![2, 3]
        );
        assert!(error("(select (input c@3) (input x@3) (input y@3))").contains("bool"));
    }
}
