//! ONNX models read into plain Rust structures: nodes with their attributes, initializers as
//! [`Tensor`]s, the graph's inputs and outputs.
//!
//! Input: the bytes of a `.onnx` file. Output: a [`Model`]. Only what inference of a Piper voice
//! needs is kept (no doc strings, no value infos); anything the executors could not honour
//! (external data, sub-graphs, element types other than float/int64/int32/bool) is refused here
//! with the tensor's or node's name, rather than misread later.

use crate::tts::wire::{
    Field, WIRE_LEN, WIRE_VARINT, WireError, fields, float_value, push_floats, push_ints, strings,
    varint_value,
};

use super::tensor::{DType, Data, Tensor, numel};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("the file is not a valid ONNX model ({0})")]
    Wire(#[from] WireError),
    #[error("the model has no graph")]
    NoGraph,
    #[error(
        "tensor {name:?}: element type {code} is not supported (float, int32, int64 and bool are)"
    )]
    DType { name: String, code: i64 },
    #[error("tensor {name:?}: {reason}")]
    BadTensor { name: String, reason: String },
    #[error("node {node:?}: attribute {attr:?} holds a sub-graph or an unsupported kind ({kind})")]
    Attribute {
        node: String,
        attr: String,
        kind: i64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
    Floats(Vec<f32>),
    Str(String),
    Tensor(Tensor),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: String,
    pub domain: String,
    /// Input names; an empty name is an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Vec<(String, Attr)>,
}

