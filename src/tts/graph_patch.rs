//! Exposes a Piper VITS graph's per-phoneme durations and per-item lengths as extra outputs.
//!
//! Input: the bytes of any Piper `.onnx` export. Output: the same model with two more graph outputs,
//! the `Ceil` tensor (duration frames per phoneme id, `[batch, 1, ids]`) and the `Cast` at the end of
//! `Ceil → ReduceSum → Clip → Cast` (frames per batch item, `[batch]`). Found by op type and wiring,
//! not by node name, so any Piper voice works.
//!
//! ONNX files are protobuf; only two messages need touching (the model's `graph` field and the graph's
//! repeated `output`), so the tiny wire-format walker in [`super::wire`] replaces a whole protobuf
//! stack: the graph message is re-emitted with the new outputs appended and its length prefix rewritten.

use super::wire::{WIRE_LEN, WireError, fields, strings, write_len_field, write_varint};

/// Names of the tensors added as outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlignmentOutputs {
    pub durations: String,
    pub lengths: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("the file is not a valid ONNX model ({0})")]
    Malformed(#[from] WireError),
    #[error("the model has no graph")]
    NoGraph,
    #[error(transparent)]
    Alignment(#[from] AlignmentError),
}

/// Why a graph's duration and length tensors were not found (the CPU voice's patch and the CUDA
/// engine's planner look for them the same way, through [`find_alignment`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum AlignmentError {
    #[error(
        "found {0} Ceil nodes where a Piper VITS graph has exactly one (the duration rounding); is this a Piper voice?"
    )]
    CeilCount(usize),
    #[error(
        "the Ceil output does not feed ReduceSum → Clip → Cast as in Piper's VITS export; is this a Piper voice?"
    )]
    NoLengths,
}

/// The ops the alignment search looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignmentOp {
    Ceil,
    ReduceSum,
    Clip,
    Cast,
}

/// A node of a graph as the alignment search sees it.
pub trait AlignmentNode {
    type Value: PartialEq + Copy;
    fn is(&self, op: AlignmentOp) -> bool;
    fn first_input(&self) -> Option<Self::Value>;
    fn first_output(&self) -> Option<Self::Value>;
}

/// The single `Ceil`'s output (duration frames per id) and the end of `Ceil → ReduceSum → Clip →
/// Cast` (frames per item), found by op and wiring, not by name, so any Piper voice works.
pub fn find_alignment<N: AlignmentNode>(
    nodes: &[N],
) -> Result<(N::Value, N::Value), AlignmentError> {
    let ceils: Vec<&N> = nodes.iter().filter(|n| n.is(AlignmentOp::Ceil)).collect();
    let [ceil] = ceils.as_slice() else {
        return Err(AlignmentError::CeilCount(ceils.len()));
    };
    let durations = ceil.first_output().ok_or(AlignmentError::NoLengths)?;
    let mut tensor = durations;
    for op in [AlignmentOp::ReduceSum, AlignmentOp::Clip, AlignmentOp::Cast] {
        tensor = nodes
            .iter()
            .find(|n| n.is(op) && n.first_input() == Some(tensor))
            .and_then(N::first_output)
            .ok_or(AlignmentError::NoLengths)?;
    }
    Ok((durations, tensor))
}

const MODEL_GRAPH: u64 = 7;
const GRAPH_NODE: u64 = 1;
const GRAPH_OUTPUT: u64 = 12;
const NODE_INPUT: u64 = 1;
const NODE_OUTPUT: u64 = 2;
const NODE_OP_TYPE: u64 = 4;
const VALUE_INFO_NAME: u64 = 1;

struct Node {
    op: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
}

/// Returns the patched model bytes and the names of the added outputs.
pub fn add_alignment_outputs(model: &[u8]) -> Result<(Vec<u8>, AlignmentOutputs), PatchError> {
    let top = fields(model)?;
    let graph = top
        .iter()
        .find(|f| f.number == MODEL_GRAPH && f.wire == WIRE_LEN)
        .ok_or(PatchError::NoGraph)?;
    let graph_bytes = &model[graph.value.clone()];
    let graph_fields = fields(graph_bytes)?;

    let mut nodes = Vec::new();
    let mut existing_outputs = Vec::new();
    for f in &graph_fields {
        let body = &graph_bytes[f.value.clone()];
        match (f.number, f.wire) {
            (GRAPH_NODE, WIRE_LEN) => {
                let op = strings(body, NODE_OP_TYPE)?.pop().unwrap_or_default();
                nodes.push(Node {
                    op,
                    inputs: strings(body, NODE_INPUT)?,
                    outputs: strings(body, NODE_OUTPUT)?,
                });
            }
            (GRAPH_OUTPUT, WIRE_LEN) => existing_outputs.extend(strings(body, VALUE_INFO_NAME)?),
            _ => {}
        }
    }
    let refs: Vec<&Node> = nodes.iter().collect();
    let (durations, lengths) = find_alignment(&refs)?;
    let names = AlignmentOutputs {
        durations: durations.to_owned(),
        lengths: lengths.to_owned(),
    };

    let mut extra = Vec::new();
    for name in [&names.durations, &names.lengths] {
        if existing_outputs.contains(name) {
            continue;
        }
        let mut value_info = Vec::new();
        write_len_field(&mut value_info, VALUE_INFO_NAME, name.as_bytes());
        write_len_field(&mut extra, GRAPH_OUTPUT, &value_info);
    }

    let mut out = Vec::with_capacity(model.len() + extra.len() + 8);
    out.extend_from_slice(&model[..graph.tag_start]);
    write_varint(&mut out, (MODEL_GRAPH << 3) | WIRE_LEN);
    write_varint(&mut out, (graph_bytes.len() + extra.len()) as u64);
    out.extend_from_slice(graph_bytes);
    out.extend_from_slice(&extra);
    out.extend_from_slice(&model[graph.value.end..]);
    Ok((out, names))
}

