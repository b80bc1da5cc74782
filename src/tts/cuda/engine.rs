//! The engine file: a header that says what the engine was built for, the plan, the constants in
//! the form the device uses, and the GPU code compiled for the exact GPU.
//!
//! Layout (little-endian): `TALKENG1`, then four length-prefixed (u64) sections — header JSON,
//! plan JSON, constants (a binary table), kernels (a CUBIN) — then the sha256 of everything before
//! it. Invariants: a file that is truncated, altered or from another format version is refused by
//! [`EngineFile::read`]; an intact file built for another GPU, driver, voice, precision or talker
//! version is refused by [`Header::check`] with a message that says what differs and how to
//! rebuild. Constants of FP16 and INT8 convolutions are stored as 16- and 8-bit values; decoding
//! gives back exactly the plan's values (they were rounded or quantised before encoding).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use half::f16;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::program::op::{ConvPath, Op, Precision};
use super::program::precision::PrecisionCounts;
use super::program::{Inputs, Outputs, Plan, Step, Value, ValueId};
#[cfg(test)]
use super::tensor::DType;
use super::tensor::{Data, Tensor, numel};

pub const MAGIC: &[u8; 8] = b"TALKENG1";
/// 2: plans may store FP16 activations (`Value::half`), which a reader of format 1 would ignore.
/// 3: fused steps may read inputs through folded views (`Fused::views`), which a reader of format
/// 2 would ignore.
pub const FORMAT: u32 = 3;

/// The GPU an engine was built on and for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuIdentity {
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    /// CUDA driver version as the driver reports it (e.g. 13000).
    pub driver: i32,
}

impl GpuIdentity {
    /// File-name form of the GPU name: "NVIDIA H200" → "nvidia-h200".
    pub fn slug(&self) -> String {
        slug(&self.name)
    }
}

pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    pub talker_version: String,
    pub voice: String,
    /// sha256 of the voice's `.onnx`, hex.
    pub voice_sha256: String,
    pub precision: Precision,
    pub gpu: GpuIdentity,
    /// NVRTC that compiled the kernels (major, minor).
    pub nvrtc: (i32, i32),
    /// Phoneme-id length edges of the batch buckets, and the batch sizes warmed at load.
    pub buckets: Vec<usize>,
    pub warm_batches: Vec<usize>,
    pub sample_rate: u32,
    pub hop: u32,
    pub convs: PrecisionCounts,
    /// Names of the INT8 convolutions and their calibrated input ranges.
    pub int8_layers: Vec<(String, f32)>,
    pub calibration_sentences: usize,
    pub kernels: usize,
    /// The convolution path it was built for (`cudnn` when `TALKER_CUDA_CONV=cudnn` and cuDNN
    /// loaded); engines from before cuDNN read as `gemm`.
    #[serde(default)]
    pub conv: ConvPath,
    /// sha256 of the kernels' CUDA source: a talker whose kernel code differs rebuilds the engine
    /// rather than run the old code. Engines from before the field read as empty.
    #[serde(default)]
    pub kernels_sha256: String,
    /// Decoder activations stored as FP16 (`precision::half_activations`; 0 before them).
    #[serde(default)]
    pub fp16_activations: usize,
}

/// Why an engine cannot be used here.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("{path}: not a talker engine ({reason}); rebuild it with `talker engine build`")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "{path}: built for {built}, but this is {here}; rebuild it with `talker engine build --voice {voice} --precision {precision}`"
    )]
    Mismatch {
        path: PathBuf,
        built: String,
        here: String,
        voice: String,
        precision: String,
    },
}

/// What the running machine and request look like, to check a header against.
#[derive(Debug, Clone)]
pub struct Expect<'a> {
    pub gpu: &'a GpuIdentity,
    pub voice_sha256: &'a str,
    pub precision: Precision,
    /// NVRTC here (major, minor): kernels compiled by another NVRTC are rebuilt.
    pub nvrtc: (i32, i32),
    /// cuDNN here or not: an engine built for the other path is rebuilt.
    pub conv: ConvPath,
    /// sha256 of the kernel source this talker generates for the engine's plan.
    pub kernels_sha256: &'a str,
}

