//! Host elementwise kernels (numpy broadcasting) and the evaluation of fused groups.
//!
//! Input: tensors of the types ONNX allows for each op. Output: a new tensor of the broadcast
//! shape. Float maths follows ONNX Runtime's definitions (e.g. `Softplus(x) = log(1 + eˣ)` computed
//! without overflow); the CUDA kernels generated from the same [`Fused`] programs use the same
//! formulas, so host and device agree to rounding.

use super::broadcast::{broadcast_shape, broadcast_strides, map1, map2, map3};
use crate::tts::cuda::program::op::{Arg, Binary, Ew, Fused, Scalar, Unary};
use crate::tts::cuda::tensor::{DType, Data, OpResult, Tensor, op_err};

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

pub fn softplus(x: f32) -> f32 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

pub fn unary(op: Unary, x: &Tensor) -> OpResult<Tensor> {
    let shape = x.shape.clone();
    let same = |f: fn(f32) -> f32| -> OpResult<Tensor> {
        Ok(Tensor::f32(
            shape.clone(),
            x.as_f32()?.iter().map(|&v| f(v)).collect(),
        ))
    };
    match (op, &x.data) {
        (Unary::Neg, Data::I64(v)) => Ok(Tensor::i64(shape, v.iter().map(|a| -a).collect())),
        (Unary::Relu, Data::I64(v)) => {
            Ok(Tensor::i64(shape, v.iter().map(|&a| a.max(0)).collect()))
        }
        (Unary::Not, Data::Bool(v)) => Ok(Tensor::bool(shape, v.iter().map(|a| !a).collect())),
        (Unary::Not, _) => op_err("Not needs bools"),
        (Unary::Neg, _) => same(|v| -v),
        (Unary::Sqrt, _) => same(f32::sqrt),
        (Unary::Exp, _) => same(f32::exp),
        (Unary::Erf, _) => same(libm::erff),
        (Unary::Tanh, _) => same(f32::tanh),
        (Unary::Sigmoid, _) => same(sigmoid),
        (Unary::Relu, _) => same(|v| v.max(0.0)),
        (Unary::Softplus, _) => same(softplus),
        (Unary::Ceil, _) => same(f32::ceil),
        (Unary::LeakyRelu(alpha), _) => Ok(Tensor::f32(
            shape,
            x.as_f32()?
                .iter()
                .map(|&v| if v >= 0.0 { v } else { v * alpha })
                .collect(),
        )),
    }
}

fn int_div(a: i64, b: i64) -> i64 {
    // Division by zero has no defined result in ONNX; 0 keeps the kernel total.
    if b == 0 { 0 } else { a.wrapping_div(b) }
}

