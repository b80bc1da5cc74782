//! Host kernels that index with data: GatherElements, GatherND, ScatterND and CumSum.
//!
//! Input: a data tensor and int64 indices (negative indices count from the end). Output: a new
//! tensor. Out-of-range indices are errors, never panics (these ops read indices computed by the
//! model, e.g. the duration predictor's spline bins).

use crate::tts::cuda::tensor::{Data, OpResult, Tensor, axis, numel, op_err, strides};

fn index(i: i64, dim: usize) -> OpResult<usize> {
    let v = if i < 0 { i + dim as i64 } else { i };
    if v < 0 || v >= dim as i64 {
        return op_err(format!("index {i} out of range for size {dim}"));
    }
    Ok(v as usize)
}

pub fn gather_elements(x: &Tensor, indices: &Tensor, ax: i64) -> OpResult<Tensor> {
    let r = x.shape.len();
    let a = axis(ax, r)?;
    if indices.shape.len() != r {
        return op_err("GatherElements indices differ in rank");
    }
    let ids = indices.as_i64()?;
    let xs = strides(&x.shape);
    let is = strides(&indices.shape);
    let mut src = Vec::with_capacity(ids.len());
    for (k, &i) in ids.iter().enumerate() {
        let mut off = 0;
        for d in 0..r {
            let c = (k / is[d]) % indices.shape[d];
            let c = if d == a { index(i, x.shape[a])? } else { c };
            if c >= x.shape[d] {
                return op_err("GatherElements indices larger than the data");
            }
            off += c * xs[d];
        }
        src.push(off);
    }
    Ok(x.gather_flat(indices.shape.clone(), src.into_iter()))
}

/// Flat offsets of the slices GatherND/ScatterND address, and the slice length.
fn nd_offsets(
    shape: &[usize],
    indices: &Tensor,
    batch_dims: usize,
) -> OpResult<(Vec<usize>, usize)> {
    let q = indices.shape.len();
    let k = *indices
        .shape
        .last()
        .ok_or_else(|| crate::tts::cuda::tensor::OpError("scalar ND indices".into()))?;
    if q < 1 || batch_dims + k > shape.len() || batch_dims >= q {
        return op_err(format!("ND indices {:?} for data {shape:?}", indices.shape));
    }
    if indices.shape[..batch_dims] != shape[..batch_dims] {
        return op_err("ND batch dimensions differ");
    }
    let ids = indices.as_i64()?;
    let st = strides(shape);
    let slice: usize = shape[batch_dims + k..].iter().product();
    let per_batch: usize = indices.shape[batch_dims..q - 1].iter().product();
    let batch_stride = if batch_dims == 0 {
        0
    } else {
        st[batch_dims - 1]
    };
    let mut out = Vec::with_capacity(ids.len() / k.max(1));
    for (t, tuple) in ids.chunks(k.max(1)).enumerate() {
        let b = t.checked_div(per_batch).unwrap_or(0);
        let mut off = b * batch_stride;
        for (j, &i) in tuple.iter().enumerate().take(k) {
            off += index(i, shape[batch_dims + j])? * st[batch_dims + j];
        }
        out.push(off);
    }
    if k == 0 {
        out = vec![0; numel(&indices.shape[..q - 1])];
    }
    Ok((out, slice))
}

pub fn gather_nd(x: &Tensor, indices: &Tensor, batch_dims: usize) -> OpResult<Tensor> {
    let (offs, slice) = nd_offsets(&x.shape, indices, batch_dims)?;
    let q = indices.shape.len();
    let k = indices.shape[q - 1];
    let mut shape = indices.shape[..q - 1].to_vec();
    shape.extend_from_slice(&x.shape[batch_dims + k..]);
    let src = offs.iter().flat_map(|&o| o..o + slice);
    Ok(x.gather_flat(shape, src))
}

pub fn scatter_nd(x: &Tensor, indices: &Tensor, updates: &Tensor) -> OpResult<Tensor> {
    let (offs, slice) = nd_offsets(&x.shape, indices, 0)?;
    if updates.len() != offs.len() * slice || updates.dtype() != x.dtype() {
        return op_err("ScatterND updates do not match the indexed slices");
    }
    let mut out = x.clone();
    macro_rules! scatter {
        ($dst:expr, $src:expr) => {
            for (n, &o) in offs.iter().enumerate() {
                $dst[o..o + slice].copy_from_slice(&$src[n * slice..(n + 1) * slice]);
            }
        };
    }
    match (&mut out.data, &updates.data) {
        (Data::F32(d), Data::F32(u)) => scatter!(d, u),
        (Data::I64(d), Data::I64(u)) => scatter!(d, u),
        (Data::Bool(d), Data::Bool(u)) => scatter!(d, u),
        _ => unreachable!("types checked above"),
    }
    Ok(out)
}

