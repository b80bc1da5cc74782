//! CUDA C source of the engine's kernels: a fixed set (data movement, gathers, reductions,
//! im2col/col2im, dequantisation, depthwise conv, noise) plus one generated kernel per distinct
//! fused elementwise program of the plan.
//!
//! Input: a plan. Output: one source string for NVRTC and, for every fused step, its kernel name.
//! Code generation is deterministic, so the runtime recomputes the names from the stored plan
//! instead of storing them. No CUDA headers are needed (FP16 conversion is inline PTX), so NVRTC
//! needs no include path. Every kernel uses a grid-stride loop over 64-bit indices. The same
//! source also compiles as host C++ (`_Float16` in place of the PTX): that is how `cpu_tests`
//! checks the kernels against the host ops where there is no GPU.

use std::collections::HashMap;
use std::fmt::Write;

use crate::tts::cuda::program::op::{Arg, Binary, Ew, Fused, Op, Scalar, Unary};
use crate::tts::cuda::program::{Plan, Value};
use crate::tts::cuda::tensor::DType;

pub mod mma;

/// Highest tensor rank the kernels index (Piper's graphs use at most 5); the kernel source's
/// `Dims` and `Strides` and their Rust twins in `memory.rs` are sized by it.
pub const MAX_RANK: usize = 6;

/// Elements per thread of the streaming kernels (`UNROLLED` in the source): the launch sizes
/// their grids by it.
pub const UNROLL: usize = 4;

/// Rows per block of the row reductions (`reduce_rows_f32`, `softmax_rows_f32`): a warp each.
pub const ROWS_PER_BLOCK: usize = 8;

/// Elements per thread of the fused kernels' vector form (`VEC` in the source): 16 bytes of FP16.
pub const VEC: usize = 8;

/// The most elements (and the widest offset) the kernels index in 32 bits (`TALKER_NARROW_MAX`
/// in their source, where the CPU tests lower it to try the 64-bit paths).
pub const NARROW_MAX: usize = 0x3fff_ffff;

/// Whether a fused step may run in its vector form: rows (`len` elements) of a multiple of
/// [`VEC`], the output and every input dense along the row at 16-byte aligned starts in every row,
/// or an input broadcast along the row (last stride 0). `inputs` holds each input's address and
/// its strides in elements over the output's shape.
pub fn vector_rows(len: usize, out: u64, inputs: &[(u64, Vec<isize>)]) -> bool {
    let vec = VEC as isize;
    len.is_multiple_of(VEC)
        && out.is_multiple_of(16)
        && inputs.iter().all(|(ptr, s)| match s.split_last() {
            None | Some((0, _)) => true,
            Some((1, outer)) => {
                ptr.is_multiple_of(16) && outer.iter().all(|v| v.rem_euclid(vec) == 0)
            }
            Some(_) => false,
        })
}

const COMMON: &str = r#"
typedef long long i64;
typedef unsigned char u8;
struct Dims { i64 d[MAX_RANK]; int rank; };
struct Strides { i64 s[MAX_RANK]; };
// A Dims or Strides argument indexed by a run-time axis is copied to local memory by every
// thread (104 bytes each: 2.6 GB of writes for one of the decoder's LeakyReLUs, six times its
// output). AXES_DOWN(k, lo, hi, BODY) runs BODY for k = hi down to lo, unrolled over every axis a
// kernel can have, so each access is at a constant index and stays a parameter load.
#define AXES_DOWN(k, lo, hi, BODY) \
  _Pragma("unroll") for (int k = MAX_RANK - 1; k >= 0; --k) { if (k >= (lo) && k <= (hi)) BODY }
// a[k] for a run-time k, the same way.
__device__ __forceinline__ i64 axis_of(const i64 (&a)[MAX_RANK], int k) {
  i64 v = 0;
  _Pragma("unroll") for (int j = 0; j < MAX_RANK; ++j) if (j == k) v = a[j];
  return v;
}
#define LOOP(n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
// The hot kernels index in 32 bits when every index they form fits: a 64-bit division is a long
// software routine on the GPU, a 32-bit one a few instructions. The bound leaves room for one
// grid-stride step (at most 2^30 elements: 2^20 blocks of 256 threads, UNROLL each) past it.
// The streaming kernels give each thread UNROLL elements a block's width apart and issue all of
// their loads before using any: with one 4-byte load in flight per thread, the H200 streamed a
// 1 GB LeakyReLU at 0.33 TB/s, where PyTorch's kernel reached 4.2 TB/s. LOAD and STORE run per
// element i (u counts the thread's elements); LOAD fills registers indexed by u, STORE uses them.
#define UNROLLED(I, n, LOAD, STORE) \
  for (I base_ = (I)blockIdx.x * (I)(blockDim.x * UNROLL) + (I)threadIdx.x; base_ < (n); \
       base_ += (I)gridDim.x * (I)(blockDim.x * UNROLL)) { \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u) { I i = base_ + (I)(u * blockDim.x); if (i < (n)) { LOAD } } \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u) { I i = base_ + (I)(u * blockDim.x); if (i < (n)) { STORE } } \
  }
