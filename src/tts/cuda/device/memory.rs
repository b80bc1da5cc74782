//! Device buffers and tensors, host↔device copies, and kernel launches with packed arguments.
//!
//! Buffers come from the driver's stream-ordered pool (`cuMemAllocAsync`). When the last
//! [`DevTensor`] viewing one is dropped it goes to this thread's free lists ([`FreeLists`]), by
//! stream and size class, and the next allocation of its class on that stream takes it back
//! without a driver call: everything on a stream runs in order, so work queued later cannot
//! overtake the reads queued before the drop. A batch-1 sentence allocates and frees about 2,000
//! buffers; each pair of driver calls was a visible share of the host time that bounds it.
//! [`release_cached`] hands a stream's lists back to the pool (its `Gpu` does so when dropped).
//!
//! While a CUDA graph is being captured on this thread ([`Capturing`]) the same calls become the
//! graph's allocation and free nodes: a buffer allocated during the capture belongs to the graph
//! (fixed address, reallocated on every launch), and one allocated before it is not freed inside
//! the graph — its release is deferred and handed to the graph's keep-alive list instead.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::rc::Rc;

use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::driver::{CudaFunction, result};
use rustc_hash::FxHashMap;

use super::GpuError;
use super::kernels::{MAX_RANK, UNROLL};
use crate::tts::cuda::tensor::{DType, Data, Tensor, numel};

/// Who frees a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The stream-ordered pool: freed when dropped.
    Pool,
    /// A graph being captured: freed by the graph's own free node when dropped during the
    /// capture; once the capture ends, the graph (or its record) owns it.
    Graph,
    /// Someone else's memory (a graph output seen after a replay): never freed here.
    Borrowed,
    /// Outside any stream (`cuMemAlloc`): a constant a graph reads, uploaded while capturing.
    Sync,
}

pub struct DevBuf {
    pub ptr: CUdeviceptr,
    stream: CUstream,
    owner: Cell<Owner>,
    /// The size class it was allocated at (pool buffers only; 0 for the others): where the free
    /// lists keep it.
    class: usize,
}

impl DevBuf {
    pub fn owner(&self) -> Owner {
        self.owner.get()
    }

    /// Hands the buffer to a graph record: dropping it no longer frees anything.
    pub fn disown(&self) {
        self.owner.set(Owner::Borrowed);
    }
}

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static DEFERRED: RefCell<Vec<Rc<DevBuf>>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as capturing a graph until dropped; [`Capturing::finish`] returns the pool
/// buffers released meanwhile (they must outlive the graph: it may read them).
pub struct Capturing(());

impl Capturing {
    pub fn start() -> Capturing {
        CAPTURING.with(|c| c.set(true));
        Capturing(())
    }

    pub fn finish(self) -> Vec<Rc<DevBuf>> {
        drop(self);
        DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()))
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.set(false));
    }
}

fn capturing() -> bool {
    CAPTURING.with(Cell::get)
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        match (self.owner.get(), capturing()) {
            (owner @ (Owner::Pool | Owner::Sync), true) => {
                // Freeing pre-capture memory inside a graph is illegal; keep it alive instead.
                let moved = DevBuf {
                    ptr: std::mem::take(&mut self.ptr),
                    stream: self.stream,
                    owner: Cell::new(owner),
                    class: self.class,
                };
                DEFERRED.with(|d| d.borrow_mut().push(Rc::new(moved)));
            }
            (Owner::Pool, false) => {
                let kept = FREE
                    .try_with(|f| f.borrow_mut().give(self.stream, self.class, self.ptr))
                    .unwrap_or(false);
                if !kept {
                    // SAFETY: allocated on this stream by `alloc`; freed once, after queued work.
                    let _ = unsafe { result::free_async(self.ptr, self.stream) };
                }
            }
            // SAFETY: in a capture, the graph's free node of its own allocation.
            (Owner::Graph, true) => {
                let _ = unsafe { result::free_async(self.ptr, self.stream) };
            }
            // SAFETY: allocated by `upload_sync`, freed once.
            (Owner::Sync, false) => {
                let _ = unsafe { result::free_sync(self.ptr) };
            }
            (Owner::Graph, false) | (Owner::Borrowed, _) => {}
        }
    }
}

