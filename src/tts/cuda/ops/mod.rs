//! Host implementations of every plan op: the reference the CUDA engine is checked against, the
//! constant folder's evaluator, and the CUDA executor's path for shape arithmetic.
//!
//! Input: an [`Op`] and its input tensors (`None` for an omitted optional input). Output: the
//! op's output tensors, or an [`OpError`](crate::tts::cuda::tensor::OpError) naming what was wrong.

pub mod broadcast;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod movement;
pub mod reduce;

use std::borrow::Cow;

use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::tensor::{OpResult, Tensor, op_err};

fn req<'a>(inputs: &[Option<&'a Tensor>], i: usize, op: &Op) -> OpResult<&'a Tensor> {
    match inputs.get(i).copied().flatten() {
        Some(t) => Ok(t),
        None => op_err(format!("{} needs input {i}", op.name())),
    }
}

fn opt<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Option<&'a Tensor> {
    inputs.get(i).copied().flatten()
}

/// Standard normal samples (Box–Muller), for RandomNormalLike.
pub fn normal(rng: &mut fastrand::Rng, n: usize, mean: f32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let u1 = rng.f64().max(f64::MIN_POSITIVE);
            let u2 = rng.f64();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            mean + scale * z as f32
        })
        .collect()
}

pub fn run(op: &Op, inputs: &[Option<&Tensor>], rng: &mut fastrand::Rng) -> OpResult<Vec<Tensor>> {
    let x = |i| req(inputs, i, op);
    let one = |t: Tensor| Ok(vec![t]);
    match op {
        Op::Unary(u) => one(elementwise::unary(*u, x(0)?)?),
        Op::Binary(b) => one(elementwise::binary(*b, x(0)?, x(1)?)?),
        Op::Where => one(elementwise::where_(x(0)?, x(1)?, x(2)?)?),
        Op::Cast(t) => one(elementwise::cast(x(0)?, *t)),
        Op::Clip => one(elementwise::clip(x(0)?, opt(inputs, 1), opt(inputs, 2))?),
        Op::Fused(f) => {
            // Inputs read through folded views are copied out first (the device reads them
            // in place).
            let ins: Vec<Cow<'_, Tensor>> = inputs
                .iter()
                .enumerate()
                .map(|(k, t)| {
                    let t = t.ok_or_else(|| {
                        crate::tts::cuda::tensor::OpError("fused input missing".into())
                    })?;
                    Ok(match f.views_of(k) {
                        [] => Cow::Borrowed(t),
                        views => Cow::Owned(
                            movement::Strided::dense(&t.shape)
                                .through(views)?
                                .copy_of(t),
                        ),
                    })
                })
                .collect::<OpResult<_>>()?;
            let ins: Vec<&Tensor> = ins.iter().map(AsRef::as_ref).collect();
            one(elementwise::eval_fused(f, &ins)?)
        }
        Op::Identity => one(x(0)?.clone()),
        Op::Shape => one(movement::shape_of(x(0)?)),
        Op::Reshape { allow_zero } => {
            let t = x(0)?;
            let shape = movement::reshape_target(&t.shape, &x(1)?.ints()?, *allow_zero)?;
            one(t.clone().reshaped(shape)?)
        }
        Op::Unsqueeze => {
            let t = x(0)?;
            let shape = movement::unsqueeze_shape(&t.shape, &x(1)?.ints()?)?;
            one(t.clone().reshaped(shape)?)
        }
        Op::Squeeze => {
            let t = x(0)?;
            let axes = opt(inputs, 1).map(Tensor::ints).transpose()?;
            let shape = movement::squeeze_shape(&t.shape, axes.as_deref())?;
            one(t.clone().reshaped(shape)?)
        }
        Op::Transpose { perm } => one(movement::transpose(x(0)?, perm)?),
        Op::Concat { axis } => {
            let ins: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
            one(movement::concat(&ins, *axis)?)
        }
        Op::Slice => {
            let t = x(0)?;
            let axes = opt(inputs, 3).map(Tensor::ints).transpose()?;
            let steps = opt(inputs, 4).map(Tensor::ints).transpose()?;
            let view = movement::Strided::dense(&t.shape).slice(
                &x(1)?.ints()?,
                &x(2)?.ints()?,
                axes.as_deref(),
                steps.as_deref(),
            )?;
            one(view.copy_of(t))
        }
        Op::Split { axis, outputs } => {
            let sizes = opt(inputs, 1).map(Tensor::ints).transpose()?;
            movement::split(x(0)?, *axis, sizes.as_deref(), *outputs)
        }
        Op::Expand => one(movement::expand(x(0)?, &x(1)?.ints()?)?),
        Op::Gather { axis } => one(movement::gather(x(0)?, x(1)?, *axis)?),
        Op::GatherElements { axis } => one(index::gather_elements(x(0)?, x(1)?, *axis)?),
        Op::GatherND { batch_dims } => one(index::gather_nd(x(0)?, x(1)?, *batch_dims)?),
        Op::ScatterND => one(index::scatter_nd(x(0)?, x(1)?, x(2)?)?),
        Op::Pad => one(movement::pad(x(0)?, &x(1)?.ints()?, opt(inputs, 2))?),
        Op::ConstantOfShape(v) => one(movement::constant_of_shape(&x(0)?.ints()?, *v)?),
        Op::Range => one(movement::range(x(0)?, x(1)?, x(2)?)?),
        Op::NonZero => one(movement::nonzero(x(0)?)),
        Op::CumSum { exclusive, reverse } => {
            let axis = x(1)?.scalar()? as i64;
            one(index::cumsum(x(0)?, axis, *exclusive, *reverse)?)
        }
        Op::Reduce {
            kind,
            axes,
            keep_dims,
        } => {
            let axes = match axes {
                Some(a) => a.clone(),
                None => opt(inputs, 1)
                    .map(Tensor::ints)
                    .transpose()?
                    .unwrap_or_default(),
            };
            one(reduce::reduce(x(0)?, *kind, &axes, *keep_dims)?)
        }
        Op::Softmax { axis } => one(reduce::softmax(x(0)?, *axis)?),
        Op::MatMul => one(linalg::matmul(x(0)?, x(1)?)?),
        Op::Conv(s) => one(linalg::conv(x(0)?, x(1)?, opt(inputs, 2), s)?),
        Op::ConvTranspose(s) => one(linalg::conv_transpose(x(0)?, x(1)?, opt(inputs, 2), s)?),
        Op::RandomNormalLike { mean, scale } => {
            let t = x(0)?;
            one(Tensor::f32(
                t.shape.clone(),
                normal(rng, t.len(), *mean, *scale),
            ))
        }
    }
}