// Row kernels run over the last axis of a tensor in x, one row per block index in y and z: a
// row's coordinates cost divisions once per thread, not once per element as the flat form's do
// (the decoder's fused chains and im2col were bound by that integer work, not by their bytes).
#define ROW_INDEX ((i64)blockIdx.y + (i64)blockIdx.z * (i64)gridDim.y)
#ifdef __CUDACC__
__device__ __forceinline__ unsigned short f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
#else
// Host C++ (the kernels' CPU tests): the same rounding, to nearest even, through _Float16.
inline unsigned short f2h(float f) { _Float16 h = (_Float16)f; unsigned short u; __builtin_memcpy(&u, &h, 2); return u; }
inline float h2f(unsigned short u) { _Float16 h; __builtin_memcpy(&h, &u, 2); return (float)h; }
#endif
// Reads and writes of an activation in its storage type (FP16 decoder activations, FP32 otherwise):
// the maths is FP32 either way.
__device__ __forceinline__ float ldf(float v) { return v; }
__device__ __forceinline__ float ldf(unsigned short h) { return h2f(h); }
__device__ __forceinline__ void stf(float* p, float v) { *p = v; }
__device__ __forceinline__ void stf(unsigned short* p, float v) { *p = f2h(v); }
__device__ __forceinline__ signed char f2q(float v, float inv) { int q = __float2int_rn(v * inv); q = q > 127 ? 127 : (q < -127 ? -127 : q); return (signed char)q; }
// Offset of element i (< the element count of d) through strides s: the outermost coordinate
// is what is left of i, so it needs no division.
template <typename I> __device__ __forceinline__ I offset_of(I i, const Dims& d, const Strides& s) {
  if (d.rank == 0) return 0;
  I off = 0;
  AXES_DOWN(k, 1, d.rank - 1, { I dk = (I)d.d[k]; I q = i / dk; off += (i - q * dk) * (I)s.s[k]; i = q; })
  return off + i * (I)s.s[0];
}
// Whether every offset through s of the elements of d fits the 32-bit kernels.
__device__ __forceinline__ bool narrow_view(i64 n, const Dims& d, const Strides& s) {
  i64 span = 0;
  AXES_DOWN(k, 0, d.rank - 1, span += (d.d[k] - 1) * (s.s[k] < 0 ? -s.s[k] : s.s[k]);)
  return n <= TALKER_NARROW_MAX && span <= TALKER_NARROW_MAX;
}
__device__ __forceinline__ i64 wrap(i64 v, i64 dim) { return v < 0 ? v + dim : v; }
// The fused kernels' vector form moves VEC elements of each input per thread in one 16-byte load
// (FP16 activations; two for FP32): the element-wise form's 2-byte loads left the H200's decoder
// chains at 0.3-0.6 TB/s however many a thread issued. Lanes<T> holds a thread's VEC elements of
// one input as loaded (a row-broadcast input, `one`, repeats its single element); at(k) widens
// lane k. Types without a vector load (i64, bools) load lane by lane.
#ifndef __CUDACC__
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
#endif
template <typename T> struct Lanes {
  T v[VEC];
  __device__ __forceinline__ void load(const T* p, bool one) { _Pragma("unroll") for (int k = 0; k < VEC; ++k) v[k] = p[one ? 0 : k]; }
  __device__ __forceinline__ T at(int k) const { return v[k]; }
};
template <> struct Lanes<unsigned short> {
  uint4 w;
  __device__ __forceinline__ void load(const unsigned short* p, bool one) {
    if (one) { unsigned h = p[0]; h |= h << 16; w.x = h; w.y = h; w.z = h; w.w = h; } else w = *(const uint4*)p;
  }
  __device__ __forceinline__ float at(int k) const {
    unsigned x = k < 2 ? w.x : (k < 4 ? w.y : (k < 6 ? w.z : w.w));
    return h2f((unsigned short)((k & 1) ? x >> 16 : x & 0xffffu));
  }
};
template <> struct Lanes<float> {
  float4 a, b;
  __device__ __forceinline__ void load(const float* p, bool one) {
    if (one) { float x = p[0]; a.x = x; a.y = x; a.z = x; a.w = x; b = a; } else { a = ((const float4*)p)[0]; b = ((const float4*)p)[1]; }
  }
  __device__ __forceinline__ float at(int k) const {
    const float4& q = k < 4 ? a : b;
    int j = k & 3;
    return j == 0 ? q.x : (j == 1 ? q.y : (j == 2 ? q.z : q.w));
  }
};
template <typename T, typename R> __device__ __forceinline__ void store_lanes(T* p, const R* r) { _Pragma("unroll") for (int k = 0; k < VEC; ++k) p[k] = (T)r[k]; }
__device__ __forceinline__ void store_lanes(unsigned short* p, const float* r) {
  unsigned h[4];
  _Pragma("unroll") for (int k = 0; k < 4; ++k) h[k] = (unsigned)f2h(r[2 * k]) | ((unsigned)f2h(r[2 * k + 1]) << 16);
  uint4 w; w.x = h[0]; w.y = h[1]; w.z = h[2]; w.w = h[3];
  *(uint4*)p = w;
}
__device__ __forceinline__ void store_lanes(float* p, const float* r) {
  float4 a, b; a.x = r[0]; a.y = r[1]; a.z = r[2]; a.w = r[3]; b.x = r[4]; b.y = r[5]; b.z = r[6]; b.w = r[7];
  ((float4*)p)[0] = a; ((float4*)p)[1] = b;
}
"#;

