//! The operations of a plan, with their ONNX attributes already checked and typed.
//!
//! Input: one ONNX [`Node`]. Output: an [`Op`], or an error naming the node and what is not
//! supported. Every op here has a host implementation (`gpu::ops`); the CUDA executor implements
//! the float-heavy ones on the device and runs the rest (shape arithmetic) on the host.

use serde::{Deserialize, Serialize};

use crate::tts::cuda::onnx::{Attr, Node};
use crate::tts::cuda::tensor::{DType, Data};

/// One-input elementwise operations.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Unary {
    Neg,
    Sqrt,
    Exp,
    Erf,
    Tanh,
    Sigmoid,
    Relu,
    Softplus,
    Ceil,
    Not,
    LeakyRelu(f32),
}

/// Two-input elementwise operations (numpy broadcasting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Equal,
    Less,
    LessOrEqual,
    GreaterOrEqual,
    And,
}

impl Binary {
    /// Comparisons and logic produce bools whatever their inputs are.
    pub fn gives_bool(self) -> bool {
        matches!(
            self,
            Binary::Equal
                | Binary::Less
                | Binary::LessOrEqual
                | Binary::GreaterOrEqual
                | Binary::And
        )
    }
}

/// An elementwise operation as it appears inside a fused group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Ew {
    Unary(Unary),
    Binary(Binary),
    /// `cond ? x : y`.
    Where,
    Cast(DType),
    /// `min(max(x, lo), hi)`; an absent bound is an absent operand.
    Clip {
        lo: bool,
        hi: bool,
    },
}

/// A one-element constant written into a fused kernel's code instead of being read from memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    F32(f32),
    I64(i64),
    Bool(bool),
}

/// Where an operand of a fused instruction comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    /// The group's input number `i` (broadcast to the group's output shape).
    Input(usize),
    /// The result of instruction `i` of the same group.
    Temp(usize),
    /// A constant scalar (broadcast).
    Scalar(Scalar),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instr {
    pub op: Ew,
    pub args: Vec<Arg>,
    /// Element type of the result.
    pub dtype: DType,
}

/// A chain of elementwise operations evaluated in one pass; the last instruction is the output.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Fused {
    pub instrs: Vec<Instr>,
    /// Per input (missing: none), the movement steps folded into this one, source first: the
    /// input is read through their view instead of from a copy (see
    /// [`fold_views`](super::fuse::fold_views)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<Vec<ViewOp>>,
}

impl Fused {
    /// The views input `k` is read through (none for most inputs).
    pub fn views_of(&self, k: usize) -> &[ViewOp] {
        self.views.get(k).map_or(&[], Vec::as_slice)
    }
}

/// A movement step with constant parameters, as a view of its input: no data is moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ViewOp {
    Transpose(Vec<usize>),
    Slice {
        starts: Vec<i64>,
        ends: Vec<i64>,
        axes: Option<Vec<i64>>,
        steps: Option<Vec<i64>>,
    },
    /// Output `index` of a Split.
    Split {
        axis: i64,
        sizes: Option<Vec<i64>>,
        outputs: usize,
        index: usize,
    },
    Expand(Vec<i64>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceKind {
    Mean,
    Sum,
    Max,
}

/// Arithmetic precision of a convolution's matrix product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Precision {
    F32,
    /// FP16 operands, FP32 accumulation and output.
    F16,
    /// INT8 operands (per-channel weight scales, one calibrated input scale), INT32 accumulation.
    I8,
}

/// How the device runs the ungrouped FP32/FP16 convolutions: its own im2col + cuBLAS GEMM (the
/// default, faster on the H200), or cuDNN (`TALKER_CUDA_CONV=cudnn`, where it loads). An engine
/// records the path it was built for (engines made before cuDNN existed read as `Gemm`), so an
/// engine used with the other path is rebuilt like one from another driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvPath {
    #[default]
    Gemm,
    Cudnn,
}

impl ConvPath {
    pub fn name(self) -> &'static str {
        match self {
            ConvPath::Gemm => "gemm",
            ConvPath::Cudnn => "cudnn",
        }
    }
}