pub fn cumsum(x: &Tensor, ax: i64, exclusive: bool, reverse: bool) -> OpResult<Tensor> {
    let a = axis(ax, x.shape.len())?;
    let dim = x.shape[a];
    let inner: usize = x.shape[a + 1..].iter().product();
    let outer: usize = x.shape[..a].iter().product();
    macro_rules! scan {
        ($v:expr, $zero:expr) => {{
            let mut out = $v.clone();
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = $zero;
                    for step in 0..dim {
                        let j = if reverse { dim - 1 - step } else { step };
                        let at = (o * dim + j) * inner + i;
                        if exclusive {
                            out[at] = acc;
                            acc += $v[at];
                        } else {
                            acc += $v[at];
                            out[at] = acc;
                        }
                    }
                }
            }
            out
        }};
    }
    let data = match &x.data {
        Data::F32(v) => Data::F32(scan!(v, 0.0f32)),
        Data::I64(v) => Data::I64(scan!(v, 0i64)),
        Data::Bool(_) => return op_err("CumSum of bools"),
    };
    Ok(Tensor {
        shape: x.shape.clone(),
        data,
    })
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
    fn gather_elements_picks_along_the_axis() {
        let x = iota(&[2, 3]);
        let i = Tensor::i64(vec![2, 1], vec![2, -3]);
        assert_eq!(
            gather_elements(&x, &i, 1).unwrap().as_f32().unwrap(),
            [2.0, 3.0]
        );
        assert!(gather_elements(&x, &Tensor::i64(vec![2, 1], vec![3, 0]), 1).is_err());
        assert!(gather_elements(&x, &Tensor::i64(vec![1], vec![0]), 1).is_err());
    }

    #[test]
    fn nd_gather_and_scatter() {
        let x = iota(&[2, 3]);
        let i = Tensor::i64(vec![2, 2], vec![1, 2, 0, 0]);
        assert_eq!(gather_nd(&x, &i, 0).unwrap().as_f32().unwrap(), [5.0, 0.0]);
        let rows = Tensor::i64(vec![1, 1], vec![1]);
        assert_eq!(
            gather_nd(&x, &rows, 0).unwrap().as_f32().unwrap(),
            [3.0, 4.0, 5.0]
        );
        let u = Tensor::f32(vec![2], vec![-1.0, -2.0]);
        let s = scatter_nd(&x, &i, &u).unwrap();
        assert_eq!(s.as_f32().unwrap(), [-2.0, 1.0, 2.0, 3.0, 4.0, -1.0]);
        assert!(scatter_nd(&x, &i, &Tensor::f32(vec![1], vec![0.0])).is_err());
        assert!(gather_nd(&x, &Tensor::i64(vec![1, 3], vec![0, 0, 0]), 0).is_err());
        let empty = Tensor::i64(vec![0, 2], vec![]);
        assert_eq!(gather_nd(&x, &empty, 0).unwrap().shape, [0]);
        let b = gather_nd(&x, &Tensor::i64(vec![2, 1], vec![2, 0]), 1).unwrap();
        assert_eq!(b.as_f32().unwrap(), [2.0, 3.0]);
    }

    #[test]
    fn cumsum_modes() {
        let x = Tensor::f32(vec![4], vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            cumsum(&x, 0, false, false).unwrap().as_f32().unwrap(),
            [1.0, 3.0, 6.0, 10.0]
        );
        assert_eq!(
            cumsum(&x, 0, true, false).unwrap().as_f32().unwrap(),
            [0.0, 1.0, 3.0, 6.0]
        );
        assert_eq!(
            cumsum(&x, 0, false, true).unwrap().as_f32().unwrap(),
            [10.0, 9.0, 7.0, 4.0]
        );
        assert!(cumsum(&Tensor::bool(vec![1], vec![true]), 0, false, false).is_err());
    }
}