/// A dense row-major tensor on the device (views share the buffer).
#[derive(Clone)]
pub struct DevTensor {
    pub buf: Rc<DevBuf>,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// An F32 tensor stored as FP16 bits (FP16 activations, weights and GEMM operands).
    pub half: bool,
}

impl DevTensor {
    pub fn ptr(&self) -> CUdeviceptr {
        self.buf.ptr
    }

    /// Bytes per element as stored.
    pub fn elem_size(&self) -> usize {
        if self.half { 2 } else { self.dtype.size() }
    }

    pub fn len(&self) -> usize {
        numel(&self.shape)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reshaped(&self, shape: Vec<usize>) -> DevTensor {
        DevTensor {
            buf: Rc::clone(&self.buf),
            shape,
            dtype: self.dtype,
            half: self.half,
        }
    }
}

/// Freed pool buffers by (stream, size class), kept for the next allocation of their class on
/// their stream, up to [`FreeLists::MAX_BYTES`] in all.
#[derive(Default)]
pub(crate) struct FreeLists {
    lists: FxHashMap<(CUstream, usize), Vec<CUdeviceptr>>,
    bytes: usize,
}

impl FreeLists {
    /// What the lists may hold (past it a freed buffer goes back to the pool).
    const MAX_BYTES: usize = 4 << 30;

    fn take(&mut self, stream: CUstream, class: usize) -> Option<CUdeviceptr> {
        let ptr = self.lists.get_mut(&(stream, class))?.pop()?;
        self.bytes -= class;
        Some(ptr)
    }

    /// Keeps `ptr`; `false` when it is not kept (no class, or the lists are full).
    fn give(&mut self, stream: CUstream, class: usize, ptr: CUdeviceptr) -> bool {
        if class == 0 || self.bytes + class > Self::MAX_BYTES {
            return false;
        }
        self.lists.entry((stream, class)).or_default().push(ptr);
        self.bytes += class;
        true
    }

    /// Every buffer kept for `stream`, removed from the lists.
    fn drain(&mut self, stream: CUstream) -> Vec<CUdeviceptr> {
        let keys: Vec<(CUstream, usize)> = self
            .lists
            .keys()
            .filter(|k| k.0 == stream)
            .copied()
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(v) = self.lists.remove(&k) {
                self.bytes -= k.1 * v.len();
                out.extend(v);
            }
        }
        out
    }
}

thread_local! {
    static FREE: RefCell<FreeLists> = RefCell::new(FreeLists::default());
}

/// `n` (at least 1) rounded up to a multiple of an eighth of its power of two: at most 12.5 %
/// more, and few distinct values, so sizes that differ a little share one (buffer classes here,
/// frame buckets for CUDA graphs).
pub(crate) fn round_up_by_eighths(n: usize) -> usize {
    let n = n.max(1);
    let step = 1usize << (usize::BITS - 1 - n.leading_zeros()).saturating_sub(3);
    n.div_ceil(step) * step
}

/// The size a request of `bytes` is allocated at: [`round_up_by_eighths`], at least 256 bytes, so
/// the buffers of sentences of different lengths are reused by each other.
pub(crate) fn size_class(bytes: usize) -> usize {
    round_up_by_eighths(bytes.max(256))
}

/// Hands every buffer the free lists keep for `stream` back to the driver's pool: before the
/// stream (or its context) goes.
pub(crate) fn release_cached(stream: CUstream) {
    let kept = FREE
        .try_with(|f| f.borrow_mut().drain(stream))
        .unwrap_or_default();
    for ptr in kept {
        // SAFETY: a pool buffer of this stream that nothing views any more, freed once.
        let _ = unsafe { result::free_async(ptr, stream) };
    }
}

/// `bytes` of device memory (at least 1, so every tensor has a valid address).
pub(crate) fn alloc(stream: CUstream, bytes: usize) -> Result<Rc<DevBuf>, GpuError> {
    if capturing() {
        // SAFETY: stream-ordered allocation on the engine's stream: the graph's own node.
        let ptr = unsafe { result::malloc_async(stream, bytes.max(1)) }?;
        return Ok(Rc::new(DevBuf {
            ptr,
            stream,
            owner: Cell::new(Owner::Graph),
            class: 0,
        }));
    }
    let class = size_class(bytes);
    let ptr = match FREE.with(|f| f.borrow_mut().take(stream, class)) {
        Some(ptr) => ptr,
        // SAFETY: stream-ordered allocation on the engine's stream.
        None => unsafe { result::malloc_async(stream, class) }?,
    };
    Ok(Rc::new(DevBuf {
        ptr,
        stream,
        owner: Cell::new(Owner::Pool),
        class,
    }))
}

