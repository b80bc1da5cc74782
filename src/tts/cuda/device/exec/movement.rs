//! Movement steps: reshapes (free: the buffer is shared), and dense copies of strided views
//! (Transpose, Slice, Split, Expand), Concat and Pad.

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::GpuError;
use crate::tts::cuda::device::kernels::type_suffix;
use crate::tts::cuda::device::memory::{self, DevTensor, Params, dims, strides};
use crate::tts::cuda::ops::movement::{self, Strided};
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::{DType, numel};

impl DeviceExecutor {
    /// Runs a movement step on the device; `None` when this case has no device kernel.
    pub(super) fn movement_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        Ok(Some(match &s.op {
            Op::Identity => vec![self.in_dev(slots, s, 0)?],
            Op::Reshape { allow_zero } => {
                let x = self.in_dev(slots, s, 0)?;
                let spec = self.ints(slots, s, 1)?;
                let shape = movement::reshape_target(&x.shape, &spec, *allow_zero).map_err(e)?;
                vec![x.reshaped(shape)]
            }
            Op::Unsqueeze => {
                let x = self.in_dev(slots, s, 0)?;
                let axes = self.ints(slots, s, 1)?;
                vec![x.reshaped(movement::unsqueeze_shape(&x.shape, &axes).map_err(e)?)]
            }
            Op::Squeeze => {
                let x = self.in_dev(slots, s, 0)?;
                let axes = self.opt_ints(slots, s, 1)?;
                vec![x.reshaped(movement::squeeze_shape(&x.shape, axes.as_deref()).map_err(e)?)]
            }
            Op::Transpose { perm } => {
                let x = self.in_dev(slots, s, 0)?;
                let v = Strided::dense(&x.shape).transpose(perm).map_err(e)?;
                vec![self.view(&x, v)?]
            }
            Op::Slice => {
                let x = self.in_dev(slots, s, 0)?;
                let (starts, ends) = (self.ints(slots, s, 1)?, self.ints(slots, s, 2)?);
                let axes = self.opt_ints(slots, s, 3)?;
                let steps = self.opt_ints(slots, s, 4)?;
                let v = Strided::dense(&x.shape)
                    .slice(&starts, &ends, axes.as_deref(), steps.as_deref())
                    .map_err(e)?;
                vec![self.view(&x, v)?]
            }
            Op::Split { axis, outputs } => {
                let x = self.in_dev(slots, s, 0)?;
                let sizes = self.opt_ints(slots, s, 1)?;
                let parts = movement::split_sizes(&x.shape, *axis, sizes.as_deref(), *outputs)
                    .map_err(e)?;
                let mut outs = Vec::with_capacity(parts.len());
                for k in 0..parts.len() {
                    let v = Strided::dense(&x.shape)
                        .split(*axis, sizes.as_deref(), *outputs, k)
                        .map_err(e)?;
                    outs.push(self.view(&x, v)?);
                }
                outs
            }
            Op::Expand => {
                let x = self.in_dev(slots, s, 0)?;
                let target: Vec<usize> = self
                    .ints(slots, s, 1)?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                let v = Strided::dense(&x.shape).expand(&target).map_err(e)?;
                vec![self.view(&x, v)?]
            }
            Op::Concat { axis } => vec![self.concat(i, s, slots, *axis)?],
            Op::Pad => vec![self.pad(i, s, slots)?],
            _ => return Ok(None),
        }))
    }

    /// Concat: every input placed into one new tensor along `axis`.
    fn concat(
        &mut self,
        i: usize,
        s: &Step,
        slots: &mut Slots,
        axis: i64,
    ) -> Result<DevTensor, GpuError> {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        let mut ins = Vec::new();
        for k in 0..s.inputs.len() {
            ins.push(self.in_dev(slots, s, k)?);
        }
        let first = ins.first().ok_or_else(|| step_err(i, s, "no inputs"))?;
        let a = crate::tts::cuda::tensor::axis(axis, first.shape.len()).map_err(e)?;
        let mut shape = first.shape.clone();
        shape[a] = ins.iter().map(|t| t.shape[a]).sum();
        let out = memory::empty(st, first.dtype, shape.clone())?;
        let ost: Vec<isize> = crate::tts::cuda::tensor::strides(&shape)
            .iter()
            .map(|&v| v as isize)
            .collect();
        let f = self
            .f(&format!("place_{}", type_suffix(first.dtype)))?
            .clone();
        let mut at = 0isize;
        for t in &ins {
            let mut p = Params::new();
            p.push(t.len() as i64)
                .push(dims(&t.shape)?)
                .push(out.ptr())
                .push((at * ost[a]) as i64)
                .push(strides(&ost))
                .push(t.ptr());
            p.launch_unrolled(&f, st, t.len())?;
            at += t.shape[a] as isize;
        }
        Ok(out)
    }

    /// Pad: a new tensor with `x` inside and the constant fill around it.
    fn pad(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Result<DevTensor, GpuError> {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        let x = self.in_dev(slots, s, 0)?;
        let pads = self.ints(slots, s, 1)?;
        let fill = self
            .in_host(slots, s, 2)?
            .map(|t| t.scalar())
            .transpose()
            .map_err(e)?
            .unwrap_or(0.0);
        let r = x.shape.len();
        if pads.len() != 2 * r {
            return Err(step_err(i, s, "pads"));
        }
        let shape: Vec<usize> = (0..r)
            .map(|d| (x.shape[d] as i64 + pads[d] + pads[r + d]).max(0) as usize)
            .collect();
        let out = memory::empty(st, x.dtype, shape.clone())?;
        let mut lo = dims(&x.shape)?;
        lo.d[..r].copy_from_slice(&pads[..r]);
        let mut p = Params::new();
        p.push(numel(&shape) as i64)
            .push(dims(&shape)?)
            .push(out.ptr())
            .push(x.ptr())
            .push(dims(&x.shape)?)
            .push(lo);
        match x.dtype {
            DType::F32 => p.push(fill as f32),
            DType::I64 => p.push(fill as i64),
            DType::Bool => p.push(u8::from(fill != 0.0)),
        };
        p.launch_unrolled(
            self.f(&format!("pad_{}", type_suffix(x.dtype)))?,
            st,
            numel(&shape),
        )?;
        Ok(out)
    }

    /// A dense copy of the view `v` of `x`.
    pub(super) fn view(&self, x: &DevTensor, v: Strided) -> Result<DevTensor, GpuError> {
        let st = self.stream();
        let out = memory::empty(st, x.dtype, v.shape.clone())?;
        let mut p = Params::new();
        p.push(numel(&v.shape) as i64)
            .push(dims(&v.shape)?)
            .push(out.ptr())
            .push(x.ptr())
            .push(v.offset as i64)
            .push(strides(&v.strides));
        p.launch_unrolled(
            self.f(&format!("view_{}", type_suffix(x.dtype)))?,
            st,
            numel(&v.shape),
        )?;
        Ok(out)
    }
}