/// Kernels instantiated for each storage type (f32, i64, u8 for bools).
const TYPED: &str = r#"
template <typename I> __device__ __forceinline__ void view_at_T(I n, const Dims& d, T* out, const T* in, const Strides& s) {
  T v[UNROLL];
  UNROLLED(I, n, v[u] = in[offset_of(i, d, s)];, out[i] = v[u];)
}
extern "C" __global__ void view_T(i64 n, Dims d, T* out, const T* in, i64 off, Strides s) {
  if (narrow_view(n, d, s)) view_at_T<int>((int)n, d, out, in + off, s); else view_at_T<i64>(n, d, out, in + off, s);
}
template <typename I> __device__ __forceinline__ void place_at_T(I n, const Dims& d, T* out, const Strides& s, const T* in) {
  T v[UNROLL];
  UNROLLED(I, n, v[u] = in[i];, out[offset_of(i, d, s)] = v[u];)
}
extern "C" __global__ void place_T(i64 n, Dims d, T* out, i64 off, Strides s, const T* in) {
  if (narrow_view(n, d, s)) place_at_T<int>((int)n, d, out + off, s, in); else place_at_T<i64>(n, d, out + off, s, in);
}
template <typename I> __device__ __forceinline__ T pad_load_T(I i, const Dims& d, const T* in, const Dims& in_dims, const Dims& lo, T fill) {
  I off = 0, stride = 1; bool inside = true;
  AXES_DOWN(k, 0, d.rank - 1, {
    I dk = (I)d.d[k]; I q = i / dk; I c = i - q * dk - (I)lo.d[k]; i = q;
    if (c < 0 || c >= (I)in_dims.d[k]) inside = false;
    off += c * stride; stride *= (I)in_dims.d[k];
  })
  return inside ? in[off] : fill;
}
template <typename I> __device__ __forceinline__ void pad_at_T(I n, const Dims& d, T* out, const T* in, const Dims& in_dims, const Dims& lo, T fill) {
  T v[UNROLL];
  UNROLLED(I, n, v[u] = pad_load_T(i, d, in, in_dims, lo, fill);, out[i] = v[u];)
}
extern "C" __global__ void pad_T(i64 n, Dims d, T* out, const T* in, Dims in_dims, Dims lo, T fill) {
  i64 in_n = 1;
  AXES_DOWN(k, 0, in_dims.rank - 1, in_n *= in_dims.d[k];)
  if (n <= TALKER_NARROW_MAX && in_n <= TALKER_NARROW_MAX) pad_at_T<int>((int)n, d, out, in, in_dims, lo, fill);
  else pad_at_T<i64>(n, d, out, in, in_dims, lo, fill);
}
extern "C" __global__ void fill_T(i64 n, T* out, T v) { LOOP(n) { out[i] = v; } }
extern "C" __global__ void gather_T(i64 n, T* out, const T* data, const i64* idx, i64 nidx, i64 dim, i64 inner) {
  LOOP(n) {
    i64 r = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
    out[i] = data[(o * dim + wrap(idx[j], dim)) * inner + r];
  }
}
extern "C" __global__ void gather_elements_T(i64 n, Dims d, T* out, const T* data, Strides ds, const i64* idx, int axis, i64 axis_dim) {
  LOOP(n) {
    i64 rem = i, off = 0;
    AXES_DOWN(k, 0, d.rank - 1, {
      i64 c = rem % d.d[k]; rem /= d.d[k];
      if (k == axis) c = wrap(idx[i], axis_dim);
      off += c * ds.s[k];
    })
    out[i] = data[off];
  }
}
extern "C" __global__ void gather_nd_T(i64 n, T* out, const T* data, const i64* idx, int k, i64 slice, Dims dd, Strides ds) {
  LOOP(n) {
    i64 t = i / slice, r = i % slice, off = 0;
    AXES_DOWN(j, 0, k - 1, off += wrap(idx[t * k + j], dd.d[j]) * ds.s[j];)
    out[i] = data[off + r];
  }
}
extern "C" __global__ void scatter_nd_T(i64 n, T* out, const i64* idx, int k, i64 slice, Dims dd, Strides ds, const T* upd) {
  LOOP(n) {
    i64 t = i / slice, r = i % slice, off = 0;
    AXES_DOWN(j, 0, k - 1, off += wrap(idx[t * k + j], dd.d[j]) * ds.s[j];)
    out[off + r] = upd[i];
  }
}
"#;

const FIXED: &str = r#"
extern "C" __global__ void cumsum_f32(i64 n, float* out, const float* in, i64 dim, i64 inner, int exclusive, int reverse) {
  LOOP(n) {
    i64 o = i / inner, r = i % inner; float acc = 0.f;
    for (i64 s = 0; s < dim; ++s) {
      i64 j = reverse ? dim - 1 - s : s; i64 at = (o * dim + j) * inner + r;
      float v = in[at];
      if (exclusive) { out[at] = acc; acc += v; } else { acc += v; out[at] = acc; }
    }
  }
}
extern "C" __global__ void cumsum_i64(i64 n, i64* out, const i64* in, i64 dim, i64 inner, int exclusive, int reverse) {
  LOOP(n) {
    i64 o = i / inner, r = i % inner; i64 acc = 0;
    for (i64 s = 0; s < dim; ++s) {
      i64 j = reverse ? dim - 1 - s : s; i64 at = (o * dim + j) * inner + r;
      i64 v = in[at];
      if (exclusive) { out[at] = acc; acc += v; } else { acc += v; out[at] = acc; }
    }
  }
}
// kind: 0 mean, 1 sum, 2 max; the reduced axes are contiguous: [outer, dim, inner].
extern "C" __global__ void reduce_f32(i64 n, float* out, const float* in, i64 dim, i64 inner, int kind) {
  LOOP(n) {
    i64 o = i / inner, r = i % inner; float acc = kind == 2 ? __int_as_float(0xff800000) : 0.f;
    for (i64 j = 0; j < dim; ++j) { float v = in[(o * dim + j) * inner + r]; acc = kind == 2 ? fmaxf(acc, v) : acc + v; }
    out[i] = kind == 0 ? acc / (float)dim : acc;
  }
}
extern "C" __global__ void reduce_i64(i64 n, i64* out, const i64* in, i64 dim, i64 inner, int kind) {
  LOOP(n) {
    i64 o = i / inner, r = i % inner; i64 acc = kind == 2 ? (i64)0x8000000000000000LL : 0;
    for (i64 j = 0; j < dim; ++j) { i64 v = in[(o * dim + j) * inner + r]; acc = kind == 2 ? (v > acc ? v : acc) : acc + v; }
    out[i] = kind == 0 ? acc / dim : acc;
  }
}
extern "C" __global__ void softmax_f32(i64 n, float* out, const float* in, i64 dim, i64 inner) {
  LOOP(n) {
    i64 o = i / inner, r = i % inner; const float* x = in + o * dim * inner + r; float* y = out + o * dim * inner + r;
    float m = __int_as_float(0xff800000); for (i64 j = 0; j < dim; ++j) m = fmaxf(m, x[j * inner]);
    float s = 0.f; for (i64 j = 0; j < dim; ++j) { float e = expf(x[j * inner] - m); y[j * inner] = e; s += e; }
    for (i64 j = 0; j < dim; ++j) y[j * inner] = y[j * inner] / s;
  }
}
// Rows (inner 1: the last axis reduced, as in every LayerNorm of the text encoder and the
// attention's softmax): a warp per row, its lanes reading along the row. A thread per row (the
// kernels above) reads rows 4·dim bytes apart and walks its row alone: 20-70 us for a batch-1
// step of a few dozen rows. Blocks of 256 threads hold ROWS_PER_BLOCK rows; each lane's partial
// goes through shared memory and the warp's first lane combines them. The lane loops are written
// over blockDim so that one host thread (cpu_tests) runs the whole block.
#define ROW_LANES(w, l, BODY) \
  for (int t_ = (int)threadIdx.x; t_ < ROWS_PER_BLOCK * 32; t_ += (int)blockDim.x) { int w = t_ >> 5, l = t_ & 31; BODY }
#define ROW_HEADS(w, BODY) \
  for (int t_ = (int)threadIdx.x; t_ < ROWS_PER_BLOCK; t_ += (int)blockDim.x) { int w = t_; BODY }