/// A 1-D convolution (`[batch, channels, time]`), as Conv or ConvTranspose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvSpec {
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub pad_end: usize,
    pub group: usize,
    pub precision: Precision,
    /// INT8 only: the calibrated absolute maximum of the input (its scale is `amax / 127`).
    pub input_amax: Option<f32>,
    /// INT8 only: one scale per output channel; the weight tensor then holds the integers.
    pub weight_scales: Option<Vec<f32>>,
}

/// What the tests build most: an FP32 convolution with symmetric padding, nothing INT8.
#[cfg(test)]
impl ConvSpec {
    pub fn plain(kernel: usize, stride: usize, dilation: usize, pad: usize, group: usize) -> Self {
        ConvSpec {
            kernel,
            stride,
            dilation,
            pad_begin: pad,
            pad_end: pad,
            group,
            precision: Precision::F32,
            input_amax: None,
            weight_scales: None,
        }
    }
}

/// What the tests build most: an FP32 instruction.
#[cfg(test)]
impl Instr {
    pub fn f32(op: Ew, args: &[Arg]) -> Self {
        Instr {
            op,
            args: args.to_vec(),
            dtype: DType::F32,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Unary(Unary),
    Binary(Binary),
    Where,
    Cast(DType),
    /// Inputs: x, optional min, optional max.
    Clip,
    Fused(Fused),
    Identity,
    Shape,
    Reshape {
        allow_zero: bool,
    },
    /// Axes from the second input.
    Unsqueeze,
    /// Axes from the second input, or every axis of size 1 when absent.
    Squeeze,
    Transpose {
        perm: Vec<usize>,
    },
    Concat {
        axis: i64,
    },
    /// Inputs: data, starts, ends, optional axes, optional steps.
    Slice,
    /// Inputs: data, optional split sizes; `outputs` equal parts when sizes are absent.
    Split {
        axis: i64,
        outputs: usize,
    },
    Expand,
    Gather {
        axis: i64,
    },
    GatherElements {
        axis: i64,
    },
    GatherND {
        batch_dims: usize,
    },
    ScatterND,
    /// Constant mode only. Inputs: data, pads, optional value.
    Pad,
    ConstantOfShape(Scalar),
    Range,
    NonZero,
    /// Axis from the second input.
    CumSum {
        exclusive: bool,
        reverse: bool,
    },
    /// `axes` from the attribute (ReduceMean/Max before opset 18) or, when `None`, from the
    /// second input (ReduceSum since opset 13); no axes at all reduces everything.
    Reduce {
        kind: ReduceKind,
        axes: Option<Vec<i64>>,
        keep_dims: bool,
    },
    Softmax {
        axis: i64,
    },
    MatMul,
    /// Inputs: x, weight, optional bias.
    Conv(ConvSpec),
    /// Inputs: x, weight `[in, out, kernel]`, optional bias.
    ConvTranspose(ConvSpec),
    /// Samples N(mean, scale²) shaped like its input. Not constant-folded.
    RandomNormalLike {
        mean: f32,
        scale: f32,
    },
}

impl Op {
    /// Elementwise ops are the ones the fuser may merge.
    pub fn as_ew(&self) -> Option<Ew> {
        match self {
            Op::Unary(u) => Some(Ew::Unary(*u)),
            Op::Binary(b) => Some(Ew::Binary(*b)),
            Op::Where => Some(Ew::Where),
            Op::Cast(t) => Some(Ew::Cast(*t)),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary(_) => "Unary",
            Op::Binary(_) => "Binary",
            Op::Where => "Where",
            Op::Cast(_) => "Cast",
            Op::Clip => "Clip",
            Op::Fused(_) => "Fused",
            Op::Identity => "Identity",
            Op::Shape => "Shape",
            Op::Reshape { .. } => "Reshape",
            Op::Unsqueeze => "Unsqueeze",
            Op::Squeeze => "Squeeze",
            Op::Transpose { .. } => "Transpose",
            Op::Concat { .. } => "Concat",
            Op::Slice => "Slice",
            Op::Split { .. } => "Split",
            Op::Expand => "Expand",
            Op::Gather { .. } => "Gather",
            Op::GatherElements { .. } => "GatherElements",
            Op::GatherND { .. } => "GatherND",
            Op::ScatterND => "ScatterND",
            Op::Pad => "Pad",
            Op::ConstantOfShape(_) => "ConstantOfShape",
            Op::Range => "Range",
            Op::NonZero => "NonZero",
            Op::CumSum { .. } => "CumSum",
            Op::Reduce { .. } => "Reduce",
            Op::Softmax { .. } => "Softmax",
            Op::MatMul => "MatMul",
            Op::Conv(_) => "Conv",
            Op::ConvTranspose(_) => "ConvTranspose",
            Op::RandomNormalLike { .. } => "RandomNormalLike",
        }
    }
}

/// Why a node cannot become an [`Op`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node:?} ({op}): {reason}")]
pub struct UnsupportedNode {
    pub node: String,
    pub op: String,
    pub reason: String,
}

fn conv_spec(n: &Node, err: &dyn Fn(&str) -> UnsupportedNode) -> Result<ConvSpec, UnsupportedNode> {
    let one = |name: &str, default: i64| -> Result<usize, UnsupportedNode> {
        match n.ints(name) {
            None => Ok(default as usize),
            Some([v]) if *v >= 1 => Ok(*v as usize),
            Some(v) => Err(err(&format!(
                "{name} {v:?}: only 1-D convolutions are supported"
            ))),
        }
    };
    let pads = match n.ints("pads") {
        None => [0, 0],
        Some([a, b]) if *a >= 0 && *b >= 0 => [*a as usize, *b as usize],
        Some(v) => {
            return Err(err(&format!(
                "pads {v:?}: only 1-D convolutions are supported"
            )));
        }
    };
    if n.string("auto_pad").is_some_and(|p| p != "NOTSET") {
        return Err(err("auto_pad is not supported"));
    }
    if n.ints("output_padding")
        .is_some_and(|p| p.iter().any(|&v| v != 0))
        || n.ints("output_shape").is_some()
    {
        return Err(err("output_padding/output_shape are not supported"));
    }
    let kernel = n
        .ints("kernel_shape")
        .and_then(|k| k.first().copied())
        .unwrap_or(0);
    Ok(ConvSpec {
        kernel: kernel.max(0) as usize,
        stride: one("strides", 1)?,
        dilation: one("dilations", 1)?,
        pad_begin: pads[0],
        pad_end: pads[1],
        group: n.int("group").unwrap_or(1).max(1) as usize,
        precision: Precision::F32,
        input_amax: None,
        weight_scales: None,
    })
}

impl TryFrom<&Node> for Op {
    type Error = UnsupportedNode;

    fn try_from(n: &Node) -> Result<Op, UnsupportedNode> {
        let err = |reason: &str| UnsupportedNode {
            node: n.name.clone(),
            op: n.op.clone(),
            reason: reason.to_owned(),
        };
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return Err(err(&format!("domain {:?} is not supported", n.domain)));
        }
        let int = |name: &str, default: i64| n.int(name).unwrap_or(default);
        Ok(match n.op.as_str() {
            "Neg" => Op::Unary(Unary::Neg),
            "Sqrt" => Op::Unary(Unary::Sqrt),
            "Exp" => Op::Unary(Unary::Exp),
            "Erf" => Op::Unary(Unary::Erf),
            "Tanh" => Op::Unary(Unary::Tanh),
            "Sigmoid" => Op::Unary(Unary::Sigmoid),
            "Relu" => Op::Unary(Unary::Relu),
            "Softplus" => Op::Unary(Unary::Softplus),
            "Ceil" => Op::Unary(Unary::Ceil),
            "Not" => Op::Unary(Unary::Not),
            "LeakyRelu" => Op::Unary(Unary::LeakyRelu(n.float("alpha").unwrap_or(0.01))),
            "Add" => Op::Binary(Binary::Add),
            "Sub" => Op::Binary(Binary::Sub),
            "Mul" => Op::Binary(Binary::Mul),
            "Div" => Op::Binary(Binary::Div),
            "Pow" => Op::Binary(Binary::Pow),
            "Equal" => Op::Binary(Binary::Equal),
            "Less" => Op::Binary(Binary::Less),
            "LessOrEqual" => Op::Binary(Binary::LessOrEqual),
            "GreaterOrEqual" => Op::Binary(Binary::GreaterOrEqual),
            "And" => Op::Binary(Binary::And),
            "Where" => Op::Where,
            "Cast" => Op::Cast(
                DType::from_onnx(int("to", 0))
                    .filter(|_| int("to", 0) != 6)
                    .ok_or_else(|| err("Cast to a type other than float, int64 or bool"))?,
            ),
            "Clip" => Op::Clip,
            "Identity" => Op::Identity,
            "Shape" => {
                if n.attr("start").is_some() || n.attr("end").is_some() {
                    return Err(err("Shape with start/end is not supported"));
                }
                Op::Shape
            }
            "Reshape" => Op::Reshape {
                allow_zero: int("allowzero", 0) != 0,
            },
            "Unsqueeze" => Op::Unsqueeze,
            "Squeeze" => Op::Squeeze,
            "Transpose" => Op::Transpose {
                perm: n
                    .ints("perm")
                    .ok_or_else(|| err("Transpose without perm"))?
                    .iter()
                    .map(|&p| p.max(0) as usize)
                    .collect(),
            },
            "Concat" => Op::Concat {
                axis: n.int("axis").ok_or_else(|| err("Concat without axis"))?,
            },
            "Slice" => Op::Slice,
            "Split" => Op::Split {
                axis: int("axis", 0),
                outputs: n.outputs.len(),
            },
            "Expand" => Op::Expand,
            "Gather" => Op::Gather {
                axis: int("axis", 0),
            },
            "GatherElements" => Op::GatherElements {
                axis: int("axis", 0),
            },
            "GatherND" => Op::GatherND {
                batch_dims: int("batch_dims", 0).max(0) as usize,
            },
            "ScatterND" => {
                if n.string("reduction").is_some_and(|r| r != "none") {
                    return Err(err("ScatterND reductions are not supported"));
                }
                Op::ScatterND
            }
            "Pad" => {
                if n.string("mode").is_some_and(|m| m != "constant") {
                    return Err(err("only constant padding is supported"));
                }
                Op::Pad
            }
            "ConstantOfShape" => Op::ConstantOfShape(match n.attr("value") {
                Some(Attr::Tensor(t)) if t.len() == 1 => match &t.data {
                    Data::F32(v) => Scalar::F32(v[0]),
                    Data::I64(v) => Scalar::I64(v[0]),
                    Data::Bool(v) => Scalar::Bool(v[0]),
                },
                None => Scalar::F32(0.0),
                _ => return Err(err("value must hold one element")),
            }),
            "Range" => Op::Range,
            "NonZero" => Op::NonZero,
            "CumSum" => Op::CumSum {
                exclusive: int("exclusive", 0) != 0,
                reverse: int("reverse", 0) != 0,
            },
            "ReduceMean" | "ReduceSum" | "ReduceMax" => {
                let kind = match n.op.as_str() {
                    "ReduceMean" => ReduceKind::Mean,
                    "ReduceSum" => ReduceKind::Sum,
                    _ => ReduceKind::Max,
                };
                if int("noop_with_empty_axes", 0) != 0 {
                    return Err(err("noop_with_empty_axes is not supported"));
                }
                Op::Reduce {
                    kind,
                    axes: n.ints("axes").map(<[i64]>::to_vec),
                    keep_dims: int("keepdims", 1) != 0,
                }
            }
            "Softmax" => Op::Softmax {
                axis: int("axis", -1),
            },
            "MatMul" => Op::MatMul,
            "Conv" => Op::Conv(conv_spec(n, &err)?),
            "ConvTranspose" => Op::ConvTranspose(conv_spec(n, &err)?),
            "RandomNormalLike" => {
                if n.int("dtype").is_some_and(|d| d != 1) {
                    return Err(err("only float samples are supported"));
                }
                Op::RandomNormalLike {
                    mean: n.float("mean").unwrap_or(0.0),
                    scale: n.float("scale").unwrap_or(1.0),
                }
            }
            other => return Err(err(&format!("op type {other} is not supported"))),
        })
    }
}
