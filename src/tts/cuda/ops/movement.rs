//! Host kernels that move data without arithmetic: shapes, reshapes, transposes, slices, concat,
//! split, expand, gather, pad, plus the small generators (ConstantOfShape, Range, NonZero).
//!
//! Input/output: [`Tensor`]s with ONNX opset-13+ semantics (axes and sizes as inputs). Indices may
//! be negative where ONNX allows it; anything out of range is an [`OpError`](crate::tts::cuda::tensor::OpError), never a panic.

use super::broadcast::broadcast_shape;
use super::elementwise::{broadcast_to, scalar_tensor};
use crate::tts::cuda::program::op::{Scalar, ViewOp};
use crate::tts::cuda::tensor::{Data, OpResult, Tensor, axis, numel, op_err, strides};

/// Copies the elements at `offset + Σ coord·stride` for every coordinate of `shape`.
pub fn strided_copy(x: &Tensor, shape: Vec<usize>, offset: isize, st: &[isize]) -> Tensor {
    let n = numel(&shape);
    let mut idx = Vec::with_capacity(n);
    if n > 0 {
        let rank = shape.len();
        let mut coord = vec![0usize; rank];
        let mut at = offset;
        for _ in 0..n {
            idx.push(at as usize);
            let mut d = rank;
            while d > 0 {
                d -= 1;
                coord[d] += 1;
                at += st[d];
                if coord[d] < shape[d] {
                    break;
                }
                at -= st[d] * shape[d] as isize;
                coord[d] = 0;
            }
        }
    }
    x.gather_flat(shape, idx.into_iter())
}

pub fn shape_of(x: &Tensor) -> Tensor {
    Tensor::i64(
        vec![x.shape.len()],
        x.shape.iter().map(|&d| d as i64).collect(),
    )
}

/// Resolves Reshape's target (0 copies a dimension unless `allow_zero`; one -1 is inferred).
pub fn reshape_target(from: &[usize], spec: &[i64], allow_zero: bool) -> OpResult<Vec<usize>> {
    let total = numel(from);
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allow_zero => out.push(*from.get(i).ok_or_else(|| {
                crate::tts::cuda::tensor::OpError(format!(
                    "Reshape {spec:?} copies a missing axis of {from:?}"
                ))
            })?),
            s if s >= 0 => out.push(s as usize),
            _ => return op_err(format!("bad Reshape target {spec:?}")),
        }
    }
    if let Some(i) = infer {
        let rest = numel(&out);
        if rest == 0 || !total.is_multiple_of(rest) {
            return op_err(format!("cannot reshape {from:?} to {spec:?}"));
        }
        out[i] = total / rest;
    }
    if numel(&out) != total {
        return op_err(format!("cannot reshape {from:?} to {spec:?}"));
    }
    Ok(out)
}