impl Header {
    pub fn check(&self, path: &Path, want: &Expect<'_>) -> Result<(), EngineError> {
        let mut built = Vec::new();
        let mut here = Vec::new();
        let mut differ = |what: &str, b: String, h: String| {
            if b != h {
                built.push(format!("{what} {b}"));
                here.push(format!("{what} {h}"));
            }
        };
        differ("GPU", self.gpu.name.clone(), want.gpu.name.clone());
        differ(
            "compute capability",
            format!("{}.{}", self.gpu.capability.0, self.gpu.capability.1),
            format!("{}.{}", want.gpu.capability.0, want.gpu.capability.1),
        );
        differ(
            "CUDA driver",
            self.gpu.driver.to_string(),
            want.gpu.driver.to_string(),
        );
        differ(
            "NVRTC",
            format!("{}.{}", self.nvrtc.0, self.nvrtc.1),
            format!("{}.{}", want.nvrtc.0, want.nvrtc.1),
        );
        differ(
            "voice sha256",
            short(&self.voice_sha256),
            short(want.voice_sha256),
        );
        differ(
            "precision",
            format!("{:?}", self.precision),
            format!("{:?}", want.precision),
        );
        differ(
            "convolutions",
            self.conv.name().to_owned(),
            want.conv.name().to_owned(),
        );
        differ(
            "kernel source",
            short(&self.kernels_sha256),
            short(want.kernels_sha256),
        );
        differ(
            "talker",
            self.talker_version.clone(),
            env!("CARGO_PKG_VERSION").to_owned(),
        );
        if built.is_empty() {
            return Ok(());
        }
        Err(EngineError::Mismatch {
            path: path.to_owned(),
            built: built.join(", "),
            here: here.join(", "),
            voice: self.voice.clone(),
            precision: precision_name(want.precision).to_owned(),
        })
    }
}

fn short(hex: &str) -> String {
    if hex.is_empty() {
        return "unrecorded".into();
    }
    hex.chars().take(12).collect()
}

pub fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "fp32",
        Precision::F16 => "fp16",
        Precision::I8 => "int8",
    }
}

/// `<dir>/<voice>-<sha12>-<gpu>-<precision>.engine`: one file per voice content, GPU model and
/// precision (the driver and NVRTC are checked in the header; a mismatch rebuilds in place).
pub fn engine_path(
    dir: &Path,
    voice: &str,
    voice_sha256: &str,
    gpu: &GpuIdentity,
    p: Precision,
) -> PathBuf {
    dir.join(format!(
        "{voice}-{}-{}-{}.engine",
        short(voice_sha256),
        gpu.slug(),
        precision_name(p)
    ))
}

/// The plan without its constants, as stored in the file.
#[derive(Serialize, Deserialize)]
struct PlanBody {
    values: Vec<Value>,
    steps: Vec<Step>,
    inputs: Inputs,
    outputs: Outputs,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineFile {
    pub header: Header,
    pub plan: Plan,
    pub cubin: Vec<u8>,
}

/// How a constant is stored: its own type, or the reduced form of a conv weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    F32 = 0,
    I64 = 1,
    Bool = 2,
    F16 = 3,
    I8 = 4,
}

/// Precision of the weights of every FP16/INT8 convolution, by weight value.
fn weight_precisions(plan: &Plan) -> HashMap<ValueId, Precision> {
    let mut m = HashMap::new();
    for s in &plan.steps {
        if let (Op::Conv(c) | Op::ConvTranspose(c), Some(Some(w))) = (&s.op, s.inputs.get(1))
            && c.precision != Precision::F32
        {
            m.insert(*w, c.precision);
        }
    }
    m
}

fn encode_constants(plan: &Plan) -> Vec<u8> {
    let reduced = weight_precisions(plan);
    let mut ids: Vec<&ValueId> = plan.constants.keys().collect();
    ids.sort();
    let mut out = Vec::new();
    out.extend((ids.len() as u64).to_le_bytes());
    for id in ids {
        let t = &plan.constants[id];
        let (enc, bytes): (Encoding, Vec<u8>) = match (&t.data, reduced.get(id)) {
            (Data::F32(v), Some(Precision::F16)) => (
                Encoding::F16,
                v.iter()
                    .flat_map(|x| f16::from_f32(*x).to_bits().to_le_bytes())
                    .collect(),
            ),
            (Data::F32(v), Some(Precision::I8)) => {
                (Encoding::I8, v.iter().map(|x| *x as i8 as u8).collect())
            }
            (Data::F32(v), _) => (
                Encoding::F32,
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            (Data::I64(v), _) => (
                Encoding::I64,
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            (Data::Bool(v), _) => (Encoding::Bool, v.iter().map(|&b| u8::from(b)).collect()),
        };
        out.extend((*id as u64).to_le_bytes());
        out.push(enc as u8);
        out.push(t.shape.len() as u8);
        for d in &t.shape {
            out.extend((*d as u64).to_le_bytes());
        }
        out.extend((bytes.len() as u64).to_le_bytes());
        out.extend(bytes);
    }
    out
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("truncated")?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn len(&mut self) -> Result<usize, String> {
        usize::try_from(self.u64()?).map_err(|_| "length overflow".to_owned())
    }

    fn section(&mut self) -> Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n)
    }
}

