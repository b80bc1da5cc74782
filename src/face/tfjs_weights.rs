//! TensorFlow.js weight files: a `*-weights_manifest.json` plus the `.bin` shards it names.
//!
//! Input: the manifest text and the concatenated shard bytes. Output: a name → [`Tensor`] map of
//! `f32` values in the manifest's row-major shape. Invariants: every tensor's value count equals
//! the product of its shape; the shards hold exactly the bytes the manifest describes, no more, no
//! less (a size mismatch means a wrong or damaged file and is reported, never padded or cut).
//! Quantised tensors (`uint8`/`uint16` with `{scale, min}`) are expanded with `v = q * scale + min`.

use std::collections::HashMap;

use serde::Deserialize;

/// A dense `f32` tensor in row-major order, as TensorFlow.js lays it out.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Why a manifest or its weights could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WeightsError {
    #[error("the weights manifest is not valid JSON of the TensorFlow.js form: {0}")]
    Manifest(String),
    #[error(
        "tensor `{name}` has unsupported dtype `{dtype}` (only float32, uint8 and uint16 are read)"
    )]
    Dtype { name: String, dtype: String },
    #[error("tensor `{name}` has a shape whose size overflows")]
    Shape { name: String },
    #[error("the manifest describes {expected} bytes of weights but the .bin files hold {actual}")]
    Size { expected: usize, actual: usize },
    #[error("tensor `{name}` appears twice in the manifest")]
    Duplicate { name: String },
    #[error("shard name `{name}` is not a plain file name beside the manifest")]
    ShardName { name: String },
    #[error("tensor `{name}` is missing (is this the manifest of a different model?)")]
    Missing { name: String },
    #[error("tensor `{name}` is not used by the network (is this a different model?)")]
    Unexpected { name: String },
    #[error("tensor `{name}` has shape {actual:?} but the network needs {expected:?}")]
    WrongShape {
        name: String,
        expected: Vec<usize>,
        actual: Vec<usize>,
    },
}

/// Removes tensor `name` from `map`, checking that its shape is `expected`.
pub fn take(
    map: &mut HashMap<String, Tensor>,
    name: &str,
    expected: &[usize],
) -> Result<Vec<f32>, WeightsError> {
    let tensor = map.remove(name).ok_or_else(|| WeightsError::Missing {
        name: name.to_owned(),
    })?;
    if tensor.shape != expected {
        return Err(WeightsError::WrongShape {
            name: name.to_owned(),
            expected: expected.to_vec(),
            actual: tensor.shape,
        });
    }
    Ok(tensor.data)
}

#[derive(Deserialize)]
struct Group {
    paths: Vec<String>,
    weights: Vec<Spec>,
}

#[derive(Deserialize)]
struct Spec {
    name: String,
    shape: Vec<usize>,
    dtype: String,
    quantization: Option<Quantization>,
}

#[derive(Deserialize)]
struct Quantization {
    dtype: String,
    scale: f64,
    min: f64,
}

/// The shard file names that a manifest lists, in the order their bytes are concatenated.
/// Names must be plain file names so that a manifest cannot point outside its own folder.
pub fn shard_paths(manifest_json: &str) -> Result<Vec<String>, WeightsError> {
    let groups = parse(manifest_json)?;
    let names: Vec<String> = groups.into_iter().flat_map(|g| g.paths).collect();
    if let Some(bad) = names.iter().find(|n| {
        n.is_empty() || n.contains(['/', '\\']) || n.as_str() == ".." || n.as_str() == "."
    }) {
        return Err(WeightsError::ShardName { name: bad.clone() });
    }
    Ok(names)
}

fn parse(manifest_json: &str) -> Result<Vec<Group>, WeightsError> {
    serde_json::from_str(manifest_json).map_err(|e| WeightsError::Manifest(e.to_string()))
}