pub fn unsqueeze_shape(from: &[usize], axes: &[i64]) -> OpResult<Vec<usize>> {
    let rank = from.len() + axes.len();
    let mut ax: Vec<usize> = axes
        .iter()
        .map(|&a| axis(a, rank))
        .collect::<OpResult<_>>()?;
    ax.sort_unstable();
    if ax.windows(2).any(|w| w[0] == w[1]) {
        return op_err(format!("repeated Unsqueeze axes {axes:?}"));
    }
    let mut src = from.iter();
    Ok((0..rank)
        .map(|d| {
            if ax.binary_search(&d).is_ok() {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect())
}

pub fn squeeze_shape(from: &[usize], axes: Option<&[i64]>) -> OpResult<Vec<usize>> {
    let ax: Vec<usize> = match axes {
        Some(a) => a
            .iter()
            .map(|&v| axis(v, from.len()))
            .collect::<OpResult<_>>()?,
        None => (0..from.len()).filter(|&d| from[d] == 1).collect(),
    };
    if ax.iter().any(|&d| from[d] != 1) {
        return op_err(format!(
            "Squeeze of axes {ax:?} of {from:?}, which are not 1"
        ));
    }
    Ok(from
        .iter()
        .enumerate()
        .filter(|(d, _)| !ax.contains(d))
        .map(|(_, &n)| n)
        .collect())
}

pub fn transpose(x: &Tensor, perm: &[usize]) -> OpResult<Tensor> {
    Ok(Strided::dense(&x.shape).transpose(perm)?.copy_of(x))
}

pub fn concat(xs: &[&Tensor], ax: i64) -> OpResult<Tensor> {
    let first = xs
        .first()
        .ok_or_else(|| crate::tts::cuda::tensor::OpError("Concat of nothing".into()))?;
    let rank = first.shape.len();
    let a = axis(ax, rank)?;
    for x in xs {
        let same_rest =
            x.shape.len() == rank && (0..rank).all(|d| d == a || x.shape[d] == first.shape[d]);
        if !same_rest || x.dtype() != first.dtype() {
            return op_err(format!(
                "Concat of mismatched {:?} and {:?}",
                first.shape, x.shape
            ));
        }
    }
    let outer: usize = first.shape[..a].iter().product();
    let inner: usize = first.shape[a + 1..].iter().product();
    let mut shape = first.shape.clone();
    shape[a] = xs.iter().map(|x| x.shape[a]).sum();
    macro_rules! cat {
        ($variant:ident, $get:ident) => {{
            let mut v = Vec::with_capacity(numel(&shape));
            for o in 0..outer {
                for x in xs {
                    let d = x.$get()?;
                    let run = x.shape[a] * inner;
                    v.extend_from_slice(&d[o * run..(o + 1) * run]);
                }
            }
            Data::$variant(v)
        }};
    }
    let data = match first.data {
        Data::F32(_) => cat!(F32, as_f32),
        Data::I64(_) => cat!(I64, as_i64),
        Data::Bool(_) => cat!(Bool, as_bool),
    };
    Ok(Tensor { shape, data })
}

/// One sliced axis after ONNX clamping: first index, step and count.
fn slice_axis(dim: usize, start: i64, end: i64, step: i64) -> OpResult<(i64, i64, usize)> {
    if step == 0 {
        return op_err("Slice step 0");
    }
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (norm(start), norm(end));
    let (s, e) = if step > 0 {
        (s.clamp(0, d), e.clamp(0, d))
    } else {
        (s.clamp(0, d - 1), e.clamp(-1, d - 1))
    };
    let (s128, e128, st128) = (i128::from(s), i128::from(e), i128::from(step));
    let count = if step > 0 {
        (e128 - s128 + st128 - 1).div_euclid(st128).max(0)
    } else {
        (s128 - e128 - st128 - 1).div_euclid(-st128).max(0)
    };
    Ok((s, step, count as usize))
}

pub fn split(x: &Tensor, ax: i64, sizes: Option<&[i64]>, outputs: usize) -> OpResult<Vec<Tensor>> {
    let n = split_sizes(&x.shape, ax, sizes, outputs)?.len();
    let whole = Strided::dense(&x.shape);
    (0..n)
        .map(|k| Ok(whole.clone().split(ax, sizes, outputs, k)?.copy_of(x)))
        .collect()
}

/// Split's part sizes along `ax`: as given, or `outputs` equal parts (the last may be short).
pub fn split_sizes(
    shape: &[usize],
    ax: i64,
    sizes: Option<&[i64]>,
    outputs: usize,
) -> OpResult<Vec<usize>> {
    let dim = shape[axis(ax, shape.len())?];
    let sizes: Vec<usize> = match sizes {
        Some(s) if s.iter().all(|&v| v >= 0) => s.iter().map(|&v| v as usize).collect(),
        Some(s) => return op_err(format!("negative Split sizes {s:?}")),
        None if outputs > 0 => {
            let part = dim.div_ceil(outputs);
            (0..outputs)
                .map(|i| part.min(dim.saturating_sub(i * part)))
                .collect()
        }
        None => return op_err("Split into no outputs"),
    };
    if sizes.iter().sum::<usize>() != dim {
        return op_err(format!("Split sizes {sizes:?} do not add up to {dim}"));
    }
    Ok(sizes)
}

/// Where a view's elements lie in its source's buffer: element `c` of `shape` is at
/// `offset + Σ c·strides` (a stride may be 0, broadcast, or negative, reversed). Transpose,
/// Slice, Split and Expand are views, so one type serves their host copies, the device's copy
/// kernel and the fused kernels that read a view in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strided {
    pub shape: Vec<usize>,
    pub offset: isize,
    pub strides: Vec<isize>,
}

impl Strided {
    /// A whole tensor of `shape`, row-major.
    pub fn dense(shape: &[usize]) -> Strided {
        Strided {
            shape: shape.to_vec(),
            offset: 0,
            strides: strides(shape).iter().map(|&s| s as isize).collect(),
        }
    }

    /// Whether it reads its source as stored (offset 0, row-major).
    pub fn is_dense(&self) -> bool {
        *self == Strided::dense(&self.shape)
    }

    /// How far apart (in elements) its first and last elements can lie in the source.
    pub fn span(&self) -> usize {
        self.shape
            .iter()
            .zip(&self.strides)
            .map(|(&d, &s)| d.saturating_sub(1) * s.unsigned_abs())
            .sum()
    }

    pub fn transpose(self, perm: &[usize]) -> OpResult<Strided> {
        let r = self.shape.len();
        let mut seen = vec![false; r];
        if perm.len() != r
            || perm
                .iter()
                .any(|&p| p >= r || std::mem::replace(&mut seen[p], true))
        {
            return op_err(format!("perm {perm:?} for rank {r}"));
        }
        Ok(Strided {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            offset: self.offset,
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
        })
    }

    /// ONNX Slice (axes default to the first `starts.len()`; steps to 1).
    pub fn slice(
        mut self,
        starts: &[i64],
        ends: &[i64],
        axes: Option<&[i64]>,
        steps: Option<&[i64]>,
    ) -> OpResult<Strided> {
        let rank = self.shape.len();
        let axes: Vec<usize> = match axes {
            Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<OpResult<_>>()?,
            None => (0..starts.len()).collect(),
        };
        if starts.len() != axes.len()
            || ends.len() != axes.len()
            || steps.is_some_and(|s| s.len() != axes.len())
        {
            return op_err("Slice starts/ends/axes/steps differ in length");
        }
        for (i, &a) in axes.iter().enumerate() {
            let step = steps.map_or(1, |s| s[i]);
            let (first, step, count) = slice_axis(self.shape[a], starts[i], ends[i], step)?;
            if count > 0 {
                self.offset += first as isize * self.strides[a];
            }
            self.shape[a] = count;
            self.strides[a] *= step as isize;
        }
        Ok(self)
    }

    /// Part `index` of a Split.
    pub fn split(
        mut self,
        ax: i64,
        sizes: Option<&[i64]>,
        outputs: usize,
        index: usize,
    ) -> OpResult<Strided> {
        let parts = split_sizes(&self.shape, ax, sizes, outputs)?;
        let a = axis(ax, self.shape.len())?;
        let Some(&n) = parts.get(index) else {
            return op_err(format!("Split part {index} of {}", parts.len()));
        };
        let before: usize = parts[..index].iter().sum();
        self.offset += before as isize * self.strides[a];
        self.shape[a] = n;
        Ok(self)
    }

    /// Broadcast to `target` (numpy rules, as Expand and every elementwise input): new and
    /// stretched axes read with stride 0.
    pub fn expand(self, target: &[usize]) -> OpResult<Strided> {
        let shape = broadcast_shape(&[&self.shape, target])?;
        let lead = shape.len() - self.shape.len();
        let strides = (0..shape.len())
            .map(|d| match d.checked_sub(lead) {
                Some(k) if self.shape[k] == shape[d] => self.strides[k],
                _ => 0,
            })
            .collect();
        Ok(Strided {
            shape,
            offset: self.offset,
            strides,
        })
    }

    /// Through each of `ops` in turn.
    pub fn through(self, ops: &[ViewOp]) -> OpResult<Strided> {
        ops.iter().try_fold(self, |v, op| match op {
            ViewOp::Transpose(perm) => v.transpose(perm),
            ViewOp::Slice {
                starts,
                ends,
                axes,
                steps,
            } => v.slice(starts, ends, axes.as_deref(), steps.as_deref()),
            ViewOp::Split {
                axis,
                sizes,
                outputs,
                index,
            } => v.split(*axis, sizes.as_deref(), *outputs, *index),
            ViewOp::Expand(target) => v.expand(&expand_target(target)?),
        })
    }

    /// A dense copy of this view of `x` (a view built from `Strided::dense(&x.shape)`, so every
    /// element it reads is inside `x`).
    pub fn copy_of(self, x: &Tensor) -> Tensor {
        strided_copy(x, self.shape, self.offset, &self.strides)
    }
}

/// Expand's target as sizes (negative is bad input).
fn expand_target(shape: &[i64]) -> OpResult<Vec<usize>> {
    if shape.iter().any(|&d| d < 0) {
        return op_err(format!("Expand to {shape:?}"));
    }
    Ok(shape.iter().map(|&d| d as usize).collect())
}

pub fn expand(x: &Tensor, shape: &[i64]) -> OpResult<Tensor> {
    broadcast_to(x, &expand_target(shape)?)
}

fn index(i: i64, dim: usize) -> OpResult<usize> {
    let v = if i < 0 { i + dim as i64 } else { i };
    if v < 0 || v >= dim as i64 {
        return op_err(format!("index {i} out of range for size {dim}"));
    }
    Ok(v as usize)
}

pub fn gather(x: &Tensor, indices: &Tensor, ax: i64) -> OpResult<Tensor> {
    let a = axis(ax, x.shape.len())?;
    let ids = indices.as_i64()?;
    let dim = x.shape[a];
    let outer: usize = x.shape[..a].iter().product();
    let inner: usize = x.shape[a + 1..].iter().product();
    let ids: Vec<usize> = ids
        .iter()
        .map(|&i| index(i, dim))
        .collect::<OpResult<_>>()?;
    let mut shape = x.shape[..a].to_vec();
    shape.extend_from_slice(&indices.shape);
    shape.extend_from_slice(&x.shape[a + 1..]);
    let mut flat = Vec::with_capacity(numel(&shape));
    for o in 0..outer {
        for &i in &ids {
            let base = (o * dim + i) * inner;
            flat.extend(base..base + inner);
        }
    }
    Ok(x.gather_flat(shape, flat.into_iter()))
}

/// Constant padding; `pads` = all begins then all ends, negative values crop.
pub fn pad(x: &Tensor, pads: &[i64], value: Option<&Tensor>) -> OpResult<Tensor> {
    let r = x.shape.len();
    if pads.len() != 2 * r {
        return op_err(format!("{} pads for rank {r}", pads.len()));
    }
    let mut shape = Vec::with_capacity(r);
    for d in 0..r {
        let n = x.shape[d] as i64 + pads[d] + pads[r + d];
        if n < 0 {
            return op_err(format!("pads {pads:?} crop {:?} below nothing", x.shape));
        }
        shape.push(n as usize);
    }
    let fill = value.map(Tensor::scalar).transpose()?.unwrap_or(0.0);
    let st = strides(&x.shape);
    let n = numel(&shape);
    let mut src: Vec<Option<usize>> = Vec::with_capacity(n);
    let ost = strides(&shape);
    for i in 0..n {
        let mut off = 0usize;
        let mut inside = true;
        for d in 0..r {
            let c = (i / ost[d]) % shape[d];
            let s = c as i64 - pads[d];
            if s < 0 || s >= x.shape[d] as i64 {
                inside = false;
                break;
            }
            off += s as usize * st[d];
        }
        src.push(inside.then_some(off));
    }
    let data = match &x.data {
        Data::F32(v) => Data::F32(
            src.iter()
                .map(|o| o.map_or(fill as f32, |i| v[i]))
                .collect(),
        ),
        Data::I64(v) => Data::I64(
            src.iter()
                .map(|o| o.map_or(fill as i64, |i| v[i]))
                .collect(),
        ),
        Data::Bool(v) => Data::Bool(
            src.iter()
                .map(|o| o.map_or(fill != 0.0, |i| v[i]))
                .collect(),
        ),
    };
    Ok(Tensor { shape, data })
}

pub fn constant_of_shape(shape: &[i64], value: Scalar) -> OpResult<Tensor> {
    if shape.iter().any(|&d| d < 0) {
        return op_err(format!("ConstantOfShape {shape:?}"));
    }
    let s: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let n = numel(&s);
    Ok(scalar_tensor(value).gather_flat(s, std::iter::repeat_n(0, n)))
}

/// Piper's graphs never ask for more; a bound keeps a corrupt Range from exhausting memory.
const MAX_RANGE: f64 = 1e9;

pub fn range(start: &Tensor, limit: &Tensor, delta: &Tensor) -> OpResult<Tensor> {
    let (s, l, d) = (start.scalar()?, limit.scalar()?, delta.scalar()?);
    if d == 0.0 {
        return op_err("Range with delta 0");
    }
    let count = ((l - s) / d).ceil().max(0.0);
    if count > MAX_RANGE {
        return op_err(format!("Range of {count} values"));
    }
    let n = count as usize;
    Ok(match start.data {
        Data::I64(_) => {
            let (s, d) = (s as i64, d as i64);
            Tensor::i64(vec![n], (0..n as i64).map(|i| s + i * d).collect())
        }
        _ => {
            let (s, d) = (s as f32, d as f32);
            Tensor::f32(vec![n], (0..n).map(|i| s + i as f32 * d).collect())
        }
    })
}

pub fn nonzero(x: &Tensor) -> Tensor {
    let hits: Vec<usize> = match &x.data {
        Data::F32(v) => v
            .iter()
            .enumerate()
            .filter(|(_, a)| **a != 0.0)
            .map(|(i, _)| i)
            .collect(),
        Data::I64(v) => v
            .iter()
            .enumerate()
            .filter(|(_, a)| **a != 0)
            .map(|(i, _)| i)
            .collect(),
        Data::Bool(v) => v
            .iter()
            .enumerate()
            .filter(|(_, a)| **a)
            .map(|(i, _)| i)
            .collect(),
    };
    let r = x.shape.len();
    let st = strides(&x.shape);
    let mut out = vec![0i64; r * hits.len()];
    for (k, &h) in hits.iter().enumerate() {
        for d in 0..r {
            out[d * hits.len() + k] = ((h / st[d]) % x.shape[d]) as i64;
        }
    }
    Tensor::i64(vec![r, hits.len()], out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iota(shape: &[usize]) -> Tensor {
        Tensor::f32(
            shape.to_vec(),
            (0..numel(shape)).map(|i| i as f32).collect(),
        )
    }

    #[test]
    fn reshape_rules() {
        assert_eq!(
            reshape_target(&[2, 3, 4], &[0, -1], false).unwrap(),
            [2, 12]
        );
        assert_eq!(reshape_target(&[2, 0], &[0, 5], true).unwrap(), [0, 5]);
        assert!(reshape_target(&[2, 3], &[0, 5], false).is_err());
        assert!(reshape_target(&[2, 3], &[-1, -1], false).is_err());
        assert!(reshape_target(&[2, 3], &[4, -1], false).is_err());
        assert!(reshape_target(&[2], &[0, 0], false).is_err());
    }

    #[test]
    fn squeeze_unsqueeze() {
        assert_eq!(unsqueeze_shape(&[3, 4], &[0, -1]).unwrap(), [1, 3, 4, 1]);
        assert!(unsqueeze_shape(&[3], &[0, 0]).is_err());
        assert_eq!(squeeze_shape(&[1, 3, 1], None).unwrap(), [3]);
        assert_eq!(squeeze_shape(&[1, 3, 1], Some(&[-1])).unwrap(), [1, 3]);
        assert!(squeeze_shape(&[1, 3], Some(&[1])).is_err());
    }

    #[test]
    fn transpose_and_slice() {
        let x = iota(&[2, 3]);
        let t = transpose(&x, &[1, 0]).unwrap();
        assert_eq!(t.as_f32().unwrap(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert!(transpose(&x, &[0, 0]).is_err());
        // Reverse the last axis with a negative step, as the flows' "flip" does.
        let slice = |starts: &[i64], ends: &[i64], axes: Option<&[i64]>, steps: Option<&[i64]>| {
            Strided::dense(&x.shape).slice(starts, ends, axes, steps)
        };
        let r = slice(&[-1], &[i64::MIN], Some(&[1]), Some(&[-1])).unwrap();
        assert_eq!(
            r.copy_of(&x).as_f32().unwrap(),
            [2.0, 1.0, 0.0, 5.0, 4.0, 3.0]
        );
        let r = slice(&[1], &[i64::MAX], None, None).unwrap();
        assert_eq!(r.copy_of(&x).as_f32().unwrap(), [3.0, 4.0, 5.0]);
        assert_eq!(slice(&[5], &[9], Some(&[1]), None).unwrap().shape, [2, 0]);
        assert!(slice(&[0], &[1], Some(&[0]), Some(&[0])).is_err());
        assert!(slice(&[0, 1], &[1], None, None).is_err());
    }

    /// Views of views (what a fused step reads in place) give what the movement ops give one
    /// after another, for each kind of view: a transposed, reversed, split-off, broadcast part.
    #[test]
    fn chained_views_match_the_ops_one_by_one() {
        let x = iota(&[2, 3, 4]);
        let transposed = transpose(&x, &[2, 0, 1]).unwrap();
        let reversed = {
            let v = Strided::dense(&transposed.shape)
                .slice(&[-1, 2], &[i64::MIN, 0], Some(&[0, 2]), Some(&[-2, -1]))
                .unwrap();
            v.copy_of(&transposed)
        };
        let part = split(&reversed, 1, Some(&[1, 1]), 2).unwrap().remove(1);
        let want = expand(&part, &[3, 2, 1, 2]).unwrap();
        let chain = [
            ViewOp::Transpose(vec![2, 0, 1]),
            ViewOp::Slice {
                starts: vec![-1, 2],
                ends: vec![i64::MIN, 0],
                axes: Some(vec![0, 2]),
                steps: Some(vec![-2, -1]),
            },
            ViewOp::Split {
                axis: 1,
                sizes: Some(vec![1, 1]),
                outputs: 2,
                index: 1,
            },
            ViewOp::Expand(vec![3, 2, 1, 2]),
        ];
        let view = Strided::dense(&x.shape).through(&chain).unwrap();
        assert!(!view.is_dense());
        // Two elements of the old last axis two apart, reversed (stride -2), and two of the
        // old middle axis, reversed (stride -4); the broadcast axes add nothing.
        assert_eq!(view.strides, [0, -2, 12, -4]);
        assert_eq!(view.span(), 2 + 4);
        assert_eq!(view.copy_of(&x), want);
        assert!(Strided::dense(&[2, 3]).is_dense());
        assert_eq!(Strided::dense(&[2, 3]).span(), 5);
        assert!(
            Strided::dense(&x.shape)
                .through(&chain[..1])
                .unwrap()
                .transpose(&[0, 0])
                .is_err()
        );
        let past = ViewOp::Split {
            axis: 0,
            sizes: None,
            outputs: 2,
            index: 2,
        };
        assert!(Strided::dense(&[4]).through(&[past]).is_err());
        assert!(
            Strided::dense(&[4])
                .through(&[ViewOp::Expand(vec![-1])])
                .is_err()
        );
        assert!(
            Strided::dense(&[4])
                .through(&[ViewOp::Expand(vec![3])])
                .is_err()
        );
    }

    #[test]
    fn concat_split_round_trip() {
        let x = iota(&[2, 5]);
        let parts = split(&x, 1, Some(&[2, 3]), 2).unwrap();
        assert_eq!(parts[0].as_f32().unwrap(), [0.0, 1.0, 5.0, 6.0]);
        let back = concat(&[&parts[0], &parts[1]], -1).unwrap();
        assert_eq!(back, x);
        assert!(split(&x, 1, Some(&[2, 2]), 2).is_err());
        assert_eq!(split(&x, 0, None, 2).unwrap().len(), 2);
        assert!(concat(&[&x, &iota(&[3, 5])], 1).is_err());
        assert!(concat(&[], 0).is_err());
    }

    #[test]
    fn gather_pad_generators() {
        let x = iota(&[3, 2]);
        let g = gather(&x, &Tensor::i64(vec![2], vec![2, -3]), 0).unwrap();
        assert_eq!(g.as_f32().unwrap(), [4.0, 5.0, 0.0, 1.0]);
        assert!(gather(&x, &Tensor::i64(vec![1], vec![3]), 0).is_err());
        let p = pad(
            &iota(&[1, 2]),
            &[0, 1, 0, -1],
            Some(&Tensor::f32(vec![], vec![9.0])),
        )
        .unwrap();
        assert_eq!(p.as_f32().unwrap(), [9.0, 0.0]);
        assert!(pad(&iota(&[2]), &[0], None).is_err());
        assert!(pad(&iota(&[2]), &[-2, -1], None).is_err());
        let r = range(
            &Tensor::i64(vec![], vec![0]),
            &Tensor::i64(vec![], vec![5]),
            &Tensor::i64(vec![], vec![2]),
        )
        .unwrap();
        assert_eq!(r.as_i64().unwrap(), [0, 2, 4]);
        assert!(
            range(
                &Tensor::f32(vec![], vec![0.0]),
                &Tensor::f32(vec![], vec![1.0]),
                &Tensor::f32(vec![], vec![0.0])
            )
            .is_err()
        );
        assert!(
            range(
                &Tensor::f32(vec![], vec![0.0]),
                &Tensor::f32(vec![], vec![1e12]),
                &Tensor::f32(vec![], vec![1.0])
            )
            .is_err()
        );
        let nz = nonzero(&Tensor::bool(vec![2, 2], vec![false, true, true, false]));
        assert_eq!(nz.shape, [2, 2]);
        assert_eq!(nz.as_i64().unwrap(), [0, 1, 1, 0]);
        let c = constant_of_shape(&[2, 1], Scalar::I64(7)).unwrap();
        assert_eq!(c.as_i64().unwrap(), [7, 7]);
        assert!(constant_of_shape(&[-1], Scalar::I64(7)).is_err());
        assert_eq!(expand(&iota(&[1, 2]), &[3, 1]).unwrap().shape, [3, 2]);
        assert!(expand(&iota(&[2]), &[-1]).is_err());
    }
}
