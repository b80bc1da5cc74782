//! Numpy broadcasting for the host kernels: output shapes, per-input strides, and typed maps.
//!
//! Invariant: a broadcast stride is 0 on every axis where the input has size 1 (or is missing),
//! so an input's flat offset for output coordinate `c` is `Σ c[d]·stride[d]`.

use crate::tts::cuda::tensor::{OpResult, op_err, strides};

/// The broadcast of several shapes, or an error naming them.
pub fn broadcast_shape(shapes: &[&[usize]]) -> OpResult<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (d, &n) in s.iter().enumerate() {
            let o = &mut out[off + d];
            if *o == 1 {
                *o = n;
            } else if n != 1 && n != *o {
                return op_err(format!("shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// Strides with which `shape` is read when broadcast to `out` (`shape` must broadcast to it).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|d| {
            if d < off || shape[d - off] == 1 {
                0
            } else {
                own[d - off]
            }
        })
        .collect()
}

/// Calls `f(offsets)` for every output element in row-major order, with each input's flat offset.
fn walk<const N: usize>(out: &[usize], st: [&[usize]; N], mut f: impl FnMut([usize; N])) {
    let total: usize = out.iter().product();
    if total == 0 {
        return;
    }
    let rank = out.len();
    if rank == 0 {
        f([0; N]);
        return;
    }
    let inner = out[rank - 1];
    let inner_st: [usize; N] = std::array::from_fn(|i| st[i][rank - 1]);
    let mut coord = vec![0usize; rank];
    let mut base = [0usize; N];
    loop {
        let mut off = base;
        for _ in 0..inner {
            f(off);
            for i in 0..N {
                off[i] += inner_st[i];
            }
        }
        // Odometer over the outer axes.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            coord[d] += 1;
            for i in 0..N {
                base[i] += st[i][d];
            }
            if coord[d] < out[d] {
                break;
            }
            for i in 0..N {
                base[i] -= st[i][d] * out[d];
            }
            coord[d] = 0;
        }
    }
}

pub fn map1<A: Copy, O>(a: &[A], sa: &[usize], out: &[usize], f: impl Fn(A) -> O) -> Vec<O> {
    let mut v = Vec::with_capacity(out.iter().product());
    if a.len() == v.capacity() && sa == strides(out).as_slice() {
        v.extend(a.iter().map(|&x| f(x)));
    } else {
        walk(out, [sa], |[i]| v.push(f(a[i])));
    }
    v
}

pub fn map2<A: Copy, B: Copy, O>(
    (a, sa): (&[A], &[usize]),
    (b, sb): (&[B], &[usize]),
    out: &[usize],
    f: impl Fn(A, B) -> O,
) -> Vec<O> {
    let n: usize = out.iter().product();
    let mut v = Vec::with_capacity(n);
    let dense = strides(out);
    if a.len() == n && b.len() == n && sa == dense.as_slice() && sb == dense.as_slice() {
        v.extend(a.iter().zip(b).map(|(&x, &y)| f(x, y)));
    } else {
        walk(out, [sa, sb], |[i, j]| v.push(f(a[i], b[j])));
    }
    v
}

pub fn map3<A: Copy, B: Copy, C: Copy, O>(
    (a, sa): (&[A], &[usize]),
    (b, sb): (&[B], &[usize]),
    (c, sc): (&[C], &[usize]),
    out: &[usize],
    f: impl Fn(A, B, C) -> O,
) -> Vec<O> {
    let mut v = Vec::with_capacity(out.iter().product());
    walk(out, [sa, sb, sc], |[i, j, k]| v.push(f(a[i], b[j], c[k])));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(broadcast_shape(&[&[2, 1, 3], &[4, 1]]).unwrap(), [2, 4, 3]);
        assert_eq!(broadcast_shape(&[&[], &[5]]).unwrap(), [5]);
        assert!(broadcast_shape(&[&[2, 3], &[4, 3]]).is_err());
    }

    #[test]
    fn maps_follow_broadcast_strides() {
        let out = [2, 3];
        let a = [1, 2, 3]; // [3]
        let b = [10, 20]; // [2, 1]
        let v = map2(
            (&a, &broadcast_strides(&[3], &out)),
            (&b, &broadcast_strides(&[2, 1], &out)),
            &out,
            |x, y| x + y,
        );
        assert_eq!(v, [11, 12, 13, 21, 22, 23]);
        let s = map1(&[7], &broadcast_strides(&[], &out), &out, |x: i32| x);
        assert_eq!(s, [7; 6]);
        let w = map3(
            (&[true, false, true], &broadcast_strides(&[3], &out)),
            (&a, &broadcast_strides(&[3], &out)),
            (&b, &broadcast_strides(&[2, 1], &out)),
            &out,
            |c, x, y| if c { x } else { y },
        );
        assert_eq!(w, [1, 10, 3, 1, 20, 3]);
        assert!(map1(&[1], &[0], &[0], |x: i32| x).is_empty());
    }
}