__device__ __forceinline__ float row_combine(float a, float b, int kind) { return kind == 2 ? fmaxf(a, b) : a + b; }
// kind as reduce_f32's.
extern "C" __global__ void reduce_rows_f32(i64 rows, float* out, const float* in, i64 dim, int kind) {
  __shared__ float part[ROWS_PER_BLOCK][32];
  i64 row0 = (i64)blockIdx.x * ROWS_PER_BLOCK;
  float init = kind == 2 ? __int_as_float(0xff800000) : 0.f;
  ROW_LANES(w, l, {
    float acc = init;
    if (row0 + w < rows) { const float* x = in + (row0 + w) * dim; for (i64 j = l; j < dim; j += 32) acc = row_combine(acc, x[j], kind); }
    part[w][l] = acc;
  })
  __syncthreads();
  ROW_HEADS(w, {
    if (row0 + w < rows) {
      float acc = part[w][0];
      for (int k = 1; k < 32; ++k) acc = row_combine(acc, part[w][k], kind);
      out[row0 + w] = kind == 0 ? acc / (float)dim : acc;
    }
  })
}
extern "C" __global__ void softmax_rows_f32(i64 rows, float* out, const float* in, i64 dim) {
  __shared__ float part[ROWS_PER_BLOCK][32];
  __shared__ float top[ROWS_PER_BLOCK], sum[ROWS_PER_BLOCK];
  i64 row0 = (i64)blockIdx.x * ROWS_PER_BLOCK;
  ROW_LANES(w, l, {
    float m = __int_as_float(0xff800000);
    if (row0 + w < rows) { const float* x = in + (row0 + w) * dim; for (i64 j = l; j < dim; j += 32) m = fmaxf(m, x[j]); }
    part[w][l] = m;
  })
  __syncthreads();
  ROW_HEADS(w, { float m = part[w][0]; for (int k = 1; k < 32; ++k) m = fmaxf(m, part[w][k]); top[w] = m; })
  __syncthreads();
  ROW_LANES(w, l, {
    float s = 0.f;
    if (row0 + w < rows) { const float* x = in + (row0 + w) * dim; for (i64 j = l; j < dim; j += 32) s += expf(x[j] - top[w]); }
    part[w][l] = s;
  })
  __syncthreads();
  ROW_HEADS(w, { float s = part[w][0]; for (int k = 1; k < 32; ++k) s += part[w][k]; sum[w] = s; })
  __syncthreads();
  ROW_LANES(w, l, {
    if (row0 + w < rows) {
      const float* x = in + (row0 + w) * dim; float* y = out + (row0 + w) * dim;
      for (i64 j = l; j < dim; j += 32) y[j] = expf(x[j] - top[w]) / sum[w];
    }
  })
}
// Convolution operand: rows (ci, k) by columns t ("nn", [b][ci*K+k][t]) or transposed ("tn", [b][t][ci*K+k]).
template <typename I, typename X> __device__ __forceinline__ float im2col_load(I i, const X* x, I rows, I cin, I t_in, I k, I t_out, I stride, I dil, I pad, int tn) {
  I b; I row; I t;
  if (tn) { I q = i / rows; row = i - q * rows; b = q / t_out; t = q - b * t_out; }
  else { I q = i / t_out; t = i - q * t_out; b = q / rows; row = q - b * rows; }
  I ci = row / k; I kk = row - ci * k; I p = t * stride + kk * dil - pad;
  return (p >= 0 && p < t_in) ? ldf(x[(b * cin + ci) * t_in + p]) : 0.f;
}
#define IM2COL(NAME, IN_T, OUT_T, CONVERT) \
template <typename I> __device__ __forceinline__ void NAME##_at(I n, OUT_T* col, const IN_T* x, I cin, I t_in, I k, I t_out, I stride, I dil, I pad, int tn, float inv) { \
  I rows = cin * k; float vs[UNROLL]; \
  UNROLLED(I, n, vs[u] = im2col_load(i, x, rows, cin, t_in, k, t_out, stride, dil, pad, tn);, float v = vs[u]; col[i] = CONVERT;) \
} \
extern "C" __global__ void NAME(i64 n, OUT_T* col, const IN_T* x, i64 cin, i64 t_in, i64 k, i64 t_out, i64 stride, i64 dil, i64 pad, int tn, float inv) { \
  if (n <= 0) return; \
  if (n <= TALKER_NARROW_MAX && n / (k * t_out) * t_in <= TALKER_NARROW_MAX) \
    NAME##_at<int>((int)n, col, x, (int)cin, (int)t_in, (int)k, (int)t_out, (int)stride, (int)dil, (int)pad, tn, inv); \
  else NAME##_at<i64>(n, col, x, cin, t_in, k, t_out, stride, dil, pad, tn, inv); \
}
// im2col in rows ("nn" only): operand row g is item g / (cin·k), channel (g % (cin·k)) / k, tap g % k.
#define IM2COL_ROWS(NAME, IN_T, OUT_T, CONVERT) \
template <typename I> __device__ __forceinline__ void NAME##_rows_at(I t_out, I g, OUT_T* col, const IN_T* x, I cin, I t_in, I k, I stride, I dil, I pad) { \
  I rows = cin * k; I b = g / rows; I row = g - b * rows; I ci = row / k; I kk = row - ci * k; \
  const IN_T* xr = x + (b * cin + ci) * t_in; I shift = kk * dil - pad; OUT_T* cr = col + g * t_out; float vs[UNROLL]; \
  UNROLLED(I, t_out, I p = i * stride + shift; vs[u] = (p >= 0 && p < t_in) ? ldf(xr[p]) : 0.f;, float v = vs[u]; cr[i] = CONVERT;) \
} \
extern "C" __global__ void NAME##_rows(i64 n, OUT_T* col, const IN_T* x, i64 cin, i64 t_in, i64 k, i64 t_out, i64 stride, i64 dil, i64 pad) { \
  i64 g = ROW_INDEX; \
  if (g >= n / t_out) return; \
  if (n <= TALKER_NARROW_MAX && n / (k * t_out) * t_in <= TALKER_NARROW_MAX) \
    NAME##_rows_at<int>((int)t_out, (int)g, col, x, (int)cin, (int)t_in, (int)k, (int)stride, (int)dil, (int)pad); \
  else NAME##_rows_at<i64>(t_out, g, col, x, cin, t_in, k, stride, dil, pad); \
}
IM2COL_ROWS(im2col_f32, float, float, v)
IM2COL_ROWS(im2col_f16, float, unsigned short, f2h(v))
IM2COL_ROWS(im2col_f16_h, unsigned short, unsigned short, f2h(v))
IM2COL(im2col_f32, float, float, v)
IM2COL(im2col_f16, float, unsigned short, f2h(v))
IM2COL(im2col_f16_h, unsigned short, unsigned short, f2h(v))
IM2COL(im2col_i8, float, signed char, f2q(v, inv))
// ConvTranspose: z is [b][cout*k][t_in]; out[b][co][o] sums the taps that land on o, in the
// order of kk. Undilated (the vocoder's upsamplers), the taps are every stride-th kk from
// (o + pad) % stride, so one division finds them all.
template <typename I> __device__ __forceinline__ float col2im_sum(I i, const float* z, I k, I t_in, I t_out, I stride, I dil, I pad) {
  I q = i / t_out; I o = i - q * t_out; const float* zi = z + q * k * t_in; float acc = 0.f;
  if (dil == 1) {
    I r = o + pad; I t = r / stride;
    for (I kk = r - t * stride; kk < k && t >= 0; kk += stride, --t) if (t < t_in) acc += zi[kk * t_in + t];
  } else {
    for (I kk = 0; kk < k; ++kk) {
      I p = o + pad - kk * dil;
      if (p < 0 || p % stride != 0) continue;
      I t = p / stride; if (t >= t_in) continue;
      acc += zi[kk * t_in + t];
    }
  }
  return acc;
}
template <typename I, typename O> __device__ __forceinline__ void col2im_at(I n, O* out, const float* z, I k, I t_in, I t_out, I stride, I dil, I pad) {
  float acc[UNROLL];
  UNROLLED(I, n, acc[u] = col2im_sum(i, z, k, t_in, t_out, stride, dil, pad);, stf(out + i, acc[u]);)
}
#define COL2IM(NAME, OUT_T) \
extern "C" __global__ void NAME(i64 n, OUT_T* out, const float* z, i64 cout, i64 k, i64 t_in, i64 t_out, i64 stride, i64 dil, i64 pad) { \
  if (n <= 0) return; \
  if (n <= TALKER_NARROW_MAX && n / t_out * k * t_in <= TALKER_NARROW_MAX) \
    col2im_at<int, OUT_T>((int)n, out, z, (int)k, (int)t_in, (int)t_out, (int)stride, (int)dil, (int)pad); \
  else col2im_at<i64, OUT_T>(n, out, z, k, t_in, t_out, stride, dil, pad); \
}
COL2IM(col2im_f32, float)
COL2IM(col2im_f16, unsigned short)
// FP16 to FP32 (a cuDNN FP16 convolution's output, widened for the next step).
extern "C" __global__ void half_to_f32(i64 n, float* out, const unsigned short* in) { LOOP(n) { out[i] = h2f(in[i]); } }
// INT8 accumulators to floats: row r of each item has weight scale ws[r / rows_per_scale].
extern "C" __global__ void dequant_i32(i64 n, float* out, const int* acc, i64 rows, i64 cols, i64 rows_per_scale, const float* ws, float xs) {
  LOOP(n) { i64 r = (i / cols) % rows; out[i] = (float)acc[i] * (ws[r / rows_per_scale] * xs); }
}
// Depthwise 1-D convolution (groups == channels, one input channel per group).
extern "C" __global__ void dwconv_f32(i64 n, float* out, const float* x, const float* w, i64 c, i64 mult, i64 t_in, i64 k, i64 t_out, i64 stride, i64 dil, i64 pad) {
  LOOP(n) {
    i64 t = i % t_out, co = (i / t_out) % (c * mult), b = i / (t_out * c * mult); i64 ci = co / mult; float acc = 0.f;
    for (i64 kk = 0; kk < k; ++kk) { i64 p = t * stride + kk * dil - pad; if (p >= 0 && p < t_in) acc += x[(b * c + ci) * t_in + p] * w[co * k + kk]; }
    out[i] = acc;
  }
}
// N(mean, scale^2) from a counter-based hash (Box-Muller), so runs are reproducible per seed.
__device__ __forceinline__ unsigned int mix(unsigned long long x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33; return (unsigned int)x;
}
extern "C" __global__ void randn_f32(i64 n, float* out, unsigned long long seed, float mean, float scale) {
  LOOP(n) {
    float u1 = ((float)mix(seed * 2654435761ULL + 2 * i) + 1.f) / 4294967296.f;
    float u2 = (float)mix(seed * 2654435761ULL + 2 * i + 1) / 4294967296.f;
    out[i] = mean + scale * sqrtf(-2.f * logf(u1)) * cosf(6.283185307179586f * u2);
  }
}
"#;