fn decode_constants(buf: &[u8]) -> Result<HashMap<ValueId, Tensor>, String> {
    let mut r = Reader { buf, at: 0 };
    let n = r.len()?;
    let mut out = HashMap::new();
    for _ in 0..n.min(buf.len()) {
        let id = r.len()?;
        let head = r.take(2)?;
        let (enc, rank) = (head[0], head[1] as usize);
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(r.len()?);
        }
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or("shape overflow")?;
        let bytes = r.section()?;
        let width = [4usize, 8, 1, 2, 1]
            .get(enc as usize)
            .copied()
            .ok_or("unknown encoding")?;
        if count.checked_mul(width) != Some(bytes.len()) {
            return Err(format!(
                "constant {id}: {} bytes for shape {shape:?}",
                bytes.len()
            ));
        }
        let data = match enc {
            0 => Data::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                    .collect(),
            ),
            1 => Data::I64(
                bytes
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8")))
                    .collect(),
            ),
            2 => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
            3 => Data::F32(
                bytes
                    .chunks_exact(2)
                    .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                    .collect(),
            ),
            _ => Data::F32(bytes.iter().map(|&b| f32::from(b as i8)).collect()),
        };
        debug_assert_eq!(numel(&shape), count);
        out.insert(id, Tensor { shape, data });
    }
    if r.at != buf.len() || out.len() != n {
        return Err("constant table has trailing or missing entries".into());
    }
    Ok(out)
}