pub fn binary(op: Binary, a: &Tensor, b: &Tensor) -> OpResult<Tensor> {
    let out = broadcast_shape(&[&a.shape, &b.shape])?;
    let sa = broadcast_strides(&a.shape, &out);
    let sb = broadcast_strides(&b.shape, &out);
    let t = |d: Data| Tensor {
        shape: out.clone(),
        data: d,
    };
    Ok(match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            let (x, y) = ((x.as_slice(), sa.as_slice()), (y.as_slice(), sb.as_slice()));
            match op {
                Binary::Add => t(Data::F32(map2(x, y, &out, |p, q| p + q))),
                Binary::Sub => t(Data::F32(map2(x, y, &out, |p, q| p - q))),
                Binary::Mul => t(Data::F32(map2(x, y, &out, |p, q| p * q))),
                Binary::Div => t(Data::F32(map2(x, y, &out, |p, q| p / q))),
                Binary::Pow => t(Data::F32(map2(x, y, &out, f32::powf))),
                Binary::Equal => t(Data::Bool(map2(x, y, &out, |p, q| p == q))),
                Binary::Less => t(Data::Bool(map2(x, y, &out, |p, q| p < q))),
                Binary::LessOrEqual => t(Data::Bool(map2(x, y, &out, |p, q| p <= q))),
                Binary::GreaterOrEqual => t(Data::Bool(map2(x, y, &out, |p, q| p >= q))),
                Binary::And => return op_err("And needs bools"),
            }
        }
        (Data::F32(x), Data::I64(y)) if op == Binary::Pow => {
            t(Data::F32(map2((x, &sa), (y, &sb), &out, |p, q| {
                p.powf(q as f32)
            })))
        }
        (Data::I64(x), Data::I64(y)) => {
            let (x, y) = ((x.as_slice(), sa.as_slice()), (y.as_slice(), sb.as_slice()));
            match op {
                Binary::Add => t(Data::I64(map2(x, y, &out, i64::wrapping_add))),
                Binary::Sub => t(Data::I64(map2(x, y, &out, i64::wrapping_sub))),
                Binary::Mul => t(Data::I64(map2(x, y, &out, i64::wrapping_mul))),
                Binary::Div => t(Data::I64(map2(x, y, &out, int_div))),
                Binary::Equal => t(Data::Bool(map2(x, y, &out, |p, q| p == q))),
                Binary::Less => t(Data::Bool(map2(x, y, &out, |p, q| p < q))),
                Binary::LessOrEqual => t(Data::Bool(map2(x, y, &out, |p, q| p <= q))),
                Binary::GreaterOrEqual => t(Data::Bool(map2(x, y, &out, |p, q| p >= q))),
                Binary::Pow | Binary::And => {
                    return op_err(format!("{op:?} on int64 is not supported"));
                }
            }
        }
        (Data::Bool(x), Data::Bool(y)) => match op {
            Binary::And => t(Data::Bool(map2((x, &sa), (y, &sb), &out, |p, q| p && q))),
            Binary::Equal => t(Data::Bool(map2((x, &sa), (y, &sb), &out, |p, q| p == q))),
            _ => return op_err(format!("{op:?} on bools is not supported")),
        },
        _ => {
            return op_err(format!(
                "{op:?} of {:?} and {:?} is not supported",
                a.dtype(),
                b.dtype()
            ));
        }
    })
}

fn pick<T>(c: bool, a: T, b: T) -> T {
    if c { a } else { b }
}

pub fn where_(c: &Tensor, x: &Tensor, y: &Tensor) -> OpResult<Tensor> {
    let out = broadcast_shape(&[&c.shape, &x.shape, &y.shape])?;
    let cond = (c.as_bool()?, broadcast_strides(&c.shape, &out));
    let sx = broadcast_strides(&x.shape, &out);
    let sy = broadcast_strides(&y.shape, &out);
    let data = match (&x.data, &y.data) {
        (Data::F32(a), Data::F32(b)) => {
            Data::F32(map3((cond.0, &cond.1), (a, &sx), (b, &sy), &out, pick))
        }
        (Data::I64(a), Data::I64(b)) => {
            Data::I64(map3((cond.0, &cond.1), (a, &sx), (b, &sy), &out, pick))
        }
        (Data::Bool(a), Data::Bool(b)) => {
            Data::Bool(map3((cond.0, &cond.1), (a, &sx), (b, &sy), &out, pick))
        }
        _ => return op_err("Where branches differ in type"),
    };
    Ok(Tensor { shape: out, data })
}

pub fn cast(x: &Tensor, to: DType) -> Tensor {
    let data = match (&x.data, to) {
        (Data::F32(v), DType::F32) => Data::F32(v.clone()),
        (Data::F32(v), DType::I64) => Data::I64(v.iter().map(|&f| f as i64).collect()),
        (Data::F32(v), DType::Bool) => Data::Bool(v.iter().map(|&f| f != 0.0).collect()),
        (Data::I64(v), DType::F32) => Data::F32(v.iter().map(|&i| i as f32).collect()),
        (Data::I64(v), DType::I64) => Data::I64(v.clone()),
        (Data::I64(v), DType::Bool) => Data::Bool(v.iter().map(|&i| i != 0).collect()),
        (Data::Bool(v), DType::F32) => {
            Data::F32(v.iter().map(|&b| f32::from(u8::from(b))).collect())
        }
        (Data::Bool(v), DType::I64) => Data::I64(v.iter().map(|&b| i64::from(b)).collect()),
        (Data::Bool(v), DType::Bool) => Data::Bool(v.clone()),
    };
    Tensor {
        shape: x.shape.clone(),
        data,
    }
}

