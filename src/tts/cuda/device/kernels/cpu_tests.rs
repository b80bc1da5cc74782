//! The kernels' own source, compiled as host C++ and run on the CPU against the host executor's
//! ops: their index maths is checked in CI, where there is no GPU. A kernel runs as one thread
//! per block (its grid-stride loop then covers the whole range), block by block over the grid's
//! y and z; the shim below gives CUDA's launch coordinates and intrinsics plain definitions.

use std::ffi::c_void;

use libloading::Library;

use super::{Stored, fixed_source, fused_kernel, mma};
use crate::tts::cuda::device::memory::{Dims, Strides, dims, strides};
use crate::tts::cuda::ops::movement::Strided;
use crate::tts::cuda::ops::{self, broadcast, elementwise, linalg};
use crate::tts::cuda::program::op::{
    Arg, Binary, ConvSpec, Ew, Fused, Instr, Op, Precision, Scalar, Unary, ViewOp,
};
use crate::tts::cuda::quant;
use crate::tts::cuda::tensor::{DType, Tensor};

const SHIM: &str = r#"
#include <cmath>
#include <cstring>
struct talker_dim3 { unsigned x, y, z; };
static talker_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
extern "C" void talker_block(unsigned gy, unsigned gz, unsigned y, unsigned z) { gridDim = {1, gy, gz}; blockIdx = {0, y, z}; }
extern "C" void talker_block_x(unsigned x) { blockIdx.x = x; }
#define __global__
#define __device__
#define __shared__ static
#define __syncthreads()
#define __forceinline__ inline
static inline float __int_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float2int_rn(float f) { return (int)nearbyintf(f); }
template <class A, class B> static inline A max(A a, B b) { return a > (A)b ? a : (A)b; }
template <class A, class B> static inline A min(A a, B b) { return a < (A)b ? a : (A)b; }
"#;

/// The kernels of `src` as a loaded host library (kept with the folder it was built in).
struct Kernels {
    lib: Library,
    _dir: tempfile::TempDir,
}