/// Decodes every tensor of `manifest_json` from `bin`, the concatenation of all its shards.
pub fn decode(manifest_json: &str, bin: &[u8]) -> Result<HashMap<String, Tensor>, WeightsError> {
    let groups = parse(manifest_json)?;
    let specs: Vec<&Spec> = groups.iter().flat_map(|g| &g.weights).collect();
    let mut layout = Vec::with_capacity(specs.len());
    let mut expected = 0usize;
    for spec in &specs {
        let count = spec
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| WeightsError::Shape {
                name: spec.name.clone(),
            })?;
        let stored_dtype = spec
            .quantization
            .as_ref()
            .map_or(spec.dtype.as_str(), |q| q.dtype.as_str());
        let width = match (stored_dtype, spec.dtype.as_str()) {
            ("float32", "float32") => 4,
            ("uint16", "float32") => 2,
            ("uint8", "float32") => 1,
            _ => {
                return Err(WeightsError::Dtype {
                    name: spec.name.clone(),
                    dtype: stored_dtype.to_owned(),
                });
            }
        };
        let bytes = count
            .checked_mul(width)
            .ok_or_else(|| WeightsError::Shape {
                name: spec.name.clone(),
            })?;
        layout.push((expected, count, width));
        expected = expected
            .checked_add(bytes)
            .ok_or_else(|| WeightsError::Shape {
                name: spec.name.clone(),
            })?;
    }
    if expected != bin.len() {
        return Err(WeightsError::Size {
            expected,
            actual: bin.len(),
        });
    }
    let mut out = HashMap::with_capacity(specs.len());
    for (spec, (offset, count, width)) in specs.iter().zip(layout) {
        let raw = &bin[offset..offset + count * width];
        let data = match (&spec.quantization, width) {
            (Some(q), 1) => raw
                .iter()
                .map(|&b| (f64::from(b) * q.scale + q.min) as f32)
                .collect(),
            (Some(q), 2) => raw
                .chunks_exact(2)
                .map(|c| (f64::from(u16::from_le_bytes([c[0], c[1]])) * q.scale + q.min) as f32)
                .collect(),
            _ => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        };
        let tensor = Tensor {
            shape: spec.shape.clone(),
            data,
        };
        if out.insert(spec.name.clone(), tensor).is_some() {
            return Err(WeightsError::Duplicate {
                name: spec.name.clone(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"[{"paths":["m.bin"],"weights":[
        {"name":"a","shape":[2,2],"dtype":"float32","quantization":{"dtype":"uint8","scale":0.5,"min":-1.0}},
        {"name":"b","shape":[1],"dtype":"float32"},
        {"name":"c","shape":[2],"dtype":"float32","quantization":{"dtype":"uint16","scale":2.0,"min":1.0}}]}]"#;

    fn bin() -> Vec<u8> {
        let mut bin = vec![0u8, 1, 2, 4];
        bin.extend_from_slice(&1.5f32.to_le_bytes());
        bin.extend_from_slice(&3u16.to_le_bytes());
        bin.extend_from_slice(&256u16.to_le_bytes());
        bin
    }

    #[test]
    fn decodes_quantised_and_float_tensors() {
        let map = decode(MANIFEST, &bin()).unwrap();
        assert_eq!(map["a"].shape, vec![2, 2]);
        assert_eq!(map["a"].data, vec![-1.0, -0.5, 0.0, 1.0]);
        assert_eq!(map["b"].data, vec![1.5]);
        assert_eq!(map["c"].data, vec![7.0, 513.0]);
        assert_eq!(shard_paths(MANIFEST).unwrap(), vec!["m.bin".to_owned()]);
    }

    #[test]
    fn take_checks_presence_and_shape() {
        let mut map = decode(MANIFEST, &bin()).unwrap();
        assert_eq!(take(&mut map, "b", &[1]).unwrap(), vec![1.5]);
        assert!(matches!(
            take(&mut map, "b", &[1]),
            Err(WeightsError::Missing { .. })
        ));
        assert!(matches!(
            take(&mut map, "a", &[4]),
            Err(WeightsError::WrongShape { .. })
        ));
    }

    #[test]
    fn shard_names_must_stay_beside_the_manifest() {
        for bad in ["../x.bin", "a/b.bin", "", ".."] {
            let m = format!(r#"[{{"paths":["{bad}"],"weights":[]}}]"#);
            assert!(
                matches!(shard_paths(&m), Err(WeightsError::ShardName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_wrong_size() {
        let mut long = bin();
        long.push(0);
        assert_eq!(
            decode(MANIFEST, &long),
            Err(WeightsError::Size {
                expected: 12,
                actual: 13
            })
        );
        assert!(matches!(
            decode(MANIFEST, &bin()[..10]),
            Err(WeightsError::Size { .. })
        ));
    }

    #[test]
    fn rejects_bad_json_dtype_overflow_and_duplicates() {
        assert!(matches!(
            decode("{not json", &[]),
            Err(WeightsError::Manifest(_))
        ));
        assert!(matches!(
            decode(
                r#"[{"paths":[],"weights":[{"name":"x","shape":[1],"dtype":"int32"}]}]"#,
                &[0; 4]
            ),
            Err(WeightsError::Dtype { .. })
        ));
        let huge = format!(
            r#"[{{"paths":[],"weights":[{{"name":"x","shape":[{m},{m}],"dtype":"float32"}}]}}]"#,
            m = usize::MAX
        );
        assert!(matches!(
            decode(&huge, &[]),
            Err(WeightsError::Shape { .. })
        ));
        let dup = r#"[{"paths":[],"weights":[{"name":"x","shape":[1],"dtype":"float32"},{"name":"x","shape":[1],"dtype":"float32"}]}]"#;
        assert!(matches!(
            decode(dup, &[0; 8]),
            Err(WeightsError::Duplicate { .. })
        ));
    }
}