/// `Clip(x, lo, hi)`; bounds are one-element tensors of x's type.
pub fn clip(x: &Tensor, lo: Option<&Tensor>, hi: Option<&Tensor>) -> OpResult<Tensor> {
    let lo = lo.map(Tensor::scalar).transpose()?;
    let hi = hi.map(Tensor::scalar).transpose()?;
    Ok(match &x.data {
        Data::F32(v) => {
            let (lo, hi) = (lo.map(|l| l as f32), hi.map(|h| h as f32));
            let shape = x.shape.clone();
            Tensor::f32(
                shape,
                v.iter()
                    .map(|&a| {
                        let a = lo.map_or(a, |l| a.max(l));
                        hi.map_or(a, |h| a.min(h))
                    })
                    .collect(),
            )
        }
        Data::I64(v) => {
            let (lo, hi) = (lo.map(|l| l as i64), hi.map(|h| h as i64));
            Tensor::i64(
                x.shape.clone(),
                v.iter()
                    .map(|&a| {
                        let a = lo.map_or(a, |l| a.max(l));
                        hi.map_or(a, |h| a.min(h))
                    })
                    .collect(),
            )
        }
        Data::Bool(_) => return op_err("Clip on bools"),
    })
}

/// One elementwise operation on whole tensors.
pub fn ew(op: Ew, args: &[&Tensor]) -> OpResult<Tensor> {
    let need = |n: usize| -> OpResult<()> {
        if args.len() == n {
            Ok(())
        } else {
            op_err(format!("{op:?} takes {n} operands, got {}", args.len()))
        }
    };
    match op {
        Ew::Unary(u) => {
            need(1)?;
            unary(u, args[0])
        }
        Ew::Binary(b) => {
            need(2)?;
            binary(b, args[0], args[1])
        }
        Ew::Where => {
            need(3)?;
            where_(args[0], args[1], args[2])
        }
        Ew::Cast(t) => {
            need(1)?;
            Ok(cast(args[0], t))
        }
        Ew::Clip { lo, hi } => {
            need(1 + usize::from(lo) + usize::from(hi))?;
            let lo_t = lo.then(|| args[1]);
            let hi_t = hi.then(|| args[1 + usize::from(lo)]);
            clip(args[0], lo_t, hi_t)
        }
    }
}

pub fn scalar_tensor(s: Scalar) -> Tensor {
    match s {
        Scalar::F32(v) => Tensor::f32(vec![], vec![v]),
        Scalar::I64(v) => Tensor::i64(vec![], vec![v]),
        Scalar::Bool(v) => Tensor::bool(vec![], vec![v]),
    }
}

/// Evaluates a fused group instruction by instruction (each on whole tensors).
pub fn eval_fused(f: &Fused, inputs: &[&Tensor]) -> OpResult<Tensor> {
    let mut temps: Vec<Tensor> = Vec::with_capacity(f.instrs.len());
    for ins in &f.instrs {
        let scalars: Vec<Tensor> = ins
            .args
            .iter()
            .filter_map(|a| match *a {
                Arg::Scalar(s) => Some(scalar_tensor(s)),
                _ => None,
            })
            .collect();
        let mut next_scalar = scalars.iter();
        let args: Vec<&Tensor> = ins
            .args
            .iter()
            .map(|a| match *a {
                Arg::Input(i) => inputs.get(i).copied(),
                Arg::Temp(i) => temps.get(i),
                Arg::Scalar(_) => next_scalar.next(),
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                crate::tts::cuda::tensor::OpError("fused operand out of range".into())
            })?;
        let t = ew(ins.op, &args)?;
        temps.push(t);
    }
    temps
        .pop()
        .ok_or_else(|| crate::tts::cuda::tensor::OpError("empty fused group".into()))
}