pub fn empty(stream: CUstream, dtype: DType, shape: Vec<usize>) -> Result<DevTensor, GpuError> {
    let buf = alloc(stream, numel(&shape) * dtype.size())?;
    Ok(DevTensor {
        buf,
        shape,
        dtype,
        half: false,
    })
}

/// An F32 tensor stored as FP16 (`half`) or as FP32.
pub fn empty_f32(stream: CUstream, shape: Vec<usize>, half: bool) -> Result<DevTensor, GpuError> {
    if !half {
        return empty(stream, DType::F32, shape);
    }
    Ok(DevTensor {
        buf: alloc(stream, numel(&shape) * 2)?,
        shape,
        dtype: DType::F32,
        half: true,
    })
}

/// `t` (F32) uploaded as FP16 bits.
pub fn upload_half(stream: CUstream, t: &Tensor) -> Result<DevTensor, GpuError> {
    let v = t.as_f32().map_err(|e| GpuError::Other(e.0))?;
    let bytes: Vec<u8> = v
        .iter()
        .flat_map(|x| half::f16::from_f32(*x).to_bits().to_le_bytes())
        .collect();
    Ok(DevTensor {
        buf: upload_bytes(stream, &bytes)?,
        shape: t.shape.clone(),
        dtype: DType::F32,
        half: true,
    })
}

/// Raw bytes of a host tensor as the device stores it.
pub fn host_bytes(t: &Tensor) -> Vec<u8> {
    match &t.data {
        Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    }
}

pub(crate) fn upload_bytes(stream: CUstream, bytes: &[u8]) -> Result<Rc<DevBuf>, GpuError> {
    let buf = alloc(stream, bytes.len())?;
    if !bytes.is_empty() {
        // SAFETY: the buffer holds `bytes.len()` bytes. The copy is synchronous with respect to the
        // host slice (pageable memory is staged before the call returns).
        unsafe { result::memcpy_htod_async(buf.ptr, bytes, stream) }?;
    }
    Ok(buf)
}

pub fn upload(stream: CUstream, t: &Tensor) -> Result<DevTensor, GpuError> {
    Ok(DevTensor {
        buf: upload_bytes(stream, &host_bytes(t))?,
        shape: t.shape.clone(),
        dtype: t.dtype(),
        half: false,
    })
}

/// A dense copy of `t` in a new buffer (stream-ordered).
pub(crate) fn copy(stream: CUstream, t: &DevTensor) -> Result<DevTensor, GpuError> {
    let out = DevTensor {
        buf: alloc(stream, t.len() * t.elem_size())?,
        shape: t.shape.clone(),
        dtype: t.dtype,
        half: t.half,
    };
    copy_into(stream, &out, t)?;
    Ok(out)
}

/// Copies `src`'s elements into `dst` (same element count and type).
pub(crate) fn copy_into(
    stream: CUstream,
    dst: &DevTensor,
    src: &DevTensor,
) -> Result<(), GpuError> {
    let bytes = src.len() * src.elem_size();
    if bytes != dst.len() * dst.elem_size() {
        return Err(GpuError::Other(format!(
            "device copy of {:?} into {:?}",
            src.shape, dst.shape
        )));
    }
    if bytes > 0 {
        // SAFETY: both buffers hold at least `bytes` bytes (checked above) on this stream.
        unsafe { result::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, stream) }?;
    }
    Ok(())
}

/// Uploads `t` outside any stream (`cuMemAlloc` + a synchronous copy): legal while a graph is
/// captured in relaxed mode, and not part of the graph, so the graph reads the same bytes at
/// every replay. For values that are the same at every replay of the graph.
pub(crate) fn upload_sync(stream: CUstream, t: &Tensor) -> Result<DevTensor, GpuError> {
    let bytes = host_bytes(t);
    // SAFETY: a fresh allocation of at least `bytes.len()` bytes, filled synchronously.
    let ptr = unsafe {
        let ptr = result::malloc_sync(bytes.len().max(1))?;
        if !bytes.is_empty() {
            result::memcpy_htod_sync(ptr, &bytes)?;
        }
        ptr
    };
    Ok(DevTensor {
        buf: Rc::new(DevBuf {
            ptr,
            stream,
            owner: Cell::new(Owner::Sync),
            class: 0,
        }),
        shape: t.shape.clone(),
        dtype: t.dtype(),
        half: false,
    })
}

