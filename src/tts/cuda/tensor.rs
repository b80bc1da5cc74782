//! Host tensors: a shape and row-major data of one of the three element types a Piper graph uses.
//!
//! Invariant: `data.len() == shape.iter().product()` (a scalar has shape `[]` and one element).
//! Int32 ONNX constants are widened to int64 when read (Piper uses one, as an axis).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    F32,
    I64,
    Bool,
}

impl DType {
    /// The ONNX `TensorProto.DataType` number.
    pub fn from_onnx(code: i64) -> Option<DType> {
        match code {
            1 => Some(DType::F32),
            6 | 7 => Some(DType::I64),
            9 => Some(DType::Bool),
            _ => None,
        }
    }

    /// Bytes per element on the device (bools are one byte there).
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

#[derive(Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({:?}, {:?}", self.dtype(), self.shape)?;
        if self.len() <= 8 {
            match &self.data {
                Data::F32(v) => write!(f, ", {v:?}")?,
                Data::I64(v) => write!(f, ", {v:?}")?,
                Data::Bool(v) => write!(f, ", {v:?}")?,
            }
        }
        write!(f, ")")
    }
}

/// Why an operation cannot run on the tensors it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpError(pub String);

pub type OpResult<T> = Result<T, OpError>;

/// Shorthand for building an [`OpError`].
pub fn op_err<T>(msg: impl Into<String>) -> OpResult<T> {
    Err(OpError(msg.into()))
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

impl Tensor {
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        debug_assert_eq!(numel(&shape), data.len());
        Tensor {
            shape,
            data: Data::F32(data),
        }
    }

    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Tensor {
        debug_assert_eq!(numel(&shape), data.len());
        Tensor {
            shape,
            data: Data::I64(data),
        }
    }

    pub fn bool(shape: Vec<usize>, data: Vec<bool>) -> Tensor {
        debug_assert_eq!(numel(&shape), data.len());
        Tensor {
            shape,
            data: Data::Bool(data),
        }
    }

    /// A tensor of `dtype` filled with zeros (false).
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = numel(&shape);
        let data = match dtype {
            DType::F32 => Data::F32(vec![0.0; n]),
            DType::I64 => Data::I64(vec![0; n]),
            DType::Bool => Data::Bool(vec![false; n]),
        };
        Tensor { shape, data }
    }

    pub fn dtype(&self) -> DType {
        match self.data {
            Data::F32(_) => DType::F32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_f32(&self) -> OpResult<&[f32]> {
        match &self.data {
            Data::F32(v) => Ok(v),
            _ => op_err(format!("expected float, got {:?}", self.dtype())),
        }
    }

    pub fn as_i64(&self) -> OpResult<&[i64]> {
        match &self.data {
            Data::I64(v) => Ok(v),
            _ => op_err(format!("expected int64, got {:?}", self.dtype())),
        }
    }

    pub fn as_bool(&self) -> OpResult<&[bool]> {
        match &self.data {
            Data::Bool(v) => Ok(v),
            _ => op_err(format!("expected bool, got {:?}", self.dtype())),
        }
    }

    /// Integer values of a shape-like input (int64 tensor of any rank).
    pub fn ints(&self) -> OpResult<Vec<i64>> {
        Ok(self.as_i64()?.to_vec())
    }

    /// The single value of a one-element tensor, as f64 (for scalars such as Range's bounds).
    pub fn scalar(&self) -> OpResult<f64> {
        if self.len() != 1 {
            return op_err(format!("expected one value, got shape {:?}", self.shape));
        }
        Ok(match &self.data {
            Data::F32(v) => f64::from(v[0]),
            Data::I64(v) => v[0] as f64,
            Data::Bool(v) => f64::from(u8::from(v[0])),
        })
    }

    /// Same data, another shape of the same element count.
    pub fn reshaped(mut self, shape: Vec<usize>) -> OpResult<Tensor> {
        if numel(&shape) != self.len() {
            return op_err(format!(
                "cannot reshape {:?} ({} values) to {shape:?}",
                self.shape,
                self.len()
            ));
        }
        self.shape = shape;
        Ok(self)
    }

    /// Picks elements by flat source index (used by every data-movement op).
    pub fn gather_flat(&self, shape: Vec<usize>, index: impl Iterator<Item = usize>) -> Tensor {
        let data = match &self.data {
            Data::F32(v) => Data::F32(index.map(|i| v[i]).collect()),
            Data::I64(v) => Data::I64(index.map(|i| v[i]).collect()),
            Data::Bool(v) => Data::Bool(index.map(|i| v[i]).collect()),
        };
        Tensor { shape, data }
    }
}

/// Normalises a possibly negative axis against a rank.
pub fn axis(a: i64, rank: usize) -> OpResult<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if v < 0 || v >= r.max(1) {
        return op_err(format!("axis {a} out of range for rank {rank}"));
    }
    Ok(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_axes() {
        assert_eq!(strides(&[2, 3, 4]), [12, 4, 1]);
        assert_eq!(strides(&[]), Vec::<usize>::new());
        assert_eq!(axis(-1, 3).unwrap(), 2);
        assert!(axis(3, 3).is_err());
        assert!(axis(-4, 3).is_err());
    }

    #[test]
    fn reshape_checks_the_count() {
        let t = Tensor::f32(vec![2, 3], vec![0.0; 6]);
        assert_eq!(t.clone().reshaped(vec![3, 2]).unwrap().shape, [3, 2]);
        assert!(t.reshaped(vec![4]).is_err());
    }

    #[test]
    fn typed_access_is_checked() {
        let t = Tensor::i64(vec![1], vec![4]);
        assert!(t.as_f32().is_err());
        assert!(t.as_bool().is_err());
        assert_eq!(t.scalar().unwrap(), 4.0);
        assert!(Tensor::i64(vec![2], vec![1, 2]).scalar().is_err());
    }
}
