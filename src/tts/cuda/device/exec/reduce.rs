//! Reductions along axes: CumSum, Reduce (mean, sum, max over contiguous axes) and Softmax.

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::kernels::{ROWS_PER_BLOCK, type_suffix};
use crate::tts::cuda::device::memory::{self, Params};
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::{Op, ReduceKind};
use crate::tts::cuda::tensor::DType;

/// Whether a reduction of `dim` elements `inner` apart runs a warp per row (`*_rows_f32`): rows
/// of the last axis long enough to share among a warp's lanes; otherwise a thread per output.
fn by_rows(dim: usize, inner: usize) -> bool {
    inner <= 1 && dim >= 16
}

/// The grid of a row kernel over `rows` rows: [`ROWS_PER_BLOCK`] a block.
fn row_blocks(rows: usize) -> (u32, u32, u32) {
    (rows.div_ceil(ROWS_PER_BLOCK).max(1) as u32, 1, 1)
}

impl DeviceExecutor {
    /// Runs a reduce step on the device; `None` when this case has no device kernel.
    pub(super) fn reduce_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::CumSum { exclusive, reverse } => {
                let x = self.in_dev(slots, s, 0)?;
                if x.dtype == DType::Bool {
                    return Ok(None);
                }
                let axis = self
                    .in_host(slots, s, 1)?
                    .ok_or_else(|| step_err(i, s, "axis"))?
                    .scalar()
                    .map_err(e)? as i64;
                let a = crate::tts::cuda::tensor::axis(axis, x.shape.len()).map_err(e)?;
                let inner: usize = x.shape[a + 1..].iter().product();
                let outer: usize = x.shape[..a].iter().product();
                let out = memory::empty(st, x.dtype, x.shape.clone())?;
                let mut p = Params::new();
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64)
                    .push(i32::from(*exclusive))
                    .push(i32::from(*reverse));
                p.launch(
                    self.f(&format!("cumsum_{}", type_suffix(x.dtype)))?,
                    st,
                    outer * inner,
                )?;
                vec![out]
            }
            Op::Reduce {
                kind,
                axes,
                keep_dims,
            } => {
                let x = self.in_dev(slots, s, 0)?;
                if x.dtype == DType::Bool {
                    return Ok(None);
                }
                let axes = match axes {
                    Some(a) => a.clone(),
                    None => self.opt_ints(slots, s, 1)?.unwrap_or_default(),
                };
                let r = x.shape.len();
                let mut ax: Vec<usize> = if axes.is_empty() {
                    (0..r).collect()
                } else {
                    axes.iter()
                        .map(|&a| crate::tts::cuda::tensor::axis(a, r))
                        .collect::<Result<_, _>>()
                        .map_err(e)?
                };
                ax.sort_unstable();
                ax.dedup();
                let contiguous = ax.windows(2).all(|w| w[1] == w[0] + 1);
                if !contiguous || ax.is_empty() {
                    return Ok(None);
                }
                let (a0, a1) = (ax[0], ax[ax.len() - 1]);
                let outer: usize = x.shape[..a0].iter().product();
                let dim: usize = x.shape[a0..=a1].iter().product();
                let inner: usize = x.shape[a1 + 1..].iter().product();
                let shape: Vec<usize> = (0..r)
                    .filter_map(|d| {
                        if ax.contains(&d) {
                            keep_dims.then_some(1)
                        } else {
                            Some(x.shape[d])
                        }
                    })
                    .collect();
                let out = memory::empty(st, x.dtype, shape)?;
                let k = match kind {
                    ReduceKind::Mean => 0,
                    ReduceKind::Sum => 1,
                    ReduceKind::Max => 2,
                };
                let mut p = Params::new();
                if x.dtype == DType::F32 && by_rows(dim, inner) {
                    p.push(outer as i64)
                        .push(out.ptr())
                        .push(x.ptr())
                        .push(dim as i64)
                        .push(k);
                    p.launch_grid(self.f("reduce_rows_f32")?, st, row_blocks(outer))?;
                    return Ok(Some(vec![out]));
                }
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(dim as i64)
                    .push(inner.max(1) as i64)
                    .push(k);
                p.launch(
                    self.f(&format!("reduce_{}", type_suffix(x.dtype)))?,
                    st,
                    outer * inner,
                )?;
                vec![out]
            }
            Op::Softmax { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let inner: usize = x.shape[a + 1..].iter().product();
                let outer: usize = x.shape[..a].iter().product();
                let out = memory::empty(st, DType::F32, x.shape.clone())?;
                let mut p = Params::new();
                if by_rows(x.shape[a], inner) {
                    p.push(outer as i64)
                        .push(out.ptr())
                        .push(x.ptr())
                        .push(x.shape[a] as i64);
                    p.launch_grid(self.f("softmax_rows_f32")?, st, row_blocks(outer))?;
                    return Ok(Some(vec![out]));
                }
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64);
                p.launch(self.f("softmax_f32")?, st, outer * inner)?;
                vec![out]
            }
            _ => return Ok(None),
        }))
    }
}