fn c_type(t: DType) -> &'static str {
    match t {
        DType::F32 => "float",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

/// Memory type of a tensor of `t` (bools are bytes).
fn mem_type(t: DType) -> &'static str {
    match t {
        DType::F32 => "float",
        DType::I64 => "i64",
        DType::Bool => "u8",
    }
}

/// How a fused kernel's input or output is stored: its type, and for floats whether as FP16 bits
/// (a decoder activation, [`crate::tts::cuda::program::Value::half`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub dtype: DType,
    pub half: bool,
}

impl Stored {
    pub fn plain(dtype: DType) -> Stored {
        Stored { dtype, half: false }
    }

    pub fn of(v: &Value) -> Stored {
        Stored {
            dtype: v.dtype,
            half: v.half,
        }
    }

    fn mem(self) -> &'static str {
        if self.half {
            "unsigned short"
        } else {
            mem_type(self.dtype)
        }
    }
}

/// Suffix of the typed fixed kernels.
pub fn type_suffix(t: DType) -> &'static str {
    match t {
        DType::F32 => "f32",
        DType::I64 => "i64",
        DType::Bool => "u8",
    }
}

fn literal(s: Scalar) -> String {
    match s {
        Scalar::F32(v) => format!("__int_as_float(0x{:08x})", v.to_bits()),
        Scalar::I64(v) => format!("((i64){v}LL)"),
        Scalar::Bool(v) => v.to_string(),
    }
}