impl EngineFile {
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let header = serde_json::to_vec_pretty(&self.header).map_err(|e| e.to_string())?;
        let body = PlanBody {
            values: self.plan.values.clone(),
            steps: self.plan.steps.clone(),
            inputs: self.plan.inputs,
            outputs: self.plan.outputs,
        };
        let plan = serde_json::to_vec(&body).map_err(|e| format!("plan: {e}"))?;
        let mut out = Vec::from(&MAGIC[..]);
        for section in [
            header,
            plan,
            encode_constants(&self.plan),
            self.cubin.clone(),
        ] {
            out.extend((section.len() as u64).to_le_bytes());
            out.extend(section);
        }
        let digest = Sha256::digest(&out);
        out.extend(digest);
        Ok(out)
    }

    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<EngineFile, EngineError> {
        let bad = |reason: String| EngineError::Corrupt {
            path: path.to_owned(),
            reason,
        };
        if bytes.len() < MAGIC.len() + 32 || &bytes[..8] != MAGIC {
            return Err(bad("wrong magic number".into()));
        }
        let (body, digest) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(body).as_slice() != digest {
            return Err(bad(
                "checksum mismatch: the file is damaged or truncated".into()
            ));
        }
        let mut r = Reader { buf: body, at: 8 };
        let mut section = || r.section().map_err(&bad);
        let (h, p, c, k) = (section()?, section()?, section()?, section()?);
        let header: Header = serde_json::from_slice(h).map_err(|e| bad(format!("header: {e}")))?;
        if header.format != FORMAT {
            return Err(bad(format!(
                "format {} (this talker reads {FORMAT})",
                header.format
            )));
        }
        let body: PlanBody = serde_json::from_slice(p).map_err(|e| bad(format!("plan: {e}")))?;
        let constants = decode_constants(c).map_err(|e| bad(format!("constants: {e}")))?;
        let plan = Plan {
            values: body.values,
            constants,
            steps: body.steps,
            inputs: body.inputs,
            outputs: body.outputs,
        };
        plan.validate().map_err(|e| bad(format!("plan: {e}")))?;
        Ok(EngineFile {
            header,
            plan,
            cubin: k.to_vec(),
        })
    }

    pub fn read(path: &Path) -> Result<EngineFile, EngineError> {
        let bytes = std::fs::read(path).map_err(|e| EngineError::Corrupt {
            path: path.to_owned(),
            reason: format!("cannot read it: {e}"),
        })?;
        Self::from_bytes(&bytes, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::cuda::program::op::{Binary, ConvSpec};

    fn gpu() -> GpuIdentity {
        GpuIdentity {
            name: "NVIDIA H200".into(),
            capability: (9, 0),
            driver: 13000,
        }
    }

    fn header() -> Header {
        Header {
            format: FORMAT,
            talker_version: env!("CARGO_PKG_VERSION").into(),
            voice: "en_US-joe-medium".into(),
            voice_sha256: "ab".repeat(32),
            precision: Precision::F16,
            gpu: gpu(),
            nvrtc: (13, 0),
            buckets: vec![48, 96],
            warm_batches: vec![1, 8],
            sample_rate: 22050,
            hop: 256,
            convs: PrecisionCounts {
                f32: 1,
                f16: 1,
                i8: 0,
            },
            int8_layers: vec![],
            calibration_sentences: 0,
            kernels: 3,
            conv: ConvPath::Cudnn,
            kernels_sha256: "cd".repeat(32),
            fp16_activations: 1,
        }
    }

    /// x → conv(FP16 weights) → + int8-ish second conv weights, plus an int and a bool constant.
    fn plan() -> Plan {
        let v = |name: &str, dtype| Value {
            name: name.into(),
            dtype,
            half: false,
        };
        let spec = |p| ConvSpec {
            precision: p,
            input_amax: (p == Precision::I8).then_some(2.0),
            weight_scales: (p == Precision::I8).then(|| vec![0.5, 0.25]),
            ..ConvSpec::plain(1, 1, 1, 0, 1)
        };
        let mut constants = HashMap::new();
        constants.insert(
            3,
            Tensor::f32(vec![2, 2, 1], vec![0.5, 0.25, 1.0 / 3.0, -2.0]),
        );
        constants.insert(4, Tensor::f32(vec![2, 2, 1], vec![127.0, -127.0, 3.0, 0.0]));
        constants.insert(5, Tensor::i64(vec![2], vec![-1, 7]));
        constants.insert(6, Tensor::bool(vec![1], vec![true]));
        crate::tts::cuda::quant::round_to_f16(match &mut constants.get_mut(&3).unwrap().data {
            Data::F32(v) => v,
            _ => unreachable!(),
        });
        Plan {
            values: vec![
                v("input", DType::I64),
                v("input_lengths", DType::I64),
                v("scales", DType::F32),
                v("w16", DType::F32),
                v("w8", DType::F32),
                v("ints", DType::I64),
                v("flag", DType::Bool),
                v("a", DType::F32),
                v("b", DType::F32),
            ],
            constants,
            steps: vec![
                Step {
                    name: "c16".into(),
                    op: Op::Conv(spec(Precision::F16)),
                    inputs: vec![Some(2), Some(3)],
                    outputs: vec![7],
                },
                Step {
                    name: "c8".into(),
                    op: Op::Conv(spec(Precision::I8)),
                    inputs: vec![Some(7), Some(4)],
                    outputs: vec![8],
                },
                Step {
                    name: "add".into(),
                    op: Op::Binary(Binary::Add),
                    inputs: vec![Some(8), Some(5)],
                    outputs: vec![1],
                },
            ],
            inputs: Inputs {
                ids: 0,
                lengths: 1,
                scales: 2,
                speaker: None,
            },
            outputs: Outputs {
                audio: 8,
                durations: 7,
                frames: 6,
            },
        }
    }

    fn file() -> EngineFile {
        EngineFile {
            header: header(),
            plan: plan(),
            cubin: vec![1, 2, 3, 4],
        }
    }

    #[test]
    fn round_trip_is_exact_and_weights_shrink() {
        let f = file();
        let bytes = f.to_bytes().unwrap();
        let back = EngineFile::from_bytes(&bytes, Path::new("x.engine")).unwrap();
        assert_eq!(back, f);
        // 4 FP16 weights take 8 bytes and 4 INT8 weights 4, not 16 each.
        let as_f32 = Plan {
            steps: vec![],
            ..plan()
        };
        assert_eq!(
            encode_constants(&as_f32).len() - encode_constants(&plan()).len(),
            8 + 12
        );
    }

    #[test]
    fn damaged_files_are_refused() {
        let bytes = file().to_bytes().unwrap();
        let p = Path::new("e.engine");
        let msg = |b: &[u8]| EngineFile::from_bytes(b, p).unwrap_err().to_string();
        assert!(msg(&bytes[..bytes.len() - 1]).contains("checksum"));
        assert!(msg(b"nope").contains("magic"));
        let mut flipped = bytes.clone();
        flipped[40] ^= 1;
        assert!(msg(&flipped).contains("checksum"));
        // A well-formed file of another format version.
        let mut other = file();
        other.header.format = 99;
        assert!(msg(&other.to_bytes().unwrap()).contains("format 99"));
        assert!(
            EngineFile::read(Path::new("/nonexistent/e.engine"))
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
    }

    #[test]
    fn constant_tables_are_checked() {
        let mut t = encode_constants(&plan());
        assert!(decode_constants(&t).is_ok());
        t.push(0);
        assert!(decode_constants(&t).is_err());
        assert!(decode_constants(&[1, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn header_checks_name_what_differs() {
        let h = header();
        let p = Path::new("v.engine");
        let sha = "ab".repeat(32);
        let want = Expect {
            gpu: &gpu(),
            voice_sha256: &sha,
            precision: Precision::F16,
            nvrtc: (13, 0),
            conv: ConvPath::Cudnn,
            kernels_sha256: &"cd".repeat(32),
        };
        assert!(h.check(p, &want).is_ok());
        let e = h
            .check(
                p,
                &Expect {
                    conv: ConvPath::Gemm,
                    ..want.clone()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("convolutions cudnn") && e.contains("this is convolutions gemm"),
            "{e}"
        );
        // A header written before the field existed reads as the GEMM path.
        let mut old = serde_json::to_value(&h).unwrap();
        old.as_object_mut().unwrap().remove("conv");
        let old: Header = serde_json::from_value(old).unwrap();
        assert_eq!(old.conv, ConvPath::Gemm);
        // Kernel code that changed since the build, or was never recorded, means a rebuild.
        let newer = "ef".repeat(32);
        let e = h
            .check(
                p,
                &Expect {
                    kernels_sha256: &newer,
                    ..want.clone()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("kernel source cdcdcdcdcdcd") && e.contains("kernel source efefefefefef"),
            "{e}"
        );
        let mut unrecorded = serde_json::to_value(&h).unwrap();
        unrecorded.as_object_mut().unwrap().remove("kernels_sha256");
        let unrecorded: Header = serde_json::from_value(unrecorded).unwrap();
        let e = unrecorded.check(p, &want).unwrap_err().to_string();
        assert!(e.contains("kernel source unrecorded"), "{e}");
        let other = GpuIdentity {
            name: "NVIDIA A100".into(),
            capability: (8, 0),
            driver: 12040,
        };
        let e = h
            .check(
                p,
                &Expect {
                    gpu: &other,
                    ..want.clone()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GPU NVIDIA H200") && e.contains("GPU NVIDIA A100"),
            "{e}"
        );
        assert!(
            e.contains("compute capability 9.0") && e.contains("CUDA driver 12040"),
            "{e}"
        );
        assert!(
            e.contains("talker engine build --voice en_US-joe-medium --precision fp16"),
            "{e}"
        );
        let e = h
            .check(
                p,
                &Expect {
                    nvrtc: (13, 1),
                    ..want.clone()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("NVRTC 13.0") && e.contains("NVRTC 13.1"), "{e}");
        let sha2 = "cd".repeat(32);
        let e = h
            .check(
                p,
                &Expect {
                    voice_sha256: &sha2,
                    ..want.clone()
                },
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("voice sha256 abababababab"), "{e}");
        let e = h
            .check(
                p,
                &Expect {
                    precision: Precision::I8,
                    ..want
                },
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("precision F16") && e.contains("--precision int8"),
            "{e}"
        );
    }

    #[test]
    fn names_and_paths() {
        assert_eq!(slug("NVIDIA H200 NVL"), "nvidia-h200-nvl");
        assert_eq!(slug("  Tesla (T4) "), "tesla-t4");
        let p = engine_path(
            Path::new("engines"),
            "en_US-joe-medium",
            &"ab".repeat(32),
            &gpu(),
            Precision::I8,
        );
        assert_eq!(
            p,
            Path::new("engines/en_US-joe-medium-abababababab-nvidia-h200-int8.engine")
        );
    }
}