impl Kernels {
    fn build(src: &str) -> Kernels {
        let dir = tempfile::tempdir().unwrap();
        let cpp = dir.path().join("kernels.cpp");
        let so = dir.path().join("kernels.so");
        std::fs::write(&cpp, format!("{SHIM}{src}")).unwrap();
        let out = std::process::Command::new("c++")
            .args(["-std=c++17", "-O1", "-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&cpp)
            .output()
            .expect("a C++ compiler (scripts/install-deps installs build-essential)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // SAFETY: the library is the kernels just compiled; it has no initialisers.
        let lib = unsafe { Library::new(&so) }.unwrap();
        Kernels { lib, _dir: dir }
    }

    /// The kernel `name` as a function of type `F`, after setting the grid to block (y, z) of
    /// (gy, gz).
    fn at<F: Copy>(&self, name: &str, (gy, gz, y, z): (u32, u32, u32, u32)) -> F {
        // SAFETY: `talker_block` is the shim's; the caller names `F` as the kernel's signature.
        unsafe {
            let block = self
                .lib
                .get::<unsafe extern "C" fn(u32, u32, u32, u32)>(b"talker_block")
                .unwrap();
            block(gy, gz, y, z);
            *self.lib.get::<F>(name.as_bytes()).unwrap()
        }
    }

    /// The kernel `name` for block (x, y, z) of a grid (·, gy, gz): for kernels that cover one
    /// tile per block rather than looping over the grid.
    fn tile<F: Copy>(&self, name: &str, (gy, gz): (u32, u32), (x, y, z): (u32, u32, u32)) -> F {
        let f = self.at(name, (gy, gz, y, z));
        // SAFETY: `talker_block_x` is the shim's.
        unsafe {
            self.lib
                .get::<unsafe extern "C" fn(u32)>(b"talker_block_x")
                .unwrap()(x)
        };
        f
    }

    /// The kernel `name` for a flat grid-stride launch.
    fn flat<F: Copy>(&self, name: &str) -> F {
        self.at(name, (1, 1, 0, 0))
    }
}

/// `src` built twice: as the GPU runs it (32-bit indices where they fit, as on every test size
/// here) and with the 32-bit bound set below any count, so the 64-bit path is checked too.
fn both_widths(src: &str) -> [(&'static str, Kernels); 2] {
    [
        ("32-bit", Kernels::build(src)),
        (
            "64-bit",
            Kernels::build(&format!("#define TALKER_NARROW_MAX -1LL\n{src}")),
        ),
    ]
}

fn spec(
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
    precision: Precision,
) -> ConvSpec {
    ConvSpec {
        precision,
        ..ConvSpec::plain(kernel, stride, dilation, pad, 1)
    }
}

/// Deterministic values in [-2, 2) that are exact in FP16 (multiples of 1/64).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut r = fastrand::Rng::with_seed(seed);
    (0..n).map(|_| (r.i32(-128..128) as f32) / 64.0).collect()
}

/// The host executor's convolution of `x` (`[b, cin, t]`) by `w` (`[cout, cin/group, k]`).
fn host_conv(x: &[f32], xs: [usize; 3], w: &[f32], ws: [usize; 3], s: &ConvSpec) -> Tensor {
    linalg::conv(
        &Tensor::f32(xs.to_vec(), x.to_vec()),
        &Tensor::f32(ws.to_vec(), w.to_vec()),
        None,
        s,
    )
    .unwrap()
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

type Im2col =
    unsafe extern "C" fn(i64, *mut c_void, *const f32, i64, i64, i64, i64, i64, i64, i64, i32, f32);

/// im2col in the "nn" layout, then the GEMM cuBLAS runs (here a plain sum), against the host
/// convolution; and the INT8 "tn" layout against the quantised "nn" operand.
#[test]
fn im2col_gives_the_host_convolution() {
    for (width, k) in both_widths(&fixed_source()) {
        im2col_case(width, &k);
    }
}

fn im2col_case(width: &str, k: &Kernels) {
    let (b, cin, t, cout, kk) = (2usize, 3usize, 11usize, 4usize, 3usize);
    let x = values(b * cin * t, 1);
    let w = values(cout * cin * kk, 2);
    for (stride, dil, pad) in [(1, 1, 1), (2, 2, 2), (1, 3, 0)] {
        for p in [Precision::F32, Precision::F16] {
            let s = spec(kk, stride, dil, pad, p);
            let want = host_conv(&x, [b, cin, t], &w, [cout, cin, kk], &s);
            let t_out = want.shape[2];
            let rows = cin * kk;
            let n = b * rows * t_out;
            let im2col = |name: &str, out: *mut c_void, tn: i32, inv: f32| {
                let f: Im2col = k.flat(name);
                let d = [cin, t, kk, t_out, stride, dil, pad].map(|v| v as i64);
                // SAFETY: `out` holds n elements of the kernel's type; the signature is its own.
                unsafe {
                    f(
                        n as i64,
                        out,
                        x.as_ptr(),
                        d[0],
                        d[1],
                        d[2],
                        d[3],
                        d[4],
                        d[5],
                        d[6],
                        tn,
                        inv,
                    )
                };
            };
            let col: Vec<f32> = if p == Precision::F32 {
                let mut col = vec![0f32; n];
                im2col("im2col_f32", col.as_mut_ptr().cast(), 0, 1.0);
                col
            } else {
                let mut h = vec![0u16; n];
                im2col("im2col_f16", h.as_mut_ptr().cast(), 0, 1.0);
                h.iter()
                    .map(|&v| half::f16::from_bits(v).to_f32())
                    .collect()
            };
            let mut got = vec![0f32; b * cout * t_out];
            for bi in 0..b {
                for co in 0..cout {
                    for to in 0..t_out {
                        got[(bi * cout + co) * t_out + to] = (0..rows)
                            .map(|r| w[co * rows + r] * col[(bi * rows + r) * t_out + to])
                            .sum();
                    }
                }
            }
            close(
                &got,
                want.as_f32().unwrap(),
                &format!("{width} {p:?} s{stride} d{dil} p{pad}"),
            );
            if p == Precision::F32 {
                let amax = 1.5;
                let mut q = vec![0i8; n];
                im2col(
                    "im2col_i8",
                    q.as_mut_ptr().cast(),
                    1,
                    1.0 / quant::scale(amax),
                );
                for bi in 0..b {
                    for r in 0..rows {
                        for to in 0..t_out {
                            let v = col[(bi * rows + r) * t_out + to];
                            assert_eq!(
                                q[(bi * t_out + to) * rows + r],
                                quant::quantize(v, quant::scale(amax)),
                                "{width} INT8 operand at item {bi} row {r} column {to}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// ConvTranspose as the engine runs it (z = Wᵀ·x per item, then col2im) against the host op.
/// The widening of a cuDNN FP16 output: every FP16 value, normal, subnormal, infinite or zero,
/// comes back as the FP32 `half` gives.
#[test]
fn half_to_f32_widens_every_fp16_value_exactly() {
    let k = Kernels::build(&fixed_source());
    let bits: Vec<u16> = (0..=u16::MAX)
        .filter(|&b| !half::f16::from_bits(b).is_nan())
        .collect();
    let mut out = vec![f32::NAN; bits.len()];
    type Widen = unsafe extern "C" fn(i64, *mut f32, *const u16);
    // SAFETY: `half_to_f32` reads n u16s and writes n floats; both buffers hold n.
    unsafe {
        k.flat::<Widen>("half_to_f32")(bits.len() as i64, out.as_mut_ptr(), bits.as_ptr());
    }
    for (b, o) in bits.iter().zip(&out) {
        assert_eq!(
            o.to_bits(),
            half::f16::from_bits(*b).to_f32().to_bits(),
            "fp16 {b:#06x}"
        );
    }
}

#[test]
fn col2im_gives_the_host_transposed_convolution() {
    for (width, k) in both_widths(&fixed_source()) {
        col2im_case(width, &k);
    }
}

/// Undilated cases take the one-division tap walk, dilated ones the general loop.
fn col2im_case(width: &str, k: &Kernels) {
    type Col2im =
        unsafe extern "C" fn(i64, *mut f32, *const f32, i64, i64, i64, i64, i64, i64, i64);
    let (b, cin, t, cout, kk) = (2usize, 3usize, 5usize, 2usize, 4usize);
    let x = values(b * cin * t, 3);
    let w = values(cin * cout * kk, 4);
    for (stride, pad, dil) in [
        (2, 1, 1),
        (4, 0, 1),
        (3, 2, 1),
        (1, 0, 1),
        (5, 3, 1),
        (2, 1, 2),
        (3, 0, 3),
    ] {
        let s = spec(kk, stride, dil, pad, Precision::F32);
        let want = linalg::conv_transpose(
            &Tensor::f32(vec![b, cin, t], x.clone()),
            &Tensor::f32(vec![cin, cout, kk], w.clone()),
            None,
            &s,
        )
        .unwrap();
        let t_out = want.shape[2];
        let ck = cout * kk;
        let mut z = vec![0f32; b * ck * t];
        for bi in 0..b {
            for r in 0..ck {
                for ti in 0..t {
                    z[(bi * ck + r) * t + ti] = (0..cin)
                        .map(|ci| w[ci * ck + r] * x[(bi * cin + ci) * t + ti])
                        .sum();
                }
            }
        }
        let mut got = vec![0f32; b * cout * t_out];
        let f: Col2im = k.flat("col2im_f32");
        // SAFETY: buffers sized for these dimensions; the signature is the kernel's.
        unsafe {
            f(
                got.len() as i64,
                got.as_mut_ptr(),
                z.as_ptr(),
                cout as i64,
                kk as i64,
                t as i64,
                t_out as i64,
                stride as i64,
                dil as i64,
                pad as i64,
            )
        };
        close(
            &got,
            want.as_f32().unwrap(),
            &format!("{width} stride {stride} pad {pad} dilation {dil}"),
        );
    }
}

#[test]
fn depthwise_convolution_matches_the_host_op() {
    let k = Kernels::build(&fixed_source());
    type Dw = unsafe extern "C" fn(
        i64,
        *mut f32,
        *const f32,
        *const f32,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
    );
    let (b, c, mult, t, kk) = (2usize, 3usize, 2usize, 9usize, 3usize);
    let x = values(b * c * t, 5);
    let w = values(c * mult * kk, 6);
    let s = ConvSpec::plain(kk, 2, 2, 2, c);
    let want = host_conv(&x, [b, c, t], &w, [c * mult, 1, kk], &s);
    let t_out = want.shape[2];
    let mut got = vec![0f32; b * c * mult * t_out];
    let f: Dw = k.flat("dwconv_f32");
    // SAFETY: buffers sized for these dimensions; the signature is the kernel's.
    unsafe {
        f(
            got.len() as i64,
            got.as_mut_ptr(),
            x.as_ptr(),
            w.as_ptr(),
            c as i64,
            mult as i64,
            t as i64,
            kk as i64,
            t_out as i64,
            2,
            2,
            2,
        )
    };
    close(&got, want.as_f32().unwrap(), "depthwise");
}

/// A generated fused kernel (an input broadcast over channels or over time, then LeakyReLU)
/// against the host's elementwise ops, with one dense and one strided (broadcast) input, and
/// with both inputs dense.
#[test]
fn a_fused_kernel_broadcasts_as_the_host_ops_do() {
    let fused = Fused {
        views: Vec::new(),
        instrs: vec![
            Instr::f32(Ew::Binary(Binary::Add), &[Arg::Input(0), Arg::Input(1)]),
            Instr::f32(Ew::Unary(Unary::LeakyRelu(0.1)), &[Arg::Temp(0)]),
        ],
    };
    let src = format!(
        "{}{}",
        fixed_source(),
        fused_kernel(&fused, &[Stored::plain(DType::F32); 2], false, "ew_test")
    );
    type Ew2 = unsafe extern "C" fn(
        i64,
        Dims,
        *mut f32,
        *const f32,
        Strides,
        i32,
        *const f32,
        Strides,
        i32,
    );
    let shape = vec![2usize, 3, 4];
    let x = Tensor::f32(shape.clone(), values(24, 7));
    for (width, k) in both_widths(&src) {
        for (other, seed) in [(vec![1, 3, 1], 8), (vec![2, 1, 4], 9), (shape.clone(), 10)] {
            let y = Tensor::f32(other.clone(), values(numel_of(&other), seed));
            let want = elementwise::unary(
                Unary::LeakyRelu(0.1),
                &elementwise::binary(Binary::Add, &x, &y).unwrap(),
            )
            .unwrap();
            let st = |t: &Tensor| {
                let s: Vec<isize> = broadcast::broadcast_strides(&t.shape, &shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                strides(&s)
            };
            let mut got = vec![0f32; 24];
            let f: Ew2 = k.flat("ew_test");
            // SAFETY: buffers sized for the shape; the signature is the generated kernel's.
            unsafe {
                f(
                    24,
                    dims(&shape).unwrap(),
                    got.as_mut_ptr(),
                    x.as_f32().unwrap().as_ptr(),
                    st(&x),
                    1,
                    y.as_f32().unwrap().as_ptr(),
                    st(&y),
                    i32::from(other == shape),
                )
            };
            close(
                &got,
                want.as_f32().unwrap(),
                &format!("{width} bias {other:?} + LeakyReLU"),
            );
        }
    }
}

fn numel_of(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// A strided view (every second column of a transposed matrix, from an offset) and its placing
/// back, as the movement steps run them.
#[test]
fn views_and_places_follow_their_strides() {
    type View = unsafe extern "C" fn(i64, Dims, *mut f32, *const f32, i64, Strides);
    type Place = unsafe extern "C" fn(i64, Dims, *mut f32, i64, Strides, *const f32);
    let src: Vec<f32> = (0..60).map(|v| v as f32).collect();
    // A [3][2] view of a [5][12] buffer: rows step 1, columns step two rows (24), from 13.
    let shape = [3usize, 2];
    let (off, s) = (13i64, [1isize, 24]);
    let want: Vec<f32> = (0..3)
        .flat_map(|r| (0..2).map(move |c| (13 + r + 24 * c) as f32))
        .collect();
    for (width, k) in both_widths(&fixed_source()) {
        let mut got = vec![0f32; want.len()];
        // SAFETY: every offset the view forms lies inside `src`; `got` holds its elements.
        unsafe {
            k.flat::<View>("view_f32")(
                got.len() as i64,
                dims(&shape).unwrap(),
                got.as_mut_ptr(),
                src.as_ptr(),
                off,
                strides(&s),
            )
        };
        assert_eq!(got, want, "{width} view");
        let mut back = vec![-1f32; 60];
        // SAFETY: as above, with the roles of the buffers swapped.
        unsafe {
            k.flat::<Place>("place_f32")(
                got.len() as i64,
                dims(&shape).unwrap(),
                back.as_mut_ptr(),
                off,
                strides(&s),
                got.as_ptr(),
            )
        };
        for (i, v) in back.iter().enumerate() {
            let placed = want.contains(&(i as f32));
            assert_eq!(
                *v,
                if placed { i as f32 } else { -1.0 },
                "{width} place at {i}"
            );
        }
    }
}

/// Pad with a grown and a cropped side (negative pad), as the movement step runs it.
#[test]
fn pads_grow_and_crop_with_the_fill() {
    type Pad = unsafe extern "C" fn(i64, Dims, *mut f32, *const f32, Dims, Dims, f32);
    let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    // x is [2][3]; one row before it, a column cut from its start, two columns after it.
    let (in_shape, out_shape) = ([2usize, 3], [3usize, 4]);
    let mut lo = dims(&in_shape).unwrap();
    lo.d[..2].copy_from_slice(&[1, -1]);
    let want: Vec<f32> = (0..3i64)
        .flat_map(|r| (0..4i64).map(move |c| (r - 1, c + 1)))
        .map(|(r, c)| {
            if (0..2).contains(&r) && (0..3).contains(&c) {
                (r * 3 + c) as f32
            } else {
                -7.0
            }
        })
        .collect();
    for (width, k) in both_widths(&fixed_source()) {
        let mut got = vec![0f32; 12];
        // SAFETY: `got` holds the padded shape's 12 elements; every read lies inside `x`.
        unsafe {
            k.flat::<Pad>("pad_f32")(
                12,
                dims(&out_shape).unwrap(),
                got.as_mut_ptr(),
                x.as_ptr(),
                dims(&in_shape).unwrap(),
                lo,
                -7.0,
            )
        };
        assert_eq!(got, want, "{width} pad");
    }
}

fn to_half_bits(v: &[f32]) -> Vec<u16> {
    v.iter()
        .map(|&x| half::f16::from_f32(x).to_bits())
        .collect()
}

/// FP16 decoder activations: im2col reading FP16 input gives the operand bits of im2col on the
/// same values in FP32, and col2im writing FP16 gives its FP32 sums rounded to nearest.
#[test]
fn half_activations_through_im2col_and_col2im_round_only_at_the_store() {
    for (width, k) in both_widths(&fixed_source()) {
        let (b, cin, t, kk, t_out) = (2usize, 3usize, 11usize, 3usize, 11usize);
        let x = values(b * cin * t, 11);
        let xh = to_half_bits(&x);
        let n = b * cin * kk * t_out;
        let run = |name: &str, input: *const f32| {
            let mut col = vec![0u16; n];
            let f: Im2col = k.flat(name);
            // SAFETY: `col` holds n FP16 values; `input` b·cin·t elements of the kernel's type.
            unsafe {
                f(
                    n as i64,
                    col.as_mut_ptr().cast(),
                    input,
                    cin as i64,
                    t as i64,
                    kk as i64,
                    t_out as i64,
                    1,
                    2,
                    2,
                    0,
                    1.0,
                )
            };
            col
        };
        assert_eq!(
            run("im2col_f16_h", xh.as_ptr().cast()),
            run("im2col_f16", x.as_ptr()),
            "{width} im2col from FP16"
        );

        type Col2im<O> =
            unsafe extern "C" fn(i64, *mut O, *const f32, i64, i64, i64, i64, i64, i64, i64);
        let (cout, kz, tz, stride) = (2usize, 4usize, 5usize, 2usize);
        let z: Vec<f32> = values(b * cout * kz * tz, 12)
            .iter()
            .map(|v| v * 1.001)
            .collect();
        let t_up = (tz - 1) * stride + kz - 2;
        let m = b * cout * t_up;
        let (mut wide, mut narrow) = (vec![0f32; m], vec![0u16; m]);
        let d = [cout, kz, tz, t_up, stride, 1, 1].map(|v| v as i64);
        // SAFETY: outputs hold m elements of each kernel's type; z holds b·cout·kz·tz floats.
        unsafe {
            k.flat::<Col2im<f32>>("col2im_f32")(
                m as i64,
                wide.as_mut_ptr(),
                z.as_ptr(),
                d[0],
                d[1],
                d[2],
                d[3],
                d[4],
                d[5],
                d[6],
            );
            k.flat::<Col2im<u16>>("col2im_f16")(
                m as i64,
                narrow.as_mut_ptr(),
                z.as_ptr(),
                d[0],
                d[1],
                d[2],
                d[3],
                d[4],
                d[5],
                d[6],
            );
        }
        assert_eq!(narrow, to_half_bits(&wide), "{width} col2im to FP16");
    }
}

/// A fused kernel over FP16 activations: it widens what it reads, computes in FP32 and rounds
/// what it writes, so its output is the FP32 kernel's rounded to FP16, bit for bit.
#[test]
fn a_fused_kernel_over_half_activations_rounds_the_fp32_result() {
    let fused = Fused {
        views: Vec::new(),
        instrs: vec![
            Instr::f32(Ew::Binary(Binary::Add), &[Arg::Input(0), Arg::Input(1)]),
            Instr::f32(Ew::Unary(Unary::LeakyRelu(0.1)), &[Arg::Temp(0)]),
        ],
    };
    let half = Stored {
        dtype: DType::F32,
        half: true,
    };
    let src = format!(
        "{}{}{}",
        fixed_source(),
        fused_kernel(&fused, &[Stored::plain(DType::F32); 2], false, "ew_wide"),
        fused_kernel(&fused, &[half, Stored::plain(DType::F32)], true, "ew_half")
    );
    type Ew2<I, O> =
        unsafe extern "C" fn(i64, Dims, *mut O, *const I, Strides, i32, *const f32, Strides, i32);
    let shape = vec![2usize, 3, 4];
    let x = values(24, 13);
    let xh = to_half_bits(&x);
    let y: Vec<f32> = values(3, 14).iter().map(|v| v * 1.37).collect();
    let ys = strides(
        &broadcast::broadcast_strides(&[1, 3, 1], &shape)
            .iter()
            .map(|&v| v as isize)
            .collect::<Vec<_>>(),
    );
    let xs = strides(&[12, 4, 1]);
    for (width, k) in both_widths(&src) {
        let (mut wide, mut narrow) = (vec![0f32; 24], vec![0u16; 24]);
        // SAFETY: buffers sized for the shape; the signatures are the generated kernels'.
        unsafe {
            k.flat::<Ew2<f32, f32>>("ew_wide")(
                24,
                dims(&shape).unwrap(),
                wide.as_mut_ptr(),
                x.as_ptr(),
                xs,
                1,
                y.as_ptr(),
                ys,
                0,
            );
            k.flat::<Ew2<u16, u16>>("ew_half")(
                24,
                dims(&shape).unwrap(),
                narrow.as_mut_ptr(),
                xh.as_ptr(),
                xs,
                1,
                y.as_ptr(),
                ys,
                0,
            );
        }
        assert_eq!(narrow, to_half_bits(&wide), "{width} fused over FP16");
    }
}

/// Runs a row kernel's every block: rows over y (2 wide) and z, one more block than rows when
/// the count is odd (it must do nothing).
fn each_row_block(rows: usize, mut run: impl FnMut((u32, u32, u32, u32))) {
    let gz = rows.div_ceil(2) as u32;
    for z in 0..gz {
        for y in 0..2 {
            run((2, gz, y, z));
        }
    }
}

/// A fused kernel reading an input through folded views (transposed, reversed by a negative
/// step, broadcast) in place, from an offset start: flat and row forms give the host's result
/// for the same plan step, which copies the view out first.
#[test]
fn a_fused_kernel_reads_a_folded_view_in_place() {
    let fused = Fused {
        instrs: vec![
            Instr::f32(Ew::Binary(Binary::Mul), &[Arg::Input(0), Arg::Input(1)]),
            Instr::f32(Ew::Unary(Unary::Tanh), &[Arg::Temp(0)]),
        ],
        views: vec![vec![
            ViewOp::Transpose(vec![2, 0, 1]),
            ViewOp::Slice {
                starts: vec![-1, 2],
                ends: vec![0, i64::MIN],
                axes: Some(vec![0, 2]),
                steps: Some(vec![-1, -1]),
            },
            ViewOp::Expand(vec![2, 1, 1, 1]),
        ]],
    };
    let src = format!(
        "{}{}",
        fixed_source(),
        fused_kernel(&fused, &[Stored::plain(DType::F32); 2], false, "ew_view")
    );
    let x = Tensor::f32(vec![2, 3, 4], values(24, 21));
    let view = Strided::dense(&x.shape).through(&fused.views[0]).unwrap();
    let shape = view.shape.clone();
    assert_eq!(shape, [2, 3, 2, 3]);
    let n = numel_of(&shape);
    let y = Tensor::f32(shape.clone(), values(n, 22));
    let want = ops::run(
        &Op::Fused(fused.clone()),
        &[Some(&x), Some(&y)],
        &mut fastrand::Rng::with_seed(0),
    )
    .unwrap()
    .remove(0);
    let xs = strides(&view.clone().expand(&shape).unwrap().strides);
    let ys = strides(&Strided::dense(&shape).strides);
    // SAFETY: the view stays inside x (it was built from x's shape).
    let start = unsafe { x.as_f32().unwrap().as_ptr().offset(view.offset) };
    type Flat = unsafe extern "C" fn(
        i64,
        Dims,
        *mut f32,
        *const f32,
        Strides,
        i32,
        *const f32,
        Strides,
        i32,
    );
    type Rows = unsafe extern "C" fn(
        i64,
        i64,
        i64,
        Dims,
        *mut f32,
        *const f32,
        Strides,
        *const f32,
        Strides,
    );
    let d = dims(&shape).unwrap();
    let yp = y.as_f32().unwrap().as_ptr();
    for (width, k) in both_widths(&src) {
        let mut flat = vec![0f32; n];
        // SAFETY: buffers sized for the shape; the signature is the generated kernel's.
        unsafe {
            k.flat::<Flat>("ew_view")(n as i64, d, flat.as_mut_ptr(), start, xs, 0, yp, ys, 1)
        };
        close(&flat, want.as_f32().unwrap(), &format!("{width} flat"));
        let (len, rows) = (shape[3], n / shape[3]);
        let mut by_rows = vec![0f32; n];
        each_row_block(rows, |b| {
            // SAFETY: as above; a block past the last row returns at once.
            unsafe {
                k.at::<Rows>("ew_view_rows", b)(
                    len as i64,
                    rows as i64,
                    n as i64,
                    d,
                    by_rows.as_mut_ptr(),
                    start,
                    xs,
                    yp,
                    ys,
                )
            }
        });
        assert_eq!(by_rows, flat, "{width} rows");
    }
}

/// The row form of a fused kernel writes what the flat form does, bit for bit: a dense input, a
/// per-channel one and a per-time one, over rows split across y and z.
#[test]
fn a_fused_row_kernel_matches_the_flat_one() {
    let fused = Fused {
        views: Vec::new(),
        instrs: vec![
            Instr::f32(Ew::Binary(Binary::Add), &[Arg::Input(0), Arg::Input(1)]),
            Instr::f32(Ew::Binary(Binary::Mul), &[Arg::Temp(0), Arg::Input(2)]),
            Instr::f32(Ew::Unary(Unary::LeakyRelu(0.1)), &[Arg::Temp(1)]),
        ],
    };
    let src = format!(
        "{}{}",
        fixed_source(),
        fused_kernel(&fused, &[Stored::plain(DType::F32); 3], false, "ew3")
    );
    let shape = vec![2usize, 3, 5];
    let others = [shape.clone(), vec![1, 3, 1], vec![1, 1, 5]];
    let data: Vec<Vec<f32>> = others
        .iter()
        .enumerate()
        .map(|(k, s)| values(numel_of(s), 20 + k as u64))
        .collect();
    let st = |s: &[usize]| {
        strides(
            &broadcast::broadcast_strides(s, &shape)
                .iter()
                .map(|&v| v as isize)
                .collect::<Vec<_>>(),
        )
    };
    type Flat = unsafe extern "C" fn(
        i64,
        Dims,
        *mut f32,
        *const f32,
        Strides,
        i32,
        *const f32,
        Strides,
        i32,
        *const f32,
        Strides,
        i32,
    );
    type Rows = unsafe extern "C" fn(
        i64,
        i64,
        i64,
        Dims,
        *mut f32,
        *const f32,
        Strides,
        *const f32,
        Strides,
        *const f32,
        Strides,
    );
    for (width, k) in both_widths(&src) {
        let (mut flat, mut rows) = (vec![0f32; 30], vec![f32::NAN; 30]);
        // SAFETY: buffers sized for the shapes; the signatures are the generated kernels'.
        unsafe {
            k.flat::<Flat>("ew3")(
                30,
                dims(&shape).unwrap(),
                flat.as_mut_ptr(),
                data[0].as_ptr(),
                st(&others[0]),
                1,
                data[1].as_ptr(),
                st(&others[1]),
                0,
                data[2].as_ptr(),
                st(&others[2]),
                0,
            );
        }
        each_row_block(6, |b| {
            // SAFETY: as above; blocks past the 6 rows return at once.
            unsafe {
                k.at::<Rows>("ew3_rows", b)(
                    5,
                    6,
                    30,
                    dims(&shape).unwrap(),
                    rows.as_mut_ptr(),
                    data[0].as_ptr(),
                    st(&others[0]),
                    data[1].as_ptr(),
                    st(&others[1]),
                    data[2].as_ptr(),
                    st(&others[2]),
                )
            }
        });
        assert_eq!(
            rows.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            flat.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{width}"
        );
    }
}

/// The vector form of a fused kernel writes what its row form does, bit for bit, FP16 and FP32
/// out: an FP16 input dense in every row, an FP32 one per channel (broadcast along the row), an
/// FP16 one per time (dense along the row, the same in every row) and a bool mask per item
/// (loaded lane by lane).
#[test]
fn a_fused_vector_kernel_matches_the_row_form() {
    let fused = Fused {
        views: Vec::new(),
        instrs: vec![
            Instr::f32(Ew::Binary(Binary::Add), &[Arg::Input(0), Arg::Input(1)]),
            Instr::f32(Ew::Binary(Binary::Mul), &[Arg::Temp(0), Arg::Input(2)]),
            Instr::f32(Ew::Unary(Unary::LeakyRelu(0.1)), &[Arg::Temp(1)]),
            Instr::f32(
                Ew::Where,
                &[Arg::Input(3), Arg::Temp(2), Arg::Scalar(Scalar::F32(0.5))],
            ),
        ],
    };
    let half = Stored {
        dtype: DType::F32,
        half: true,
    };
    let stored = [
        half,
        Stored::plain(DType::F32),
        half,
        Stored::plain(DType::Bool),
    ];
    let src = format!(
        "{}{}{}",
        fixed_source(),
        fused_kernel(&fused, &stored, true, "ewh"),
        fused_kernel(&fused, &stored, false, "ewf")
    );
    let (t, shape) = (24usize, vec![2usize, 3, 24]);
    let others = [shape.clone(), vec![1, 3, 1], vec![1, 1, t], vec![2, 1, t]];
    let x = to_half_bits(&values(numel_of(&others[0]), 31));
    let bias = values(3, 32);
    let y = to_half_bits(&values(t, 33));
    let mask: Vec<u8> = (0..2 * t).map(|i| u8::from(i % 5 != 0)).collect();
    let st = |s: &[usize]| {
        broadcast::broadcast_strides(s, &shape)
            .iter()
            .map(|&v| v as isize)
            .collect::<Vec<_>>()
    };
    type Rows<O> = unsafe extern "C" fn(
        i64,
        i64,
        i64,
        Dims,
        *mut O,
        *const u16,
        Strides,
        *const f32,
        Strides,
        *const u16,
        Strides,
        *const u8,
        Strides,
    );
    let n = numel_of(&shape);
    let addr = |p: *const c_void| p as u64;
    let ins = [
        (addr(x.as_ptr().cast()), st(&others[0])),
        (addr(bias.as_ptr().cast()), st(&others[1])),
        (addr(y.as_ptr().cast()), st(&others[2])),
        (addr(mask.as_ptr().cast()), st(&others[3])),
    ];
    let run = |k: &Kernels, name: &str, out: *mut c_void| {
        assert!(
            super::vector_rows(t, addr(out), &ins),
            "the executor would run {name} on these buffers"
        );
        each_row_block(6, |b| {
            // SAFETY: buffers sized for the shapes; the signature is the generated kernels'
            // (both forms take the same arguments); blocks past the 6 rows return at once.
            unsafe {
                k.at::<Rows<c_void>>(name, b)(
                    t as i64,
                    6,
                    n as i64,
                    dims(&shape).unwrap(),
                    out,
                    x.as_ptr(),
                    strides(&st(&others[0])),
                    bias.as_ptr(),
                    strides(&st(&others[1])),
                    y.as_ptr(),
                    strides(&st(&others[2])),
                    mask.as_ptr(),
                    strides(&st(&others[3])),
                )
            }
        });
    };
    for (width, k) in both_widths(&src) {
        let (mut rows, mut vector) = (vec![0u16; n], vec![0xffffu16; n]);
        run(&k, "ewh_rows", rows.as_mut_ptr().cast());
        run(&k, "ewh_vec", vector.as_mut_ptr().cast());
        assert_eq!(vector, rows, "{width} FP16 out");
        let (mut rows, mut vector) = (vec![0f32; n], vec![f32::NAN; n]);
        run(&k, "ewf_rows", rows.as_mut_ptr().cast());
        run(&k, "ewf_vec", vector.as_mut_ptr().cast());
        assert_eq!(
            vector.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            rows.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{width} FP32 out"
        );
    }
}

/// im2col's row form gives the flat form's operand, bit for bit, in each precision it serves
/// (FP32, FP16 from FP32, FP16 from FP16), strided, dilated and padded.
#[test]
fn im2col_rows_match_the_flat_operand() {
    type Rows =
        unsafe extern "C" fn(i64, *mut c_void, *const c_void, i64, i64, i64, i64, i64, i64, i64);
    let (b, cin, t, kk) = (2usize, 3usize, 13usize, 3usize);
    let x = values(b * cin * t, 30);
    let xh = to_half_bits(&x);
    for (width, k) in both_widths(&fixed_source()) {
        for (stride, dil, pad) in [(1, 1, 1), (2, 2, 2), (1, 3, 0)] {
            let t_out = (t + 2 * pad - dil * (kk - 1) - 1) / stride + 1;
            let rows = b * cin * kk;
            let n = rows * t_out;
            let d = [cin, t, kk, t_out, stride, dil, pad].map(|v| v as i64);
            for (name, size, input) in [
                ("im2col_f32", 4, x.as_ptr().cast::<c_void>()),
                ("im2col_f16", 2, x.as_ptr().cast()),
                ("im2col_f16_h", 2, xh.as_ptr().cast()),
            ] {
                let (mut flat, mut by_rows) = (vec![0u8; n * size], vec![0xffu8; n * size]);
                let f: Im2col = k.flat(name);
                // SAFETY: outputs hold n elements of `size` bytes; inputs b·cin·t elements.
                unsafe {
                    f(
                        n as i64,
                        flat.as_mut_ptr().cast(),
                        input.cast(),
                        d[0],
                        d[1],
                        d[2],
                        d[3],
                        d[4],
                        d[5],
                        d[6],
                        0,
                        1.0,
                    )
                };
                each_row_block(rows, |g| {
                    // SAFETY: as above; blocks past the rows return at once.
                    unsafe {
                        k.at::<Rows>(&format!("{name}_rows"), g)(
                            n as i64,
                            by_rows.as_mut_ptr().cast(),
                            input,
                            d[0],
                            d[1],
                            d[2],
                            d[3],
                            d[4],
                            d[5],
                            d[6],
                        )
                    }
                });
                assert_eq!(by_rows, flat, "{width} {name} s{stride} d{dil} p{pad}");
            }
        }
    }
}

/// Rows too short to fill half a block's elements, or more than the grid's y·z, take the flat
/// kernel; otherwise blocks span a row in x and the rows fill y, then z.
#[test]
fn row_grids_cover_every_row_or_fall_back() {
    use crate::tts::cuda::device::memory::row_grid;
    assert_eq!(row_grid(511, 10), None);
    assert_eq!(row_grid(512, 0), None);
    assert_eq!(row_grid(512, 10), Some((1, 10, 1)));
    assert_eq!(row_grid(1025, 65_536), Some((2, 65_535, 2)));
    assert_eq!(row_grid(4096, 65_535 * 65_535), Some((4, 65_535, 65_535)));
    assert_eq!(row_grid(4096, 65_535 * 65_535 + 1), None);
}

type ConvMma = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    *const u16,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
);
type MmaSum = unsafe extern "C" fn(i64, *mut c_void, *const f32, i32);

/// The tensor-core convolution (`kernels::mma`), run block by block with each warp's MMAs worked
/// out from its lanes' fragments, against the host convolution: FP32 and FP16 input and output,
/// channels and positions that do not fill a tile, several input slices, the voices' tap counts
/// and reaches, asymmetric padding; whole, and split into 2 and 3 parts of the input slices
/// (partial sums, then `conv_mma_sum_*`; a part may hold no slice). The values are multiples of
/// 1/64, so every sum is exact in FP32 whatever its order and the outputs must match to the bit.
#[test]
fn tensor_core_convolution_gives_the_host_convolution() {
    let k = Kernels::build(&fixed_source());
    for (b, cin, cout, t, kk, dil, pads) in [
        (2, 32, 70, 150, 3, 1, (1, 1)),
        (1, 16, 8, 300, 11, 5, (25, 25)),
        (2, 48, 64, 40, 7, 3, (9, 9)),
        (1, 16, 1, 129, 7, 1, (3, 3)),
        (1, 32, 16, 200, 5, 1, (0, 2)),
        (1, 32, 32, 601, 11, 5, (25, 25)),
        (2, 16, 40, 300, 11, 12, (60, 60)),
    ] {
        let x = values(b * cin * t, 21);
        let w = values(cout * cin * kk, 22);
        let s = ConvSpec {
            pad_end: pads.1,
            ..spec(kk, 1, dil, pads.0, Precision::F16)
        };
        let want = host_conv(&x, [b, cin, t], &w, [cout, cin, kk], &s);
        let want = want.as_f32().unwrap();
        let t_out = want.len() / (b * cout);
        let packed = to_half_bits(&mma::pack_weight(&w, cout, cin, kk));
        let xh = to_half_bits(&x);
        let tile = mma::tile(cout);
        let (gx, gy) = (t_out.div_ceil(tile.t), cout.div_ceil(tile.co));
        // Runs every block of the kernel for input `xn`, output `on`, in `splits` parts.
        let conv = |out: *mut c_void, input: *const c_void, xn: char, on: char, splits: usize| {
            let gz = b * splits;
            let name = match splits {
                1 => mma::name(cout, xn == 'h', on == 'h'),
                _ => mma::split_name(cout, xn == 'h'),
            };
            for (z, y, xb) in
                (0..gz).flat_map(|z| (0..gy).flat_map(move |y| (0..gx).map(move |xb| (z, y, xb))))
            {
                let f: ConvMma = k.tile(
                    &name,
                    (gy as u32, gz as u32),
                    (xb as u32, y as u32, z as u32),
                );
                let d = [cout, cin, t, t_out, kk, dil, pads.0, splits].map(|v| v as i32);
                // SAFETY: `out` holds splits·b·cout·t_out outputs of the kernel's type, `input`
                // b·cin·t inputs, `packed` the weights `pack_weight` laid out for these sizes.
                unsafe {
                    f(
                        out,
                        input,
                        packed.as_ptr(),
                        d[0],
                        d[1],
                        d[2],
                        d[3],
                        d[4],
                        d[5],
                        d[6],
                        d[7],
                    )
                };
            }
        };
        for splits in 1..=3 {
            let case = format!("b{b} cin{cin} cout{cout} t{t} k{kk} d{dil} p{pads:?} in {splits}");
            for (input, xn) in [
                (x.as_ptr().cast::<c_void>(), 'f'),
                (xh.as_ptr().cast(), 'h'),
            ] {
                let (mut wide, mut narrow) =
                    (vec![f32::NAN; want.len()], vec![u16::MAX; want.len()]);
                let mut parts = vec![f32::NAN; splits * want.len()];
                for (out, on) in [
                    (wide.as_mut_ptr().cast::<c_void>(), 'f'),
                    (narrow.as_mut_ptr().cast(), 'h'),
                ] {
                    if splits == 1 {
                        conv(out, input, xn, on, 1);
                        continue;
                    }
                    conv(parts.as_mut_ptr().cast(), input, xn, 'f', splits);
                    let sum: MmaSum = k.flat(mma::sum_name(on == 'h'));
                    // SAFETY: `parts` holds `splits` partial outputs of `want.len()` each, `out`
                    // one output.
                    unsafe { sum(want.len() as i64, out, parts.as_ptr(), splits as i32) };
                }
                assert_eq!(wide, want, "{case}: FP32 output from {xn} input");
                assert_eq!(
                    narrow,
                    to_half_bits(want),
                    "{case}: FP16 output from {xn} input"
                );
            }
        }
    }
}

/// The row reductions (a warp per row on the GPU) against the host ops: mean, sum and max over
/// the last axis and softmax, for rows shorter and longer than a warp, with a last block that
/// holds fewer than its rows (those must be left alone).
#[test]
fn row_reductions_match_the_host_ops() {
    use crate::tts::cuda::device::kernels::ROWS_PER_BLOCK;
    use crate::tts::cuda::ops::reduce::{reduce, softmax};
    use crate::tts::cuda::program::op::ReduceKind;
    type Reduce = unsafe extern "C" fn(i64, *mut f32, *const f32, i64, i32);
    type Softmax = unsafe extern "C" fn(i64, *mut f32, *const f32, i64);
    let k = Kernels::build(&fixed_source());
    for (rows, dim) in [(11usize, 16usize), (3, 192), (20, 71)] {
        let x = values(rows * dim, (rows * dim) as u64);
        let t = Tensor::f32(vec![rows, dim], x.clone());
        let blocks = rows.div_ceil(ROWS_PER_BLOCK) as u32;
        // Runs every block into as many results as `want` holds (and one more that must stay
        // untouched), then compares them with `want`.
        let check = |want: &Tensor, what: &str, launch: &dyn Fn(u32, *mut f32)| {
            let want = want.as_f32().unwrap();
            let mut got = vec![-9f32; want.len() + 1];
            for b in 0..blocks {
                launch(b, got.as_mut_ptr());
            }
            assert_eq!(got[want.len()], -9.0, "{what} wrote past its rows");
            close(&got[..want.len()], want, what);
        };
        for (kind, code) in [
            (ReduceKind::Mean, 0),
            (ReduceKind::Sum, 1),
            (ReduceKind::Max, 2),
        ] {
            let want = reduce(&t, kind, &[-1], false).unwrap();
            check(&want, &format!("{kind:?} {rows}x{dim}"), &|b, out| {
                // SAFETY: `out` holds a result per row; every read lies inside `x`.
                unsafe {
                    k.tile::<Reduce>("reduce_rows_f32", (1, 1), (b, 0, 0))(
                        rows as i64,
                        out,
                        x.as_ptr(),
                        dim as i64,
                        code,
                    )
                }
            });
        }
        let want = softmax(&t, -1).unwrap();
        check(&want, &format!("softmax {rows}x{dim}"), &|b, out| {
            // SAFETY: `out` holds a row of results per row of `x`.
            unsafe {
                k.tile::<Softmax>("softmax_rows_f32", (1, 1), (b, 0, 0))(
                    rows as i64,
                    out,
                    x.as_ptr(),
                    dim as i64,
                )
            }
        });
    }
}