fn expr(op: Ew, a: &[String], types: &[DType], out: DType) -> String {
    let f = types.first().copied() == Some(DType::F32);
    let x = |i: usize| a.get(i).cloned().unwrap_or_default();
    match op {
        Ew::Unary(u) => match u {
            Unary::Neg => format!("(-{})", x(0)),
            Unary::Sqrt => format!("sqrtf({})", x(0)),
            Unary::Exp => format!("expf({})", x(0)),
            Unary::Erf => format!("erff({})", x(0)),
            Unary::Tanh => format!("tanhf({})", x(0)),
            Unary::Sigmoid => format!("(1.f / (1.f + expf(-{})))", x(0)),
            Unary::Relu if f => format!("fmaxf({}, 0.f)", x(0)),
            Unary::Relu => format!("({0} > 0 ? {0} : (i64)0)", x(0)),
            Unary::Softplus => format!(
                "({0} > 0.f ? {0} + log1pf(expf(-{0})) : log1pf(expf({0})))",
                x(0)
            ),
            Unary::Ceil => format!("ceilf({})", x(0)),
            Unary::Not => format!("(!{})", x(0)),
            Unary::LeakyRelu(alpha) => format!(
                "({0} >= 0.f ? {0} : {0} * {1})",
                x(0),
                literal(Scalar::F32(alpha))
            ),
        },
        Ew::Binary(b) => {
            let (p, q) = (x(0), x(1));
            match b {
                Binary::Add => format!("({p} + {q})"),
                Binary::Sub => format!("({p} - {q})"),
                Binary::Mul => format!("({p} * {q})"),
                Binary::Div if f => format!("({p} / {q})"),
                Binary::Div => format!("({q} == 0 ? (i64)0 : {p} / {q})"),
                Binary::Pow => format!("powf({p}, (float){q})"),
                Binary::Equal => format!("({p} == {q})"),
                Binary::Less => format!("({p} < {q})"),
                Binary::LessOrEqual => format!("({p} <= {q})"),
                Binary::GreaterOrEqual => format!("({p} >= {q})"),
                Binary::And => format!("({p} && {q})"),
            }
        }
        Ew::Where => format!("({} ? {} : {})", x(0), x(1), x(2)),
        Ew::Cast(t) => match (types.first().copied(), t) {
            (_, DType::Bool) => format!("({} != 0)", x(0)),
            _ => format!("(({}){})", c_type(out), x(0)),
        },
        Ew::Clip { lo, hi } => {
            let mut v = x(0);
            let mut next = 1;
            let (max, min) = if f {
                ("fmaxf", "fminf")
            } else {
                ("max", "min")
            };
            if lo {
                v = format!("{max}({v}, {})", x(next));
                next += 1;
            }
            if hi {
                v = format!("{min}({v}, {})", x(next));
            }
            v
        }
    }
}

/// CUDA source of a fused program's kernels (everything but the name): a body over the index type
/// `I`, 32-bit where the element count allows, and the `extern "C"` entry that picks it. Each
/// thread loads its `UNROLL` elements' inputs first (the coordinates of a broadcast element are
/// divided out once for all inputs), then runs the program on them and stores. `{name}_rows` is
/// the row form (`n` the last axis, `rows`, `total`; no dense flags): see `ROW_INDEX`.
/// `{name}_vec` takes the row form's arguments and moves `VEC` elements of a row per thread; it
/// needs rows of a multiple of `VEC` and every input either broadcast along the row or dense in
/// it at a 16-byte aligned start ([`vector_rows`] checks that).
pub fn fused_kernel(f: &Fused, inputs: &[Stored], half_out: bool, name: &str) -> String {
    let input_types: Vec<DType> = inputs.iter().map(|s| s.dtype).collect();
    let out_t = Stored {
        dtype: f.instrs.last().map_or(DType::F32, |i| i.dtype),
        half: half_out,
    };
    let ins = 0..inputs.len();
    let each =
        |f: &dyn Fn(usize) -> String, sep: &str| ins.clone().map(f).collect::<Vec<_>>().join(sep);
    let params = each(
        &|i| format!(", const {}* in{i}, Strides s{i}", inputs[i].mem()),
        "",
    );
    let args = each(&|i| format!(", in{i}, s{i}"), "");
    let out = out_t.mem();
    let registers = each(
        &|i| format!("{} a{i}[UNROLL]; ", c_type(input_types[i])),
        "",
    );
    let mut load = String::new();
    if !input_types.is_empty() {
        load = format!(
            "{} if (!dense && d.rank > 0) {{ I r = i; {} AXES_DOWN(k, 1, d.rank - 1, {{ I dk = (I)d.d[k]; I q = r / dk; I c = r - q * dk; {} r = q; }}) {} }} ",
            each(&|i| format!("I o{i} = i;"), " "),
            each(&|i| format!("o{i} = 0;"), " "),
            each(&|i| format!("o{i} += c * (I)s{i}.s[k];"), " "),
            each(&|i| format!("o{i} += r * (I)s{i}.s[0];"), " "),
        );
    }
    let reads = each(
        &|i| {
            if input_types[i] == DType::Bool {
                format!("a{i}[u] = (in{i}[o{i}] != 0);")
            } else if inputs[i].half {
                format!("a{i}[u] = h2f(in{i}[o{i}]);")
            } else {
                format!("a{i}[u] = in{i}[o{i}];")
            }
        },
        " ",
    );
    load.push_str(&reads);
    let compute = fused_program(f, &input_types, half_out, Store::Element);
    // The row form: each input's offset at the row's start, worked out once per thread (the
    // outer axes' divisions), then a stride along the row per element: no division per element.
    let row_bases = format!(
        "{} {{ I r = row; AXES_DOWN(k, 1, d.rank - 2, {{ I dk = (I)d.d[k]; I q = r / dk; I c = r - q * dk; {} r = q; }}) {} }} {}",
        each(&|i| format!("I b{i} = 0;"), " "),
        each(&|i| format!("b{i} += c * (I)s{i}.s[k];"), " "),
        each(&|i| format!("b{i} += r * (I)s{i}.s[0];"), " "),
        each(
            &|i| format!("I l{i} = (I)axis_of(s{i}.s, d.rank - 1);"),
            " "
        ),
    );
    let row_load = format!(
        "{} {reads}",
        each(&|i| format!("I o{i} = b{i} + i * l{i};"), " ")
    );
    let rows = format!(
        "template <typename I> __device__ __forceinline__ void {name}_rows_at(I n, I row, Dims d, {out}* out{params}) {{\n  {registers}\n  {row_bases}\n  out += row * n;\n  UNROLLED(I, n,\n    {row_load},\n    {compute})\n}}\nextern \"C\" __global__ void {name}_rows(i64 n, i64 rows, i64 total, Dims d, {out}* out{params}) {{\n  i64 row = ROW_INDEX;\n  if (row >= rows) return;\n  if (total <= TALKER_NARROW_MAX) {name}_rows_at<int>((int)n, (int)row, d, out{args});\n  else {name}_rows_at<i64>(n, row, d, out{args});\n}}\n"
    );
    // The vector form: the row form's bases, then VEC elements per thread (see `Lanes`).
    let lanes = each(
        &|i| {
            format!(
                "Lanes<{}> r{i}; r{i}.load(in{i} + b{i} + v * l{i}, l{i} == 0);",
                inputs[i].mem()
            )
        },
        " ",
    );
    let widen = each(
        &|i| {
            if input_types[i] == DType::Bool {
                format!("a{i}[u] = (r{i}.at(u) != 0);")
            } else {
                format!("a{i}[u] = r{i}.at(u);")
            }
        },
        " ",
    );
    let vec_registers = each(&|i| format!("{} a{i}[VEC]; ", c_type(input_types[i])), "");
    let lane_compute = fused_program(f, &input_types, half_out, Store::Lane);
    let res = c_type(out_t.dtype);
    let vector = format!(
        "template <typename I> __device__ __forceinline__ void {name}_vec_at(I n, I row, Dims d, {out}* out{params}) {{\n  {vec_registers}{res} res[VEC];\n  {row_bases}\n  out += row * n;\n  for (I v = ((I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x) * VEC; v < n; v += (I)gridDim.x * (I)blockDim.x * VEC) {{\n    {lanes}\n    _Pragma(\"unroll\") for (int u = 0; u < VEC; ++u) {{ {widen} {lane_compute} }}\n    store_lanes(out + v, res);\n  }}\n}}\nextern \"C\" __global__ void {name}_vec(i64 n, i64 rows, i64 total, Dims d, {out}* out{params}) {{\n  i64 row = ROW_INDEX;\n  if (row >= rows) return;\n  if (total <= TALKER_NARROW_MAX) {name}_vec_at<int>((int)n, (int)row, d, out{args});\n  else {name}_vec_at<i64>(n, row, d, out{args});\n}}\n"
    );
    let entry = each(
        &|i| {
            format!(
                ", const {}* in{i}, Strides s{i}, int dense{i}",
                inputs[i].mem()
            )
        },
        "",
    );
    let dense = each(&|i| format!("dense{i} && "), "");
    format!(
        "template <typename I> __device__ __forceinline__ void {name}_at(I n, Dims d, {out}* out{params}, bool dense) {{\n  {registers}\n  UNROLLED(I, n,\n    {load},\n    {compute})\n}}\nextern \"C\" __global__ void {name}(i64 n, Dims d, {out}* out{entry}) {{\n  bool dense = {dense}true;\n  if (n <= TALKER_NARROW_MAX) {name}_at<int>((int)n, d, out{args}, dense);\n  else {name}_at<i64>(n, d, out{args}, dense);\n}}\n{rows}{vector}"
    )
}

