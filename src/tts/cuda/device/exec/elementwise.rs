//! Elementwise steps: the planner's fused chains (one generated kernel per chain, inputs
//! broadcast by strides).

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::memory::{self, Params, dims, strides};
use crate::tts::cuda::ops::broadcast;
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::numel;

impl DeviceExecutor {
    /// Runs an elementwise step on the device; `None` when this case has no device kernel.
    pub(super) fn fused_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::Fused(_) => {
                let mut ins = Vec::new();
                for k in 0..s.inputs.len() {
                    ins.push(self.in_dev(slots, s, k)?);
                }
                let shapes: Vec<&[usize]> = ins.iter().map(|t| t.shape.as_slice()).collect();
                let shape = broadcast::broadcast_shape(&shapes).map_err(e)?;
                let value = &self.plan.values[s.outputs[0]];
                let out = if value.half {
                    memory::empty_f32(st, shape.clone(), true)?
                } else {
                    memory::empty(st, value.dtype, shape.clone())?
                };
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(dims(&shape)?)
                    .push(out.ptr());
                for t in &ins {
                    let bs: Vec<isize> = broadcast::broadcast_strides(&t.shape, &shape)
                        .iter()
                        .map(|&v| v as isize)
                        .collect();
                    p.push(t.ptr())
                        .push(strides(&bs))
                        .push(i32::from(t.shape == shape));
                }
                let name = self
                    .fused
                    .get(&i)
                    .cloned()
                    .ok_or_else(|| step_err(i, s, "no kernel"))?;
                p.launch_unrolled(self.f(&name)?, st, numel(&shape))?;
                vec![out]
            }
            _ => return Ok(None),
        }))
    }
}