/// Copies a device tensor to the host (waits for the stream); FP16 storage comes back widened.
pub(crate) fn download(stream: CUstream, t: &DevTensor) -> Result<Tensor, GpuError> {
    let mut bytes = vec![0u8; t.len() * t.elem_size()];
    if !bytes.is_empty() {
        // SAFETY: the buffer holds at least this many bytes; the stream is synchronised before
        // the host reads them.
        unsafe {
            result::memcpy_dtoh_async(&mut bytes, t.ptr(), stream)?;
            result::stream::synchronize(stream)?;
        }
    }
    let data = match t.dtype {
        DType::F32 if t.half => Data::F32(
            bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        DType::F32 => Data::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                .collect(),
        ),
        DType::I64 => Data::I64(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8")))
                .collect(),
        ),
        DType::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
    };
    Ok(Tensor {
        shape: t.shape.clone(),
        data,
    })
}

/// The grid of a row kernel (`ROW_INDEX` in the source) over `rows` rows of `len` elements:
/// blocks along a row in x, rows in y and z. `None` (the flat kernel then runs) where a row would
/// not fill half a block's elements, or the rows exceed the grid.
pub(crate) fn row_grid(len: usize, rows: usize) -> Option<(u32, u32, u32)> {
    const MAX_YZ: usize = 65_535;
    if len < 256 * UNROLL / 2 || rows == 0 {
        return None;
    }
    let y = rows.min(MAX_YZ);
    let z = rows.div_ceil(y);
    (z <= MAX_YZ).then(|| {
        (
            len.div_ceil(256 * UNROLL).min(1 << 20) as u32,
            y as u32,
            z as u32,
        )
    })
}

/// Kernel arguments, kept as bytes until the launch: one buffer, each argument at an 8-byte
/// aligned offset (a launch packs a dozen; one allocation for all of them, not one each, since a
/// batch-1 sentence launches about 2,300 kernels and the host's time per launch bounds it).
#[derive(Default)]
pub struct Params {
    bytes: Vec<u8>,
    offsets: Vec<usize>,
}

impl Params {
    pub fn new() -> Params {
        Params {
            bytes: Vec::with_capacity(512),
            offsets: Vec::with_capacity(16),
        }
    }

    /// Appends a plain-data argument (an integer, a float, a device pointer or a `#[repr(C)]`
    /// struct) exactly as the kernel signature declares it.
    pub fn push<T: Copy>(&mut self, v: T) -> &mut Params {
        let size = std::mem::size_of::<T>();
        let at = self.bytes.len().next_multiple_of(8);
        self.bytes.resize(at + size, 0);
        // SAFETY: T is Copy plain data; its bytes are copied into `size` bytes just reserved.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&v as *const T).cast::<u8>(),
                self.bytes.as_mut_ptr().add(at),
                size,
            )
        };
        self.offsets.push(at);
        self
    }

    /// Launches `f` over `n` elements (grid-stride kernels; blocks of 256).
    pub(crate) fn launch(
        &mut self,
        f: &CudaFunction,
        stream: CUstream,
        n: usize,
    ) -> Result<(), GpuError> {
        self.launch_per_thread(f, stream, n, 1)
    }

    /// Launches a streaming kernel (`UNROLLED` in the source) over `n` elements, [`UNROLL`] per
    /// thread.
    pub(crate) fn launch_unrolled(
        &mut self,
        f: &CudaFunction,
        stream: CUstream,
        n: usize,
    ) -> Result<(), GpuError> {
        self.launch_per_thread(f, stream, n, UNROLL)
    }

    fn launch_per_thread(
        &mut self,
        f: &CudaFunction,
        stream: CUstream,
        n: usize,
        per_thread: usize,
    ) -> Result<(), GpuError> {
        if n == 0 {
            return Ok(());
        }
        let blocks = n.div_ceil(256 * per_thread).min(1 << 20) as u32;
        self.launch_grid(f, stream, (blocks, 1, 1))
    }

    /// Launches `f` on blocks of 256 threads in `grid` (x, y, z).
    pub(crate) fn launch_grid(
        &mut self,
        f: &CudaFunction,
        stream: CUstream,
        grid: (u32, u32, u32),
    ) -> Result<(), GpuError> {
        let base = self.bytes.as_mut_ptr();
        let mut ptrs: Vec<*mut c_void> = self
            .offsets
            .iter()
            // SAFETY: every offset lies inside `bytes`, which no longer grows.
            .map(|&at| unsafe { base.add(at) }.cast::<c_void>())
            .collect();
        // SAFETY: the argument buffers match the kernel's parameter list (built by the caller
        // from the same source) and stay alive until cuLaunchKernel has copied them.
        unsafe { result::launch_kernel(f.cu_function(), grid, (256, 1, 1), 0, stream, &mut ptrs) }?;
        Ok(())
    }
}