/// The program of a fused kernel on one element (its inputs in `a<k>[u]`), ending in the store.
fn fused_program(f: &Fused, input_types: &[DType], half_out: bool, store: Store) -> String {
    let mut s = String::new();
    let mut temp_types: Vec<DType> = Vec::new();
    for (k, ins) in f.instrs.iter().enumerate() {
        let (args, types): (Vec<String>, Vec<DType>) = ins
            .args
            .iter()
            .map(|a| match *a {
                Arg::Input(i) => (
                    format!("a{i}[u]"),
                    input_types.get(i).copied().unwrap_or(DType::F32),
                ),
                Arg::Temp(j) => (
                    format!("t{j}"),
                    temp_types.get(j).copied().unwrap_or(DType::F32),
                ),
                Arg::Scalar(sc) => (
                    literal(sc),
                    match sc {
                        Scalar::F32(_) => DType::F32,
                        Scalar::I64(_) => DType::I64,
                        Scalar::Bool(_) => DType::Bool,
                    },
                ),
            })
            .unzip();
        let _ = write!(
            s,
            "{} t{k} = {}; ",
            c_type(ins.dtype),
            expr(ins.op, &args, &types, ins.dtype)
        );
        temp_types.push(ins.dtype);
    }
    let last = f.instrs.len().saturating_sub(1);
    match store {
        Store::Element if f.instrs.last().map(|i| i.dtype) == Some(DType::Bool) => {
            let _ = write!(s, "out[i] = (u8)t{last};");
        }
        Store::Element if half_out => {
            let _ = write!(s, "out[i] = f2h(t{last});");
        }
        Store::Element => {
            let _ = write!(s, "out[i] = t{last};");
        }
        Store::Lane => {
            let _ = write!(s, "res[u] = t{last};");
        }
    }
    s
}

/// Where a fused program leaves its result: in `out[i]` (the element forms) or in lane `u` of
/// `res`, stored by the vector form's one `store_lanes`.
#[derive(Clone, Copy)]
enum Store {
    Element,
    Lane,
}

/// Every kernel the executor loads: the fixed set, each typed one per storage type, and the fused
/// steps' (`fused` as [`module_source`] names them; names may repeat).
pub fn kernel_names(fused: &HashMap<usize, String>) -> Vec<String> {
    let mut names: Vec<String> = fused
        .values()
        .flat_map(|n| [n.clone(), format!("{n}_rows"), format!("{n}_vec")])
        .collect();
    for base in [
        "view",
        "place",
        "pad",
        "fill",
        "gather",
        "gather_elements",
        "gather_nd",
        "scatter_nd",
    ] {
        for t in [DType::F32, DType::I64, DType::Bool] {
            names.push(format!("{base}_{}", type_suffix(t)));
        }
    }
    for n in [
        "cumsum_f32",
        "cumsum_i64",
        "reduce_f32",
        "reduce_i64",
        "softmax_f32",
        "reduce_rows_f32",
        "softmax_rows_f32",
        "im2col_f32",
        "im2col_f16",
        "im2col_f16_h",
        "im2col_f32_rows",
        "im2col_f16_rows",
        "im2col_f16_h_rows",
        "im2col_i8",
        "col2im_f32",
        "col2im_f16",
        "half_to_f32",
        "dequant_i32",
        "dwconv_f32",
        "randn_f32",
    ] {
        names.push(n.to_owned());
    }
    names.extend(mma::names());
    names
}

