//! The CUDA side: finding a usable GPU, device memory, kernel launches, cuBLAS, and the executor
//! that runs a plan on the device.
//!
//! Every CUDA library is loaded at run time (cudarc `dynamic-loading`), so the binary runs on
//! machines without CUDA; [`Gpu::open`] checks that the driver, NVRTC and cuBLAS libraries are
//! present *before* touching them (a missing driver would make cudarc panic) and returns
//! [`GpuError::Unavailable`] with the reason instead.

pub mod build;
pub mod check;
pub mod exec;
pub mod kernels;
pub mod memory;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream, DriverError};

use super::engine::GpuIdentity;
use super::program::op::ConvPath;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no usable GPU: {0}")]
    Unavailable(String),
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("cuBLAS: {0}")]
    Blas(#[from] cudarc::cublas::result::CublasError),
    #[error("cuDNN: {0:?}")]
    Dnn(#[from] cudarc::cudnn::result::CudnnError),
    #[error("NVRTC could not compile the engine's kernels: {0}")]
    Compile(String),
    #[error("step {index} ({op} {name:?}): {msg}")]
    Step {
        index: usize,
        op: &'static str,
        name: String,
        msg: String,
    },
    #[error(transparent)]
    Engine(#[from] super::engine::EngineError),
    /// A host↔device copy was asked for while a CUDA graph was being captured (the capture is
    /// abandoned and the step runs eagerly; never reaches a caller).
    #[error("a host-device copy inside a CUDA graph capture")]
    CaptureBreak,
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Other(String),
}

/// Which CUDA libraries this machine has, without loading any of them into use.
pub fn libraries_present() -> Result<(), GpuError> {
    static DRIVER: OnceLock<bool> = OnceLock::new();
    static NVRTC: OnceLock<bool> = OnceLock::new();
    static BLAS: OnceLock<bool> = OnceLock::new();
    let (driver, nvrtc, blas) = (
        kept_loaded(&["cuda", "nvcuda"], &DRIVER),
        kept_loaded(&["nvrtc"], &NVRTC),
        kept_loaded(&["cublas"], &BLAS),
    );
    let missing: Vec<&str> = [
        (driver, "the CUDA driver (libcuda)"),
        (nvrtc, "NVRTC (libnvrtc)"),
        (blas, "cuBLAS (libcublas)"),
    ]
    .iter()
    .filter(|(ok, _)| !ok)
    .map(|(_, n)| *n)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(GpuError::Unavailable(format!(
            "{} not found",
            missing.join(", ")
        )))
    }
}

/// Whether one of `names` loads, by cudarc's candidate file names; one that does stays loaded
/// for the process. cudarc's own check unloads it again, so every later check, and cudarc's
/// first real use, mapped and relocated the library once more (cuBLAS brings cuBLASLt, hundreds
/// of MB).
fn kept_loaded(names: &[&str], found: &OnceLock<bool>) -> bool {
    *found.get_or_init(|| {
        names
            .iter()
            .flat_map(|n| cudarc::get_lib_name_candidates(n))
            // SAFETY: loading runs the library's initialisers, as cudarc's own load does; these
            // are the CUDA libraries cudarc will call into.
            .find_map(|file| unsafe { libloading::Library::new(file) }.ok())
            // Never unloaded: the process keeps using it through cudarc, which opens it again.
            .map(std::mem::forget)
            .is_some()
    })
}

/// The first GPU's identity, read through the driver without creating a context: what
/// `--backend auto` decides by, and what the phrase cache and engine keys name.
pub fn probe() -> Result<GpuIdentity, GpuError> {
    use cudarc::driver::sys::CUdevice_attribute as Attr;
    libraries_present()?;
    cudarc::driver::result::init()
        .map_err(|e| GpuError::Unavailable(format!("the CUDA driver does not start: {e}")))?;
    let count = cudarc::driver::result::device::get_count()?;
    if count < 1 {
        return Err(GpuError::Unavailable(
            "the CUDA driver sees no GPU".to_owned(),
        ));
    }
    let dev = cudarc::driver::result::device::get(0)?;
    let name = cudarc::driver::result::device::get_name(dev)?;
    // SAFETY: plain attribute queries on a device handle the driver just returned.
    let capability = unsafe {
        (
            cudarc::driver::result::device::get_attribute(
                dev,
                Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            )?,
            cudarc::driver::result::device::get_attribute(
                dev,
                Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            )?,
        )
    };
    let mut driver = 0;
    // SAFETY: plain query into a local.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver).result()? };
    Ok(GpuIdentity {
        name,
        capability,
        driver,
    })
}

/// The oldest cuDNN whose legacy convolution API the bindings (cuDNN 9.2) match.
const CUDNN_MIN_VERSION: usize = 90000;

/// How `$TALKER_CUDA_CONV` asks convolutions to run: unset, `auto` or `gemm` as the engine's own
/// im2col + cuBLAS GEMMs (the default: faster on the H200, see docs/gpu.md); `cudnn` through
/// cuDNN where it loads.
pub fn conv_from_env() -> Result<ConvPath, String> {
    parse_conv(std::env::var("TALKER_CUDA_CONV").ok().as_deref())
}

fn parse_conv(v: Option<&str>) -> Result<ConvPath, String> {
    match v {
        None | Some("" | "auto" | "gemm") => Ok(ConvPath::Gemm),
        Some("cudnn") => Ok(ConvPath::Cudnn),
        Some(other) => Err(format!("TALKER_CUDA_CONV={other}: use auto, cudnn or gemm")),
    }
}

/// A cuDNN handle on `stream`, or why there is none (cuDNN 9 missing or older).
fn open_dnn(
    stream: &CudaStream,
) -> Result<Result<cudarc::cudnn::sys::cudnnHandle_t, String>, GpuError> {
    // SAFETY: only tries to dlopen the library and reports whether that worked.
    let present = unsafe { cudarc::cudnn::sys::is_culib_present() };
    let version = if present {
        cudarc::cudnn::result::get_version()
    } else {
        0
    };
    if version < CUDNN_MIN_VERSION {
        return Ok(Err(if present {
            format!("cuDNN {version} is older than 9")
        } else {
            "cuDNN (libcudnn.so.9) not found".to_owned()
        }));
    }
    let dnn = cudarc::cudnn::result::create_handle()?;
    // SAFETY: the handle was just created; the stream outlives it (both live in `Gpu`).
    unsafe { cudarc::cudnn::result::set_stream(dnn, stream.cu_stream() as _)? };
    Ok(Ok(dnn))
}

/// Freed buffers stay in the stream-ordered pool rather than going back to the driver at every
/// synchronisation (the pool's default threshold is 0): each call of a batch then reuses memory
/// already mapped instead of mapping its buffers again. The pool holds at most the engine's
/// peak, as PyTorch's caching allocator does.
fn keep_freed_memory(ctx: &CudaContext) -> Result<(), GpuError> {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold = u64::MAX;
    // SAFETY: the device is the context's; the attribute takes a u64 that lives across the call.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result()?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()?;
    }
    Ok(())
}