impl<'a> AlignmentNode for &'a Node {
    type Value = &'a str;
    fn is(&self, op: AlignmentOp) -> bool {
        self.op
            == match op {
                AlignmentOp::Ceil => "Ceil",
                AlignmentOp::ReduceSum => "ReduceSum",
                AlignmentOp::Clip => "Clip",
                AlignmentOp::Cast => "Cast",
            }
    }
    fn first_input(&self) -> Option<&'a str> {
        self.inputs.first().map(String::as_str)
    }
    fn first_output(&self) -> Option<&'a str> {
        self.outputs.first().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> Vec<u8> {
        let mut n = Vec::new();
        for i in inputs {
            write_len_field(&mut n, NODE_INPUT, i.as_bytes());
        }
        for o in outputs {
            write_len_field(&mut n, NODE_OUTPUT, o.as_bytes());
        }
        write_len_field(&mut n, NODE_OP_TYPE, op.as_bytes());
        n
    }

    fn model(nodes: &[Vec<u8>]) -> Vec<u8> {
        let mut graph = Vec::new();
        for n in nodes {
            write_len_field(&mut graph, GRAPH_NODE, n);
        }
        let mut vi = Vec::new();
        write_len_field(&mut vi, VALUE_INFO_NAME, b"output");
        write_len_field(&mut graph, GRAPH_OUTPUT, &vi);
        let mut m = Vec::new();
        write_varint(&mut m, 1 << 3); // ir_version
        write_varint(&mut m, 8);
        write_len_field(&mut m, MODEL_GRAPH, &graph);
        write_len_field(&mut m, 14, b"trailing field kept");
        m
    }

    fn piper_like() -> Vec<u8> {
        model(&[
            node("Mul", &["a", "b"], &["w"]),
            node("Ceil", &["w"], &["w_ceil"]),
            node("CumSum", &["w_ceil", "axis"], &["cum"]),
            node("ReduceSum", &["w_ceil", "axes"], &["sum"]),
            node("Clip", &["sum", "min", ""], &["clipped"]),
            node("Cast", &["clipped"], &["y_lengths"]),
        ])
    }

    fn outputs_of(model: &[u8]) -> Vec<String> {
        let top = fields(model).unwrap();
        let g = top.iter().find(|f| f.number == MODEL_GRAPH).unwrap();
        let gb = &model[g.value.clone()];
        fields(gb)
            .unwrap()
            .iter()
            .filter(|f| f.number == GRAPH_OUTPUT)
            .flat_map(|f| strings(&gb[f.value.clone()], VALUE_INFO_NAME).unwrap())
            .collect()
    }

    #[test]
    fn adds_both_outputs_and_keeps_the_rest() {
        let m = piper_like();
        let (patched, names) = add_alignment_outputs(&m).unwrap();
        assert_eq!(
            names,
            AlignmentOutputs {
                durations: "w_ceil".into(),
                lengths: "y_lengths".into()
            }
        );
        assert_eq!(outputs_of(&patched), ["output", "w_ceil", "y_lengths"]);
        let tail = fields(&patched)
            .unwrap()
            .into_iter()
            .find(|f| f.number == 14)
            .unwrap();
        assert_eq!(&patched[tail.value], b"trailing field kept");
    }

    #[test]
    fn patching_twice_adds_nothing_more() {
        let (once, _) = add_alignment_outputs(&piper_like()).unwrap();
        let (twice, _) = add_alignment_outputs(&once).unwrap();
        assert_eq!(outputs_of(&twice), outputs_of(&once));
    }

    #[test]
    fn no_ceil_is_refused() {
        let m = model(&[node("Mul", &["a"], &["b"])]);
        assert_eq!(
            add_alignment_outputs(&m).unwrap_err(),
            PatchError::Alignment(AlignmentError::CeilCount(0))
        );
    }

    #[test]
    fn two_ceils_are_refused() {
        let m = model(&[node("Ceil", &["a"], &["b"]), node("Ceil", &["b"], &["c"])]);
        assert_eq!(
            add_alignment_outputs(&m).unwrap_err(),
            PatchError::Alignment(AlignmentError::CeilCount(2))
        );
    }

    #[test]
    fn missing_length_chain_is_refused() {
        let m = model(&[
            node("Ceil", &["a"], &["b"]),
            node("ReduceSum", &["b"], &["c"]),
        ]);
        assert_eq!(
            add_alignment_outputs(&m).unwrap_err(),
            PatchError::Alignment(AlignmentError::NoLengths)
        );
    }

    #[test]
    fn truncated_and_empty_files_are_refused() {
        let m = piper_like();
        assert!(matches!(
            add_alignment_outputs(&m[..m.len() - 5]),
            Err(PatchError::Malformed(_))
        ));
        assert_eq!(add_alignment_outputs(&[]).unwrap_err(), PatchError::NoGraph);
        assert!(matches!(
            add_alignment_outputs(&[0xff; 12]),
            Err(PatchError::Malformed(_))
        ));
    }
}