/// The kernels every plan has: the helpers, the typed kernels per storage type, the fixed set.
fn fixed_source() -> String {
    let mut src = format!(
        "#define MAX_RANK {MAX_RANK}\n#define UNROLL {UNROLL}\n#define VEC {VEC}\n#define ROWS_PER_BLOCK {ROWS_PER_BLOCK}\n#ifndef TALKER_NARROW_MAX\n#define TALKER_NARROW_MAX {NARROW_MAX}LL\n#endif\n"
    );
    src.push_str(COMMON);
    for t in [DType::F32, DType::I64, DType::Bool] {
        src.push_str(
            &TYPED
                .replace("_T(", &format!("_{}(", type_suffix(t)))
                .replace("_T<", &format!("_{}<", type_suffix(t)))
                .replace("T* ", &format!("{}* ", mem_type(t)))
                .replace("T fill", &format!("{} fill", mem_type(t)))
                .replace("T v)", &format!("{} v)", mem_type(t)))
                .replace("T v[", &format!("{} v[", mem_type(t)))
                .replace(
                    "__forceinline__ T ",
                    &format!("__forceinline__ {} ", mem_type(t)),
                ),
        );
    }
    src.push_str(FIXED);
    src.push_str(&mma::source());
    src
}

/// The whole module's source and the kernel name of every fused step (by step index).
pub fn module_source(plan: &Plan) -> (String, HashMap<usize, String>) {
    let mut src = fixed_source();
    let mut by_code: HashMap<String, String> = HashMap::new();
    let mut names = HashMap::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let Op::Fused(f) = &step.op else { continue };
        let types: Vec<Stored> = step
            .inputs
            .iter()
            .map(|v| v.map_or(Stored::plain(DType::F32), |v| Stored::of(&plan.values[v])))
            .collect();
        let half_out = step.outputs.first().is_some_and(|&o| plan.values[o].half);
        let body = fused_kernel(f, &types, half_out, "KERNEL");
        let next = format!("ew{}", by_code.len());
        let name = by_code.entry(body.clone()).or_insert_with(|| {
            src.push_str(&body.replace("KERNEL", &next));
            next.clone()
        });
        names.insert(i, name.clone());
    }
    (src, names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::cuda::program::op::Instr;

    #[test]
    fn fused_code_reads_broadcast_inputs_and_inlines_scalars() {
        let f = Fused {
            views: Vec::new(),
            instrs: vec![
                Instr::f32(
                    Ew::Binary(Binary::Add),
                    &[Arg::Input(0), Arg::Scalar(Scalar::F32(0.5))],
                ),
                Instr::f32(Ew::Unary(Unary::LeakyRelu(0.1)), &[Arg::Temp(0)]),
                Instr::f32(
                    Ew::Where,
                    &[Arg::Input(1), Arg::Temp(1), Arg::Scalar(Scalar::F32(0.0))],
                ),
            ],
        };
        let code = fused_kernel(
            &f,
            &[Stored::plain(DType::F32), Stored::plain(DType::Bool)],
            false,
            "k",
        );
        assert!(code.contains("void k(i64 n, Dims d, float* out, const float* in0, Strides s0, int dense0, const u8* in1"), "{code}");
        assert!(
            code.contains("float a0[UNROLL]; bool a1[UNROLL];")
                && code.contains("a1[u] = (in1[o1] != 0);"),
            "every input of the thread's elements is loaded before any is used: {code}"
        );
        assert!(
            code.contains("o0 += c * (I)s0.s[k]; o1 += c * (I)s1.s[k];"),
            "one division per axis serves every input: {code}"
        );
        assert!(
            code.contains(
                "if (n <= TALKER_NARROW_MAX) k_at<int>((int)n, d, out, in0, s0, in1, s1, dense);"
            ),
            "{code}"
        );
        assert!(
            code.contains("float t0 = (a0[u] + __int_as_float(0x3f000000));"),
            "{code}"
        );
        assert!(
            code.contains("(t0 >= 0.f ? t0 : t0 * __int_as_float(0x3dcccccd))"),
            "{code}"
        );
        assert!(code.contains("out[i] = t2;"), "{code}");
    }

    /// The vector form only where every 16-byte load it makes is aligned and every lane it
    /// stores is the row's.
    #[test]
    fn the_vector_form_needs_whole_aligned_rows() {
        let dense = |ptr: u64, outer: isize| (ptr, vec![outer * 16, outer * 8, 1]);
        let along = (4u64, vec![1, 0, 0]);
        assert!(vector_rows(64, 256, &[dense(512, 1), along.clone()]));
        assert!(vector_rows(64, 256, &[(512, vec![0, 0, 1])]), "per time");
        assert!(!vector_rows(60, 256, &[dense(512, 1)]), "row of 60");
        assert!(!vector_rows(64, 264, &[dense(512, 1)]), "output misaligned");
        assert!(!vector_rows(64, 256, &[dense(520, 1)]), "input misaligned");
        assert!(
            !vector_rows(64, 256, &[(512, vec![1028, 12, 1])]),
            "rows 12 apart"
        );
        assert!(
            !vector_rows(64, 256, &[(512, vec![2048, 128, 2])]),
            "strided row"
        );
    }

    #[test]
    fn casts_and_int_maths() {
        let f = Fused {
            views: Vec::new(),
            instrs: vec![
                Instr {
                    op: Ew::Binary(Binary::Div),
                    args: vec![Arg::Input(0), Arg::Scalar(Scalar::I64(2))],
                    dtype: DType::I64,
                },
                Instr {
                    op: Ew::Cast(DType::Bool),
                    args: vec![Arg::Temp(0)],
                    dtype: DType::Bool,
                },
            ],
        };
        let code = fused_kernel(&f, &[Stored::plain(DType::I64)], false, "k");
        assert!(
            code.contains("i64 t0 = (((i64)2LL) == 0 ? (i64)0 : a0[u] / ((i64)2LL));"),
            "{code}"
        );
        assert!(code.contains("bool t1 = (t0 != 0);"), "{code}");
        assert!(
            code.contains("u8* out") && code.contains("out[i] = (u8)t1;"),
            "{code}"
        );
    }
}

#[cfg(test)]
mod cpu_tests;