/// Makes the first GPU's primary context on a thread of its own and keeps it for the process:
/// the engine's load, which comes after the render has read its script and hashed its voice,
/// then finds it made (about 0.12 s on the H200 that the first sentence waited for).
pub fn make_context_early() -> std::thread::JoinHandle<()> {
    static EARLY: OnceLock<Option<Arc<CudaContext>>> = OnceLock::new();
    std::thread::spawn(|| {
        EARLY.get_or_init(|| CudaContext::new(0).ok());
    })
}

/// The seconds each step of a load took, logged as one debug line (`-vv`): where the first
/// sentence's wait goes.
pub(crate) struct Steps {
    at: Instant,
    taken: Vec<(&'static str, Duration)>,
}

impl Steps {
    pub(crate) fn start() -> Steps {
        Steps {
            at: Instant::now(),
            taken: Vec::new(),
        }
    }

    /// Ends `step` now.
    pub(crate) fn done(&mut self, step: &'static str) {
        let now = Instant::now();
        self.taken.push((step, now - self.at));
        self.at = now;
    }

    pub(crate) fn log(&self, what: &str) {
        let total: Duration = self.taken.iter().map(|(_, d)| *d).sum();
        let parts: Vec<String> = self
            .taken
            .iter()
            .map(|(s, d)| format!("{s} {:.3}", d.as_secs_f64()))
            .collect();
        tracing::debug!(
            "{what} in {:.3} s ({})",
            total.as_secs_f64(),
            parts.join(", ")
        );
    }
}

/// An open GPU: context, the one stream everything runs on, and cuBLAS (and, where present,
/// cuDNN) handles bound to it.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub blas: cudarc::cublas::sys::cublasHandle_t,
    /// Loaded only when asked for (`TALKER_CUDA_CONV=cudnn`, or the bench's A/B): creating it
    /// loads cuDNN's engine libraries, hundreds of MB.
    pub dnn: Option<cudarc::cudnn::sys::cudnnHandle_t>,
    /// The convolution path engines are built for and run on here.
    conv: ConvPath,
    pub identity: GpuIdentity,
}