/// Up to [`MAX_RANK`] dimensions, as the kernels' `Dims` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub d: [i64; MAX_RANK],
    pub rank: i32,
}

/// Strides as the kernels' `Strides` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strides {
    pub s: [i64; MAX_RANK],
}

pub fn dims(shape: &[usize]) -> Result<Dims, GpuError> {
    if shape.len() > MAX_RANK {
        return Err(GpuError::Other(format!(
            "rank {} is above the kernels' {MAX_RANK}",
            shape.len()
        )));
    }
    let mut d = [1i64; MAX_RANK];
    for (i, &v) in shape.iter().enumerate() {
        d[i] = v as i64;
    }
    Ok(Dims {
        d,
        rank: shape.len() as i32,
    })
}

pub fn strides(s: &[isize]) -> Strides {
    let mut out = [0i64; MAX_RANK];
    for (i, &v) in s.iter().take(MAX_RANK).enumerate() {
        out[i] = v as i64;
    }
    Strides { s: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_structs_have_the_c_layout() {
        // struct Dims { long long d[6]; int rank; } is 56 bytes with tail padding.
        assert_eq!(std::mem::size_of::<Dims>(), 56);
        assert_eq!(std::mem::size_of::<Strides>(), 48);
        assert!(dims(&[1; 7]).is_err());
        let d = dims(&[2, 3]).unwrap();
        assert_eq!((d.d[..3].to_vec(), d.rank), (vec![2, 3, 1], 2));
        assert_eq!(strides(&[4, -1]).s[..3], [4, -1, 0]);
    }

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth() {
        assert_eq!(size_class(0), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 288);
        assert_eq!(size_class(1000), 1024);
        assert_eq!(size_class(1025), 1152);
        for b in (1..200_000).step_by(7) {
            let c = size_class(b);
            assert!(c >= b && (c <= 256 || (c - b) * 8 <= b), "{b} -> {c}");
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }

    #[test]
    fn free_lists_hand_a_buffer_back_only_to_its_stream_and_class() {
        let (s1, s2) = (0x10 as CUstream, 0x20 as CUstream);
        let mut f = FreeLists::default();
        assert!(f.give(s1, 256, 0xa00));
        assert!(f.give(s1, 512, 0xb00));
        assert!(f.give(s2, 256, 0xc00));
        assert!(
            !f.give(s1, 0, 0xd00),
            "buffers without a class are not kept"
        );
        assert_eq!(f.bytes, 1024);
        assert_eq!(f.take(s1, 288), None);
        assert_eq!(f.take(s2, 256), Some(0xc00));
        assert_eq!(f.take(s2, 256), None);
        assert_eq!(f.drain(s1).len(), 2);
        assert_eq!((f.bytes, f.take(s1, 256)), (0, None));
        assert!(
            !f.give(s1, FreeLists::MAX_BYTES + 256, 0xe00),
            "over the bound"
        );
    }

    #[test]
    fn params_keep_argument_bytes() {
        let mut p = Params::new();
        p.push(7i64)
            .push(1.5f32)
            .push(dims(&[4]).unwrap())
            .push(2i32);
        // Each argument at an 8-byte aligned offset, its bytes as given.
        assert_eq!(p.offsets, [0, 8, 16, 72]);
        assert_eq!(&p.bytes[..8], &7i64.to_le_bytes());
        assert_eq!(&p.bytes[8..12], &1.5f32.to_le_bytes());
        assert_eq!(&p.bytes[16..24], &4i64.to_le_bytes());
        assert_eq!(&p.bytes[72..], &2i32.to_le_bytes());
    }
}
