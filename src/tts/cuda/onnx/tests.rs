//! Parser tests on hand-built protobuf messages (the real voice is covered by the plan tests).

use super::*;
use crate::tts::wire::{WIRE_I32, write_len_field, write_varint};

pub fn varint_field(out: &mut Vec<u8>, number: u64, v: u64) {
    write_varint(out, number << 3);
    write_varint(out, v);
}

pub fn tensor_f32(name: &str, dims: &[i64], values: &[f32], raw: bool) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in dims {
        varint_field(&mut t, TENSOR_DIMS, d as u64);
    }
    varint_field(&mut t, TENSOR_DATA_TYPE, 1);
    write_len_field(&mut t, TENSOR_NAME, name.as_bytes());
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_len_field(
        &mut t,
        if raw {
            TENSOR_RAW_DATA
        } else {
            TENSOR_FLOAT_DATA
        },
        &bytes,
    );
    t
}

pub fn attr_int(name: &str, v: i64) -> Vec<u8> {
    let mut a = Vec::new();
    write_len_field(&mut a, ATTR_NAME, name.as_bytes());
    varint_field(&mut a, ATTR_I, v as u64);
    varint_field(&mut a, ATTR_TYPE, KIND_INT as u64);
    a
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut n = Vec::new();
    for i in inputs {
        write_len_field(&mut n, NODE_INPUT, i.as_bytes());
    }
    for o in outputs {
        write_len_field(&mut n, NODE_OUTPUT, o.as_bytes());
    }
    write_len_field(&mut n, NODE_NAME, format!("/{op}").as_bytes());
    write_len_field(&mut n, NODE_OP_TYPE, op.as_bytes());
    for a in attrs {
        write_len_field(&mut n, NODE_ATTRIBUTE, a);
    }
    n
}

pub fn value_info(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    write_len_field(&mut v, VALUE_INFO_NAME, name.as_bytes());
    v
}

pub fn model(nodes: &[Vec<u8>], inits: &[Vec<u8>], inputs: &[&str], outputs: &[&str]) -> Vec<u8> {
    let mut g = Vec::new();
    for n in nodes {
        write_len_field(&mut g, GRAPH_NODE, n);
    }
    for t in inits {
        write_len_field(&mut g, GRAPH_INITIALIZER, t);
    }
    for i in inputs {
        write_len_field(&mut g, GRAPH_INPUT, &value_info(i));
    }
    for o in outputs {
        write_len_field(&mut g, GRAPH_OUTPUT, &value_info(o));
    }
    let mut opset = Vec::new();
    varint_field(&mut opset, OPSET_VERSION, 15);
    let mut m = Vec::new();
    varint_field(&mut m, 1, 8);
    write_len_field(&mut m, MODEL_OPSET, &opset);
    write_len_field(&mut m, MODEL_GRAPH, &g);
    m
}

#[test]
fn reads_nodes_attributes_and_initializers() {
    let mut floats = Vec::new();
    write_len_field(&mut floats, ATTR_NAME, b"fs");
    write_varint(&mut floats, (ATTR_FLOATS << 3) | WIRE_I32);
    floats.extend_from_slice(&2.5f32.to_le_bytes());
    varint_field(&mut floats, ATTR_TYPE, KIND_FLOATS as u64);
    let mut alpha = Vec::new();
    write_len_field(&mut alpha, ATTR_NAME, b"alpha");
    write_varint(&mut alpha, (ATTR_F << 3) | WIRE_I32);
    alpha.extend_from_slice(&0.1f32.to_le_bytes());
    varint_field(&mut alpha, ATTR_TYPE, KIND_FLOAT as u64);
    let m = model(
        &[node(
            "LeakyRelu",
            &["x"],
            &["y"],
            &[alpha, floats, attr_int("axis", -1)],
        )],
        &[
            tensor_f32("w", &[2], &[1.0, 2.0], true),
            tensor_f32("v", &[1], &[3.0], false),
        ],
        &["x", "w"],
        &["y"],
    );
    let parsed = Model::parse(&m).unwrap();
    assert_eq!(parsed.opset, 15);
    let g = &parsed.graph;
    assert_eq!(
        g.inputs,
        ["x"],
        "initializers listed as inputs are not runtime inputs"
    );
    assert_eq!(g.outputs, ["y"]);
    let n = &g.nodes[0];
    assert_eq!(
        (n.op.as_str(), n.name.as_str()),
        ("LeakyRelu", "/LeakyRelu")
    );
    assert_eq!(n.float("alpha"), Some(0.1));
    assert_eq!(n.int("axis"), Some(-1));
    assert_eq!(n.attr("fs"), Some(&Attr::Floats(vec![2.5])));
    assert_eq!(g.initializers[0].1.as_f32().unwrap(), [1.0, 2.0]);
    assert_eq!(g.initializers[1].1.as_f32().unwrap(), [3.0]);
}

#[test]
fn int32_constants_widen_to_int64() {
    let mut t = Vec::new();
    varint_field(&mut t, TENSOR_DATA_TYPE, 6);
    write_len_field(&mut t, TENSOR_RAW_DATA, &(-1i32).to_le_bytes());
    let (_, tensor) = parse_tensor(&t).unwrap();
    assert_eq!(tensor.as_i64().unwrap(), [-1]);
}

#[test]
fn bad_models_are_refused_with_names() {
    assert_eq!(Model::parse(&[]).unwrap_err(), ParseError::NoGraph);
    assert!(matches!(Model::parse(&[0x3a, 9]), Err(ParseError::Wire(_))));

    let mut t = Vec::new();
    varint_field(&mut t, TENSOR_DATA_TYPE, 10);
    write_len_field(&mut t, TENSOR_NAME, b"half");
    assert_eq!(
        parse_tensor(&t).unwrap_err(),
        ParseError::DType {
            name: "half".into(),
            code: 10
        }
    );

    let short = tensor_f32("w", &[3], &[1.0, 2.0], true);
    assert!(matches!(
        parse_tensor(&short),
        Err(ParseError::BadTensor { .. })
    ));
    let short_typed = tensor_f32("w", &[3], &[1.0], false);
    assert!(matches!(
        parse_tensor(&short_typed),
        Err(ParseError::BadTensor { .. })
    ));

    let mut ext = tensor_f32("e", &[1], &[1.0], true);
    varint_field(&mut ext, TENSOR_DATA_LOCATION, 1);
    assert!(
        parse_tensor(&ext)
            .unwrap_err()
            .to_string()
            .contains("outside the file")
    );

    let mut neg = Vec::new();
    varint_field(&mut neg, TENSOR_DIMS, (-2i64) as u64);
    varint_field(&mut neg, TENSOR_DATA_TYPE, 1);
    assert!(matches!(
        parse_tensor(&neg),
        Err(ParseError::BadTensor { .. })
    ));

    let mut graph_attr = Vec::new();
    write_len_field(&mut graph_attr, ATTR_NAME, b"body");
    varint_field(&mut graph_attr, ATTR_TYPE, 5);
    let m = model(
        &[node("Loop", &[], &["y"], &[graph_attr])],
        &[],
        &[],
        &["y"],
    );
    assert!(matches!(
        Model::parse(&m),
        Err(ParseError::Attribute { kind: 5, .. })
    ));
}