impl Gpu {
    pub fn open(ordinal: usize) -> Result<Gpu, GpuError> {
        let mut steps = Steps::start();
        libraries_present()?;
        steps.done("libraries");
        cudarc::driver::result::init()
            .map_err(|e| GpuError::Unavailable(format!("the CUDA driver does not start: {e}")))?;
        let count = cudarc::driver::result::device::get_count()?;
        if count as usize <= ordinal {
            return Err(GpuError::Unavailable(format!(
                "{count} CUDA device(s), none with ordinal {ordinal}"
            )));
        }
        steps.done("driver");
        let ctx = CudaContext::new(ordinal)?;
        keep_freed_memory(&ctx)?;
        // A stream of our own: the legacy default stream cannot be captured into a CUDA graph.
        let stream = ctx.new_stream()?;
        steps.done("context");
        let blas = cudarc::cublas::result::create_handle()?;
        // SAFETY: the handle was just created; the stream outlives it (both live in `Gpu`).
        unsafe { cudarc::cublas::result::set_stream(blas, stream.cu_stream() as _)? };
        steps.done("cublas");
        let dnn = match conv_from_env().map_err(GpuError::BadInput)? {
            ConvPath::Gemm => None,
            ConvPath::Cudnn => match open_dnn(&stream)? {
                Ok(d) => Some(d),
                Err(why) => {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        tracing::info!(
                            "TALKER_CUDA_CONV=cudnn, but {why}: convolutions run as im2col + cuBLAS GEMMs"
                        );
                    });
                    None
                }
            },
        };
        let conv = if dnn.is_some() {
            ConvPath::Cudnn
        } else {
            ConvPath::Gemm
        };
        let mut driver = 0;
        // SAFETY: plain query into a local.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver).result()? };
        let identity = GpuIdentity {
            name: ctx.name()?,
            capability: ctx.compute_capability()?,
            driver,
        };
        steps.done("cudnn and identity");
        steps.log("GPU opened");
        Ok(Gpu {
            ctx,
            stream,
            blas,
            dnn,
            conv,
            identity,
        })
    }

    /// The convolution path engines are built for and run on here.
    pub fn conv_path(&self) -> ConvPath {
        self.conv
    }

    /// Loads cuDNN now if it is not yet (the bench's A/B on a GEMM engine); bad input where it
    /// cannot be loaded here.
    pub fn load_dnn(&mut self) -> Result<cudarc::cudnn::sys::cudnnHandle_t, GpuError> {
        if let Some(d) = self.dnn {
            return Ok(d);
        }
        let d = open_dnn(&self.stream)?.map_err(|why| {
            GpuError::BadInput(format!(
                "convolutions through cuDNN were asked for, but {why} here"
            ))
        })?;
        self.dnn = Some(d);
        Ok(d)
    }

    pub fn sync(&self) -> Result<(), GpuError> {
        self.stream.synchronize()?;
        Ok(())
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        memory::release_cached(self.stream.cu_stream());
        // SAFETY: created in `open`, destroyed once here.
        let _ = unsafe { cudarc::cublas::result::destroy_handle(self.blas) };
        if let Some(dnn) = self.dnn {
            // SAFETY: created in `open_dnn`, destroyed once here.
            let _ = unsafe { cudarc::cudnn::result::destroy_handle(dnn) };
        }
    }
}

/// NVRTC's version (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32), GpuError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain query into locals.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| GpuError::Compile(format!("{e:?}")))?;
    Ok((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conv_switch_takes_auto_cudnn_or_gemm() {
        assert_eq!(parse_conv(None), Ok(ConvPath::Gemm));
        assert_eq!(parse_conv(Some("auto")), Ok(ConvPath::Gemm));
        assert_eq!(parse_conv(Some("")), Ok(ConvPath::Gemm));
        assert_eq!(parse_conv(Some("gemm")), Ok(ConvPath::Gemm));
        assert_eq!(parse_conv(Some("cudnn")), Ok(ConvPath::Cudnn));
        let e = parse_conv(Some("cuDNN")).unwrap_err();
        assert!(e.contains("TALKER_CUDA_CONV=cuDNN") && e.contains("auto, cudnn or gemm"));
    }

    /// On a machine without CUDA (CI), probing or opening a GPU must fail cleanly, never panic.
    #[test]
    fn no_gpu_is_a_clean_error() {
        match probe() {
            Ok(g) => assert!(!g.name.is_empty()),
            Err(GpuError::Unavailable(msg)) => assert!(!msg.is_empty()),
            Err(e) => panic!("unexpected error kind: {e}"),
        }
        match Gpu::open(0) {
            Ok(g) => assert!(!g.identity.name.is_empty()),
            Err(GpuError::Unavailable(msg)) => assert!(!msg.is_empty()),
            Err(e) => panic!("unexpected error kind: {e}"),
        }
        assert!(matches!(
            Gpu::open(usize::MAX),
            Err(GpuError::Unavailable(_))
        ));
    }
}
