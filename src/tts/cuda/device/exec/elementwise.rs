//! Elementwise steps: the planner's fused chains (one generated kernel per chain, inputs
//! broadcast by strides, or read in place through the views folded into them; its vector form
//! where the rows allow).

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::kernels::{NARROW_MAX, VEC, vector_rows};
use crate::tts::cuda::device::memory::{self, DevTensor, Params, dims, strides};
use crate::tts::cuda::ops::broadcast;
use crate::tts::cuda::ops::movement::Strided;
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::numel;

impl DeviceExecutor {
    /// Runs an elementwise step on the device; `None` when this case has no device kernel.
    pub(super) fn fused_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::Fused(f) => {
                // Each input as the kernel reads it: as stored, or in place through its folded
                // views (the per-launch host work of an input without views stays as small as
                // it was: this step runs about 540 times a batch-1 sentence).
                let mut ins: Vec<(DevTensor, Option<Strided>)> = Vec::with_capacity(s.inputs.len());
                for k in 0..s.inputs.len() {
                    let t = self.in_dev(slots, s, k)?;
                    let views = f.views_of(k);
                    if views.is_empty() {
                        ins.push((t, None));
                        continue;
                    }
                    let v = Strided::dense(&t.shape).through(views).map_err(e)?;
                    // A view wider than the kernels' 32-bit offsets is copied out first.
                    ins.push(if v.span() > NARROW_MAX {
                        (self.view(&t, v)?, None)
                    } else {
                        (t, Some(v))
                    });
                }
                let shapes: Vec<&[usize]> = ins
                    .iter()
                    .map(|(t, v)| {
                        v.as_ref()
                            .map_or(t.shape.as_slice(), |v| v.shape.as_slice())
                    })
                    .collect();
                let shape = broadcast::broadcast_shape(&shapes).map_err(e)?;
                let value = &self.plan.values[s.outputs[0]];
                let out = if value.half {
                    memory::empty_f32(st, shape.clone(), true)?
                } else {
                    memory::empty(st, value.dtype, shape.clone())?
                };
                let [flat, rows, vec] = self
                    .fused
                    .get(&i)
                    .ok_or_else(|| step_err(i, s, "no kernel"))?;
                let n = numel(&shape);
                let len = shape.last().copied().unwrap_or(1).max(1);
                let grid = memory::row_grid(len, n / len).filter(|_| shape.len() >= 2);
                let mut by_input: Vec<(u64, Vec<isize>)> = Vec::with_capacity(ins.len());
                let mut dense = Vec::with_capacity(ins.len());
                for (t, v) in &ins {
                    match v {
                        None => {
                            dense.push(t.shape == shape);
                            let bs = broadcast::broadcast_strides(&t.shape, &shape);
                            by_input.push((t.ptr(), bs.iter().map(|&v| v as isize).collect()));
                        }
                        Some(v) => {
                            dense.push(v.is_dense() && v.shape == shape);
                            let start = t
                                .ptr()
                                .wrapping_add_signed(v.offset as i64 * t.elem_size() as i64);
                            by_input.push((start, v.clone().expand(&shape).map_err(e)?.strides));
                        }
                    }
                }
                let mut p = Params::new();
                if grid.is_some() {
                    p.push(len as i64).push((n / len) as i64);
                }
                p.push(n as i64).push(dims(&shape)?).push(out.ptr());
                for ((ptr, bs), dense) in by_input.iter().zip(&dense) {
                    p.push(*ptr).push(strides(bs));
                    if grid.is_none() {
                        p.push(i32::from(*dense));
                    }
                }
                match grid {
                    Some((_, y, z)) if vector_rows(len, out.ptr(), &by_input) => {
                        let x = len.div_ceil(256 * VEC).min(1 << 20) as u32;
                        p.launch_grid(vec, st, (x, y, z))?
                    }
                    Some(g) => p.launch_grid(rows, st, g)?,
                    None => p.launch_unrolled(flat, st, n)?,
                }
                vec![out]
            }
            _ => return Ok(None),
        }))
    }
}