/// A broadcast copy of `x` to `shape` (Expand's kernel).
pub fn broadcast_to(x: &Tensor, shape: &[usize]) -> OpResult<Tensor> {
    let out = broadcast_shape(&[&x.shape, shape])?;
    let s = broadcast_strides(&x.shape, &out);
    let data = match &x.data {
        Data::F32(v) => Data::F32(map1(v, &s, &out, |a| a)),
        Data::I64(v) => Data::I64(map1(v, &s, &out, |a| a)),
        Data::Bool(v) => Data::Bool(map1(v, &s, &out, |a| a)),
    };
    Ok(Tensor { shape: out, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::cuda::program::op::Instr;

    fn f(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::f32(shape.to_vec(), v.to_vec())
    }

    #[test]
    fn float_maths() {
        let x = f(&[4], &[-2.0, -0.5, 0.0, 3.0]);
        let lr = unary(Unary::LeakyRelu(0.1), &x).unwrap();
        assert_eq!(lr.as_f32().unwrap(), [-0.2, -0.05, 0.0, 3.0]);
        let sp = unary(Unary::Softplus, &f(&[2], &[100.0, -100.0])).unwrap();
        assert_eq!(sp.as_f32().unwrap()[0], 100.0);
        assert!(sp.as_f32().unwrap()[1] > 0.0);
        let e = unary(Unary::Erf, &f(&[1], &[0.5])).unwrap();
        assert!((e.as_f32().unwrap()[0] - 0.520_499_9).abs() < 1e-6);
        assert!(unary(Unary::Not, &x).is_err());
    }

    #[test]
    fn binary_types_and_broadcast() {
        let a = f(&[2, 1], &[1.0, 2.0]);
        let b = f(&[3], &[10.0, 20.0, 30.0]);
        let s = binary(Binary::Add, &a, &b).unwrap();
        assert_eq!(s.shape, [2, 3]);
        assert_eq!(s.as_f32().unwrap(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        let i = binary(
            Binary::Div,
            &Tensor::i64(vec![3], vec![7, -7, 1]),
            &Tensor::i64(vec![3], vec![2, 2, 0]),
        )
        .unwrap();
        assert_eq!(i.as_i64().unwrap(), [3, -3, 0]);
        let p = binary(Binary::Pow, &f(&[1], &[3.0]), &Tensor::i64(vec![], vec![2])).unwrap();
        assert_eq!(p.as_f32().unwrap(), [9.0]);
        assert!(binary(Binary::Add, &a, &Tensor::i64(vec![1], vec![1])).is_err());
        assert!(binary(Binary::And, &a, &a).is_err());
        assert!(binary(Binary::Add, &f(&[2], &[0.0; 2]), &f(&[3], &[0.0; 3])).is_err());
    }

    #[test]
    fn where_cast_clip() {
        let c = Tensor::bool(vec![2], vec![true, false]);
        let w = where_(&c, &f(&[2], &[1.0, 2.0]), &f(&[], &[9.0])).unwrap();
        assert_eq!(w.as_f32().unwrap(), [1.0, 9.0]);
        assert!(where_(&c, &f(&[2], &[1.0, 2.0]), &Tensor::i64(vec![], vec![1])).is_err());
        assert_eq!(
            cast(&f(&[2], &[2.7, -2.7]), DType::I64).as_i64().unwrap(),
            [2, -2]
        );
        let cl = clip(
            &f(&[3], &[-5.0, 0.5, 5.0]),
            Some(&f(&[], &[0.0])),
            Some(&f(&[], &[1.0])),
        );
        assert_eq!(cl.unwrap().as_f32().unwrap(), [0.0, 0.5, 1.0]);
    }

    #[test]
    fn fused_program_equals_the_chain() {
        // y = tanh(a + b) * b
        let prog = Fused {
            views: Vec::new(),
            instrs: vec![
                Instr::f32(Ew::Binary(Binary::Add), &[Arg::Input(0), Arg::Input(1)]),
                Instr::f32(Ew::Unary(Unary::Tanh), &[Arg::Temp(0)]),
                Instr::f32(Ew::Binary(Binary::Mul), &[Arg::Temp(1), Arg::Input(1)]),
            ],
        };
        let a = f(&[2], &[0.1, 0.2]);
        let b = f(&[2], &[0.3, -0.4]);
        let y = eval_fused(&prog, &[&a, &b]).unwrap();
        let want: Vec<f32> = [(0.1f32, 0.3f32), (0.2, -0.4)]
            .iter()
            .map(|&(p, q)| (p + q).tanh() * q)
            .collect();
        assert_eq!(y.as_f32().unwrap(), want);
        assert!(eval_fused(&prog, &[&a]).is_err());
        assert!(eval_fused(&Fused::default(), &[]).is_err());
    }
}
