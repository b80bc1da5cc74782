//! The CUDA backend: Piper voices compiled into engines and run on an NVIDIA GPU.
//!
//! Like TensorRT, in three parts: an offline *build* (parse the voice's ONNX graph, fold
//! constants, fuse elementwise chains, choose a precision per convolution, calibrate INT8,
//! compile the kernels with NVRTC for the exact GPU, write an engine file), a lean *runtime* (check
//! the engine against the GPU and the voice, upload the weights, run batches), and a *host
//! reference* that executes the same plan on the CPU so everything but the device code is tested
//! without a GPU. Module map: `onnx` (parser), `tensor`/`ops` (host kernels), `program` (the op program and
//! its passes), `quant` (INT8/FP16 maths), `reference` (host executor), `io` (batches in, speech
//! out); with the `cuda` feature, `device` (GPU discovery, device executor, engine build and load,
//! and [`device::build::GpuVoice`], the [`crate::tts::Backend`] behind `--backend cuda`).

#[cfg(feature = "cuda")]
pub mod device;
pub mod engine;
pub mod io;
pub mod onnx;
pub mod ops;
pub mod program;
pub mod quant;
pub mod reference;
pub mod tensor;