impl Node {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.attr(name) {
            Some(Attr::Int(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        match self.attr(name) {
            Some(Attr::Ints(v)) => Some(v),
            _ => None,
        }
    }

    pub fn float(&self, name: &str) -> Option<f32> {
        match self.attr(name) {
            Some(Attr::Float(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn string(&self, name: &str) -> Option<&str> {
        match self.attr(name) {
            Some(Attr::Str(v)) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub initializers: Vec<(String, Tensor)>,
    /// Runtime inputs (initializers listed as inputs by older exporters are left out).
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The default-domain opset the model was exported for.
    pub opset: i64,
    pub graph: Graph,
}

const MODEL_OPSET: u64 = 8;
const MODEL_GRAPH: u64 = 7;
const OPSET_DOMAIN: u64 = 1;
const OPSET_VERSION: u64 = 2;
const GRAPH_NODE: u64 = 1;
const GRAPH_INITIALIZER: u64 = 5;
const GRAPH_INPUT: u64 = 11;
const GRAPH_OUTPUT: u64 = 12;
const NODE_INPUT: u64 = 1;
const NODE_OUTPUT: u64 = 2;
const NODE_NAME: u64 = 3;
const NODE_OP_TYPE: u64 = 4;
const NODE_ATTRIBUTE: u64 = 5;
const NODE_DOMAIN: u64 = 7;
const ATTR_NAME: u64 = 1;
const ATTR_F: u64 = 2;
const ATTR_I: u64 = 3;
const ATTR_S: u64 = 4;
const ATTR_T: u64 = 5;
const ATTR_FLOATS: u64 = 7;
const ATTR_INTS: u64 = 8;
const ATTR_TYPE: u64 = 20;
const TENSOR_DIMS: u64 = 1;
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_FLOAT_DATA: u64 = 4;
const TENSOR_INT32_DATA: u64 = 5;
const TENSOR_INT64_DATA: u64 = 7;
const TENSOR_NAME: u64 = 8;
const TENSOR_RAW_DATA: u64 = 9;
const TENSOR_DATA_LOCATION: u64 = 14;
const VALUE_INFO_NAME: u64 = 1;

// AttributeProto.AttributeType
const KIND_FLOAT: i64 = 1;
const KIND_INT: i64 = 2;
const KIND_STRING: i64 = 3;
const KIND_TENSOR: i64 = 4;
const KIND_FLOATS: i64 = 6;
const KIND_INTS: i64 = 7;

impl Model {
    pub fn parse(bytes: &[u8]) -> Result<Model, ParseError> {
        let top = fields(bytes)?;
        let mut opset = 1;
        let mut graph = None;
        for f in &top {
            let body = &bytes[f.value.clone()];
            match (f.number, f.wire) {
                (MODEL_OPSET, WIRE_LEN) => {
                    let mut domain = String::new();
                    let mut version = 1;
                    for g in fields(body)? {
                        match (g.number, g.wire) {
                            (OPSET_DOMAIN, WIRE_LEN) => {
                                domain = String::from_utf8_lossy(&body[g.value.clone()]).into()
                            }
                            (OPSET_VERSION, WIRE_VARINT) => {
                                version = varint_value(body, &g)? as i64
                            }
                            _ => {}
                        }
                    }
                    if domain.is_empty() || domain == "ai.onnx" {
                        opset = version;
                    }
                }
                (MODEL_GRAPH, WIRE_LEN) => graph = Some(parse_graph(body)?),
                _ => {}
            }
        }
        Ok(Model {
            opset,
            graph: graph.ok_or(ParseError::NoGraph)?,
        })
    }
}

fn parse_graph(buf: &[u8]) -> Result<Graph, ParseError> {
    let mut g = Graph::default();
    let mut inputs = Vec::new();
    for f in fields(buf)? {
        if f.wire != WIRE_LEN {
            continue;
        }
        let body = &buf[f.value.clone()];
        match f.number {
            GRAPH_NODE => g.nodes.push(parse_node(body)?),
            GRAPH_INITIALIZER => g.initializers.push(parse_tensor(body)?),
            GRAPH_INPUT => inputs.extend(strings(body, VALUE_INFO_NAME)?),
            GRAPH_OUTPUT => g.outputs.extend(strings(body, VALUE_INFO_NAME)?),
            _ => {}
        }
    }
    g.inputs = inputs
        .into_iter()
        .filter(|i| !g.initializers.iter().any(|(n, _)| n == i))
        .collect();
    Ok(g)
}

fn text(buf: &[u8], f: &Field) -> String {
    String::from_utf8_lossy(&buf[f.value.clone()]).into_owned()
}

fn parse_node(buf: &[u8]) -> Result<Node, ParseError> {
    let mut n = Node {
        name: String::new(),
        op: String::new(),
        domain: String::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        attrs: Vec::new(),
    };
    let mut attrs = Vec::new();
    for f in fields(buf)? {
        if f.wire != WIRE_LEN {
            continue;
        }
        match f.number {
            NODE_INPUT => n.inputs.push(text(buf, &f)),
            NODE_OUTPUT => n.outputs.push(text(buf, &f)),
            NODE_NAME => n.name = text(buf, &f),
            NODE_OP_TYPE => n.op = text(buf, &f),
            NODE_DOMAIN => n.domain = text(buf, &f),
            NODE_ATTRIBUTE => attrs.push(f.value.clone()),
            _ => {}
        }
    }
    for range in attrs {
        let a = parse_attr(&buf[range], &n.name)?;
        n.attrs.push(a);
    }
    Ok(n)
}

fn parse_attr(buf: &[u8], node: &str) -> Result<(String, Attr), ParseError> {
    let mut name = String::new();
    let mut kind = 0;
    let (mut f, mut i, mut s, mut t) = (None, None, None, None);
    let (mut floats, mut ints) = (Vec::new(), Vec::new());
    for fl in fields(buf)? {
        match fl.number {
            ATTR_NAME if fl.wire == WIRE_LEN => name = text(buf, &fl),
            ATTR_TYPE => kind = varint_value(buf, &fl)? as i64,
            ATTR_F => f = Some(float_value(buf, &fl)?),
            ATTR_I => i = Some(varint_value(buf, &fl)? as i64),
            ATTR_S if fl.wire == WIRE_LEN => s = Some(text(buf, &fl)),
            ATTR_T if fl.wire == WIRE_LEN => t = Some(parse_tensor(&buf[fl.value.clone()])?.1),
            ATTR_FLOATS => push_floats(buf, &fl, &mut floats)?,
            ATTR_INTS => push_ints(buf, &fl, &mut ints)?,
            _ => {}
        }
    }
    let bad = || ParseError::Attribute {
        node: node.to_owned(),
        attr: name.clone(),
        kind,
    };
    let attr = match kind {
        KIND_FLOAT => Attr::Float(f.ok_or_else(bad)?),
        KIND_INT => Attr::Int(i.ok_or_else(bad)?),
        KIND_STRING => Attr::Str(s.ok_or_else(bad)?),
        KIND_TENSOR => Attr::Tensor(t.ok_or_else(bad)?),
        KIND_FLOATS => Attr::Floats(floats),
        KIND_INTS => Attr::Ints(ints),
        _ => return Err(bad()),
    };
    Ok((name, attr))
}

/// Reads a `TensorProto` (raw little-endian bytes or the typed repeated fields).
pub fn parse_tensor(buf: &[u8]) -> Result<(String, Tensor), ParseError> {
    let mut name = String::new();
    let mut dims = Vec::new();
    let mut code = 0;
    let mut raw: Option<&[u8]> = None;
    let mut floats = Vec::new();
    let mut ints = Vec::new();
    let mut external = false;
    for f in fields(buf)? {
        match f.number {
            TENSOR_DIMS => push_ints(buf, &f, &mut dims)?,
            TENSOR_DATA_TYPE => code = varint_value(buf, &f)? as i64,
            TENSOR_FLOAT_DATA => push_floats(buf, &f, &mut floats)?,
            TENSOR_INT32_DATA | TENSOR_INT64_DATA => push_ints(buf, &f, &mut ints)?,
            TENSOR_NAME if f.wire == WIRE_LEN => name = text(buf, &f),
            TENSOR_RAW_DATA if f.wire == WIRE_LEN => raw = Some(&buf[f.value.clone()]),
            TENSOR_DATA_LOCATION => external = varint_value(buf, &f)? == 1,
            _ => {}
        }
    }
    let bad = |reason: String| ParseError::BadTensor {
        name: name.clone(),
        reason,
    };
    if external {
        return Err(bad("data stored outside the file is not supported".into()));
    }
    if dims.iter().any(|&d| d < 0) {
        return Err(bad(format!("negative dimension in {dims:?}")));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("dimensions {dims:?} overflow")))?;
    let dtype = DType::from_onnx(code).ok_or_else(|| ParseError::DType {
        name: name.clone(),
        code,
    })?;
    let width = match code {
        6 => 4,
        _ => dtype.size(),
    };
    let data = if let Some(raw) = raw {
        if n.checked_mul(width) != Some(raw.len()) {
            return Err(bad(format!(
                "{} raw bytes for shape {shape:?} of {width}-byte elements",
                raw.len()
            )));
        }
        match (dtype, width) {
            (DType::F32, _) => Data::F32(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            (DType::I64, 4) => Data::I64(
                raw.chunks_exact(4)
                    .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect(),
            ),
            (DType::I64, _) => Data::I64(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            ),
            (DType::Bool, _) => Data::Bool(raw.iter().map(|&b| b != 0).collect()),
        }
    } else {
        let got = match dtype {
            DType::F32 => floats.len(),
            _ => ints.len(),
        };
        if got != n {
            return Err(bad(format!("{got} values for shape {shape:?}")));
        }
        match dtype {
            DType::F32 => Data::F32(floats),
            DType::I64 => Data::I64(ints),
            DType::Bool => Data::Bool(ints.iter().map(|&v| v != 0).collect()),
        }
    };
    debug_assert_eq!(numel(&shape), n);
    Ok((name, Tensor { shape, data }))
}

#[cfg(test)]
pub mod tests;
