//! Steps that make values from nothing but a shape: ConstantOfShape and RandomNormalLike.

use super::{DeviceExecutor, Family, Slot, Slots, step_err};
use crate::tts::cuda::device::kernels::type_suffix;
use crate::tts::cuda::device::memory::{self, Params};
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::{DType, Data, numel};

impl DeviceExecutor {
    /// Runs a source step on the device; `None` when this case has no device kernel.
    pub(super) fn source_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::ConstantOfShape(v) => {
                let shape: Vec<usize> = self
                    .ints(slots, s, 0)?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                let t = crate::tts::cuda::ops::elementwise::scalar_tensor(*v);
                let out = memory::empty(st, t.dtype(), shape.clone())?;
                let mut p = Params::new();
                p.push(numel(&shape) as i64).push(out.ptr());
                match &t.data {
                    Data::F32(v) => p.push(v[0]),
                    Data::I64(v) => p.push(v[0]),
                    Data::Bool(v) => p.push(u8::from(v[0])),
                };
                p.launch(
                    self.f(&format!("fill_{}", type_suffix(t.dtype())))?,
                    st,
                    numel(&shape),
                )?;
                vec![out]
            }
            Op::RandomNormalLike { mean, scale } => {
                let shape = match s
                    .inputs
                    .first()
                    .copied()
                    .flatten()
                    .and_then(|v| slots.get(&v))
                {
                    Some(Slot::Dev(d) | Slot::Both(_, d)) => d.shape.clone(),
                    Some(Slot::Host(t)) => t.shape.clone(),
                    None => return Err(step_err(i, s, "input")),
                };
                let out = memory::empty(st, DType::F32, shape.clone())?;
                self.seed = self
                    .seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(out.ptr())
                    .push(self.seed)
                    .push(*mean)
                    .push(*scale);
                p.launch(self.f("randn_f32")?, st, numel(&shape))?;
                vec![out]
            }
            _ => return Ok(None),
        }))
    }
}
