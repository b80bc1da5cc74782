//! Host reductions (ReduceMean/Sum/Max over any set of axes) and Softmax over one axis.
//!
//! Input: a tensor and axes (negative allowed). Output: the reduced tensor, keeping reduced axes
//! as size 1 when asked. Sums accumulate in the element type, in index order.

use crate::tts::cuda::program::op::ReduceKind;
use crate::tts::cuda::tensor::{Data, OpResult, Tensor, axis, numel, op_err, strides};

/// Output shape and, for every input element, the output element it folds into.
fn fold_map(shape: &[usize], axes: &[usize], keep: bool) -> (Vec<usize>, Vec<usize>) {
    let kept: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let ks = strides(&kept);
    let st = strides(shape);
    let n = numel(shape);
    let target = (0..n)
        .map(|i| {
            (0..shape.len())
                .filter(|d| !axes.contains(d))
                .map(|d| ((i / st[d]) % shape[d]) * ks[d])
                .sum()
        })
        .collect();
    let out = if keep {
        kept
    } else {
        shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, &n)| n)
            .collect()
    };
    (out, target)
}

pub fn reduce(x: &Tensor, kind: ReduceKind, axes: &[i64], keep: bool) -> OpResult<Tensor> {
    let r = x.shape.len();
    let axes: Vec<usize> = if axes.is_empty() {
        (0..r).collect()
    } else {
        axes.iter().map(|&a| axis(a, r)).collect::<OpResult<_>>()?
    };
    let (shape, target) = fold_map(&x.shape, &axes, keep);
    let m = numel(&shape);
    let count: usize = axes.iter().map(|&d| x.shape[d]).product();
    let data = match (&x.data, kind) {
        (Data::F32(v), ReduceKind::Max) => {
            let mut o = vec![f32::NEG_INFINITY; m];
            for (&t, &a) in target.iter().zip(v) {
                o[t] = o[t].max(a);
            }
            Data::F32(o)
        }
        (Data::F32(v), _) => {
            let mut o = vec![0.0f32; m];
            for (&t, &a) in target.iter().zip(v) {
                o[t] += a;
            }
            if kind == ReduceKind::Mean {
                o.iter_mut().for_each(|a| *a /= count as f32);
            }
            Data::F32(o)
        }
        (Data::I64(v), ReduceKind::Max) => {
            let mut o = vec![i64::MIN; m];
            for (&t, &a) in target.iter().zip(v) {
                o[t] = o[t].max(a);
            }
            Data::I64(o)
        }
        (Data::I64(v), _) => {
            let mut o = vec![0i64; m];
            for (&t, &a) in target.iter().zip(v) {
                o[t] = o[t].wrapping_add(a);
            }
            if kind == ReduceKind::Mean && count > 0 {
                o.iter_mut().for_each(|a| *a /= count as i64);
            }
            Data::I64(o)
        }
        (Data::Bool(_), _) => return op_err("reduction of bools"),
    };
    Ok(Tensor { shape, data })
}

pub fn softmax(x: &Tensor, ax: i64) -> OpResult<Tensor> {
    let a = axis(ax, x.shape.len())?;
    let v = x.as_f32()?;
    let dim = x.shape[a];
    let inner: usize = x.shape[a + 1..].iter().product();
    let outer: usize = x.shape[..a].iter().product();
    let mut out = v.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * dim + j) * inner + i;
            let max = (0..dim).map(|j| v[at(j)]).fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for j in 0..dim {
                let e = (v[at(j)] - max).exp();
                out[at(j)] = e;
                sum += e;
            }
            for j in 0..dim {
                out[at(j)] /= sum;
            }
        }
    }
    Ok(Tensor::f32(x.shape.clone(), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions() {
        let x = Tensor::f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let m = reduce(&x, ReduceKind::Mean, &[-1], true).unwrap();
        assert_eq!(
            (m.shape.clone(), m.as_f32().unwrap().to_vec()),
            (vec![2, 1], vec![2.0, 5.0])
        );
        let s = reduce(&x, ReduceKind::Sum, &[0], false).unwrap();
        assert_eq!(s.as_f32().unwrap(), [5.0, 7.0, 9.0]);
        let all = reduce(
            &Tensor::i64(vec![3], vec![4, 9, 2]),
            ReduceKind::Max,
            &[],
            false,
        )
        .unwrap();
        assert_eq!(
            (all.shape.clone(), all.as_i64().unwrap().to_vec()),
            (vec![], vec![9])
        );
        assert!(
            reduce(
                &Tensor::bool(vec![1], vec![true]),
                ReduceKind::Sum,
                &[],
                false
            )
            .is_err()
        );
        assert!(reduce(&x, ReduceKind::Sum, &[2], false).is_err());
    }

    #[test]
    fn softmax_rows_sum_to_one() {
        let x = Tensor::f32(vec![2, 2], vec![0.0, 0.0, 1000.0, 0.0]);
        let s = softmax(&x, -1).unwrap();
        let v = s.as_f32().unwrap();
        assert_eq!(&v[..2], [0.5, 0.5]);
        assert_eq!(&v[2..], [1.0, 0.0]);
        assert!(softmax(&Tensor::i64(vec![1], vec![1]), 0).is_err());
    }
}
