//! Indexing steps: Gather, GatherElements, GatherND and ScatterND.

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::kernels::type_suffix;
use crate::tts::cuda::device::memory::{self, Params, dims, strides};
use crate::tts::cuda::ops::movement::Strided;
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::numel;

impl DeviceExecutor {
    /// Runs an index step on the device; `None` when this case has no device kernel.
    pub(super) fn index_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::Gather { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let mut shape = x.shape[..a].to_vec();
                shape.extend_from_slice(&idx.shape);
                shape.extend_from_slice(&x.shape[a + 1..]);
                let inner: usize = x.shape[a + 1..].iter().product();
                let out = memory::empty(st, x.dtype, shape.clone())?;
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(idx.ptr())
                    .push(idx.len() as i64)
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64);
                p.launch(
                    self.f(&format!("gather_{}", type_suffix(x.dtype)))?,
                    st,
                    numel(&shape),
                )?;
                vec![out]
            }
            Op::GatherElements { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let ds: Vec<isize> = crate::tts::cuda::tensor::strides(&x.shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let out = memory::empty(st, x.dtype, idx.shape.clone())?;
                let mut p = Params::new();
                p.push(idx.len() as i64)
                    .push(dims(&idx.shape)?)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(strides(&ds))
                    .push(idx.ptr())
                    .push(a as i32)
                    .push(x.shape[a] as i64);
                p.launch(
                    self.f(&format!("gather_elements_{}", type_suffix(x.dtype)))?,
                    st,
                    idx.len(),
                )?;
                vec![out]
            }
            Op::GatherND { batch_dims: 0 } | Op::ScatterND => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let q = idx.shape.len();
                let k = *idx
                    .shape
                    .last()
                    .ok_or_else(|| step_err(i, s, "scalar indices"))?;
                if q == 0 || k > x.shape.len() {
                    return Err(step_err(i, s, "indices"));
                }
                let slice: usize = x.shape[k..].iter().product();
                let tuples: usize = idx.shape[..q - 1].iter().product();
                let ds: Vec<isize> = crate::tts::cuda::tensor::strides(&x.shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let sfx = type_suffix(x.dtype);
                if matches!(s.op, Op::ScatterND) {
                    let upd = self.in_dev(slots, s, 2)?;
                    if upd.len() != tuples * slice {
                        return Err(step_err(i, s, "updates"));
                    }
                    let out = self.view(&x, Strided::dense(&x.shape))?;
                    let mut p = Params::new();
                    p.push((tuples * slice) as i64)
                        .push(out.ptr())
                        .push(idx.ptr())
                        .push(k as i32)
                        .push(slice.max(1) as i64)
                        .push(dims(&x.shape)?)
                        .push(strides(&ds))
                        .push(upd.ptr());
                    p.launch(self.f(&format!("scatter_nd_{sfx}"))?, st, tuples * slice)?;
                    vec![out]
                } else {
                    let mut shape = idx.shape[..q - 1].to_vec();
                    shape.extend_from_slice(&x.shape[k..]);
                    let out = memory::empty(st, x.dtype, shape)?;
                    let mut p = Params::new();
                    p.push((tuples * slice) as i64)
                        .push(out.ptr())
                        .push(x.ptr())
                        .push(idx.ptr())
                        .push(k as i32)
                        .push(slice.max(1) as i64)
                        .push(dims(&x.shape)?)
                        .push(strides(&ds));
                    p.launch(self.f(&format!("gather_nd_{sfx}"))?, st, tuples * slice)?;
                    vec![out]
                }
            }
            _ => return Ok(None),
        }))
    }
}
