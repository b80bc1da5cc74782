//! The decoder's FP16 convolutions as one implicit-GEMM kernel on the tensor cores.
//!
//! im2col wrote each input element once per tap (`k` times) before cuBLAS read it back: at the
//! buckets that operand was a quarter of the GPU time (docs/gpu.md, fourth session). Here a block
//! stages a 16-channel slice of the input span its output tile needs in shared memory once and
//! runs every tap from there, so the input is read about once and nothing is written but the
//! output. The input is rounded to FP16 exactly as im2col_f16 rounds it and the products are
//! summed in FP32, so only the order of the sums differs from the GEMM path.
//!
//! Weights are packed once per engine load ([`pack_weight`]) so that a block's slice of them is
//! one contiguous run. The same source compiles as host C++ for the CPU tests: there one thread
//! runs the whole block, warp by warp and lane by lane, and `mma_16816` is computed from the
//! lanes' fragments by the layout PTX documents, so the tests check the fragment loads too.

/// A block's tile: output channels by output positions, over eight warps of 32 by 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    /// Output channels per block.
    pub co: usize,
    /// Output positions per block.
    pub t: usize,
}

/// The tiles the kernels are built for: the wide one, and a narrow one for layers of at most 32
/// channels (the decoder's last resblocks: a third of a pass's positions), where half of the wide
/// tile's warps would multiply rows of zero weights.
const TILES: [Tile; 2] = [Tile { co: 32, t: 256 }, Tile { co: 64, t: 128 }];

/// The tile for `cout` output channels: the narrowest that spans them, else the widest.
pub fn tile(cout: usize) -> Tile {
    TILES
        .into_iter()
        .find(|t| cout <= t.co)
        .unwrap_or(TILES[TILES.len() - 1])
}

/// Input channels per staged slice: the tensor-core step's K.
pub const SLICE: usize = 16;
/// The largest kernel the weight stage holds (the voices' resblocks use 3, 7 and 11).
pub const MAX_TAPS: usize = 11;
/// The widest reach `dilation·(k − 1)` the input stage holds past its tile.
pub const MAX_REACH: usize = 128;

/// Whether a convolution of these dimensions runs on this kernel (stride 1 is the caller's check).
pub fn fits(cin: usize, k: usize, dilation: usize) -> bool {
    cin > 0
        && cin.is_multiple_of(SLICE)
        && (1..=MAX_TAPS).contains(&k)
        && dilation * (k - 1) <= MAX_REACH
}

/// `[cout][cin][k]` weights in the order the kernel stages them: per block of [`tile`]`(cout).co`
/// output channels, per slice of [`SLICE`] input channels, per tap, a `[co][SLICE]` matrix
/// (output channels past `cout` are zero).
pub fn pack_weight(w: &[f32], cout: usize, cin: usize, k: usize) -> Vec<f32> {
    let co = tile(cout).co;
    let (tiles, slices) = (cout.div_ceil(co), cin / SLICE);
    let mut out = vec![0.0; tiles * slices * k * co * SLICE];
    // Row by row in the packed order: no division per weight (a voice has about 11 M of them,
    // packed while the engine loads).
    let mut r = 0;
    for tile in 0..tiles {
        for slice in 0..slices {
            for tap in 0..k {
                for row in 0..co {
                    let o = tile * co + row;
                    if o < cout {
                        for (c, v) in out[r..r + SLICE].iter_mut().enumerate() {
                            *v = w[(o * cin + slice * SLICE + c) * k + tap];
                        }
                    }
                    r += SLICE;
                }
            }
        }
    }
    out
}

/// The kernel's source: `conv_mma{co}_{x}{o}` for a tile of `co` output channels, FP32 (`f`) or
/// FP16 (`h`) input `x` and output `o`, and `conv_mma{co}_{x}f_split` for the parts of a split
/// one (`splits`). The whole kernels are instantiated with one part as a constant: the split's
/// indices cost the wide launches registers (a fourth block per multiprocessor), 9 % at the
/// buckets when they were one kernel.
pub fn source() -> String {
    let mut src = format!(
        "#define MMA_KC {SLICE}\n#define MMA_KMAX {MAX_TAPS}\n#define MMA_REACH {MAX_REACH}\n"
    );
    src.push_str(SOURCE);
    for (o, ot) in [("f", "float"), ("h", "unsigned short")] {
        src.push_str(&format!(
            "extern \"C\" __global__ void conv_mma_sum_{o}(i64 n, {ot}* out, const float* part, \
             int splits) {{ LOOP(n) {{ float s = 0.f; for (int p = 0; p < splits; ++p) \
             s += part[(i64)p * n + i]; stf(out + i, s); }} }}\n"
        ));
    }
    for tile in TILES {
        for (x, xt) in [(false, "float"), (true, "unsigned short")] {
            let kernels = [
                (kernel_name(tile, x, false), "float", false),
                (kernel_name(tile, x, true), "unsigned short", false),
                (split_kernel_name(tile, x), "float", true),
            ];
            for (name, ot, split) in kernels {
                let (co, t) = (tile.co, tile.t);
                src.push_str(&format!(
                    "extern \"C\" __global__ void {name}({ot}* out, const {xt}* x, \
                     const unsigned short* w, int cout, int cin, int t_in, int t_out, int k, \
                     int dil, int pad, int splits) {{ conv_mma_at<{co}, {t}, {split}>(out, x, w, \
                     cout, cin, t_in, t_out, k, dil, pad, splits); }}\n"
                ));
            }
        }
    }
    src
}

/// The kernel for a convolution of `cout` output channels, input and output FP16 or not.
pub fn name(cout: usize, half_in: bool, half_out: bool) -> String {
    kernel_name(tile(cout), half_in, half_out)
}

fn kernel_name(tile: Tile, half_in: bool, half_out: bool) -> String {
    let h = |half| if half { 'h' } else { 'f' };
    format!("conv_mma{}_{}{}", tile.co, h(half_in), h(half_out))
}

/// The kernel for one part of a split convolution (FP32 partial sums) of `cout` output channels.
pub fn split_name(cout: usize, half_in: bool) -> String {
    split_kernel_name(tile(cout), half_in)
}

fn split_kernel_name(tile: Tile, half_in: bool) -> String {
    format!("{}_split", kernel_name(tile, half_in, false))
}

/// The kernel that adds up the parts of a split convolution into an FP32 or FP16 output.
pub fn sum_name(half_out: bool) -> &'static str {
    if half_out {
        "conv_mma_sum_h"
    } else {
        "conv_mma_sum_f"
    }
}

/// The kernel names [`source`] defines.
pub fn names() -> impl Iterator<Item = String> {
    TILES
        .into_iter()
        .flat_map(|tile| {
            [(false, false), (false, true), (true, false), (true, true)]
                .into_iter()
                .map(move |(i, o)| kernel_name(tile, i, o))
                .chain([false, true].map(move |i| split_kernel_name(tile, i)))
        })
        .chain([false, true].map(|h| sum_name(h).to_owned()))
}

/// Into how many parts a launch of `blocks` blocks splits its `slices` input slices on a GPU of
/// `sms` multiprocessors: enough parts for about a block per multiprocessor, each of at least two
/// slices, at most 8 (the sums then read 8 partial outputs); 1 for launches of at least half
/// that many blocks. A launch of few blocks (a batch-1 sentence's flow: 24 blocks of 12 slices,
/// 36 us on the H200's 132) leaves most of the GPU idle while each block walks every slice.
pub fn splits(blocks: usize, slices: usize, sms: usize) -> usize {
    if blocks == 0 || blocks * 2 > sms {
        return 1;
    }
    (sms / blocks).min(slices / 2).clamp(1, 8)
}

const SOURCE: &str = r#"
// Both stages keep 16 channels a row, position by position for the input and output channel by
// output channel for the weights, with 8 elements of padding: the 8 rows a fragment load touches
// then fall in different banks, and each lane reads its two channels of a row in one 32-bit load
// at any tap's shift (the input's rows are positions, so a shift moves whole rows).
#define MMA_RS (MMA_KC + 8)
struct alignas(16) mma_u4 { unsigned a, b, c, d; };
#ifdef __CUDACC__
// On the GPU each thread is one lane of one warp: its accumulators are its own fragment.
#define MMA_SLOTS 1
#define MMA_WARPS(w) for (int w = (int)(threadIdx.x >> 5), w##_end = w + 1; w < w##_end; ++w)
#define MMA_LANES(l) for (int l = (int)(threadIdx.x & 31), l##_end = l + 1; l < l##_end; ++l)
#define MMA_SLOT(w, l) 0
__device__ __forceinline__ unsigned mma_pair(const unsigned short* p) { return *(const unsigned*)p; }
__device__ __forceinline__ void mma_16816(float* c, const unsigned* a, const unsigned* b) {
#if __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#else
// On the host one thread runs the block: it holds every lane of every warp.
#define MMA_SLOTS 256
#define MMA_WARPS(w) for (int w = 0; w < 8; ++w)
#define MMA_LANES(l) for (int l = 0; l < 32; ++l)
#define MMA_SLOT(w, l) ((w) * 32 + (l))
inline unsigned mma_pair(const unsigned short* p) { return (unsigned)p[0] | ((unsigned)p[1] << 16); }
#endif
__device__ __forceinline__ unsigned short ldh(float v) { return f2h(v); }
__device__ __forceinline__ unsigned short ldh(unsigned short h) { return h; }
// Two adjacent outputs in one store (the caller checks that p is aligned for it).
#ifdef __CUDACC__
struct alignas(8) mma_f2 { float a, b; };
__device__ __forceinline__ void stf2(float* p, float a, float b) { *(mma_f2*)p = mma_f2{a, b}; }
__device__ __forceinline__ void stf2(unsigned short* p, float a, float b) { *(unsigned*)p = (unsigned)f2h(a) | ((unsigned)f2h(b) << 16); }
#else
template <typename O> inline void stf2(O* p, float a, float b) { stf(p, a); stf(p + 1, b); }
#endif
// A fragment (16x16, row-major, rows MMA_RS apart from w): lane l holds rows l/4 and l/4 + 8,
// columns 2(l%4) + {0, 1} and those + 8.
__device__ __forceinline__ void mma_frag_a(unsigned* a, const unsigned short* w, int lane) {
  int g = lane >> 2, c = (lane & 3) * 2;
  a[0] = mma_pair(w + g * MMA_RS + c);
  a[1] = mma_pair(w + (g + 8) * MMA_RS + c);
  a[2] = mma_pair(w + g * MMA_RS + c + 8);
  a[3] = mma_pair(w + (g + 8) * MMA_RS + c + 8);
}
// B fragment (16x8, column-major: column n is the position at x + n·MMA_RS, its 16 rows the
// channels there): lane l holds column l/4, rows 2(l%4) + {0, 1} and those + 8.
__device__ __forceinline__ void mma_frag_b(unsigned* b, const unsigned short* x, int lane) {
  const unsigned short* p = x + (lane >> 2) * MMA_RS + (lane & 3) * 2;
  b[0] = mma_pair(p);
  b[1] = mma_pair(p + 8);
}
#ifndef __CUDACC__
// mma.sync's semantics from the lanes' fragments, in the layout of the PTX ISA (m16n8k16, .f16):
// the A and B the warp holds are rebuilt, multiplied, and each lane's C part updated.
inline float mma_lo(unsigned v) { return h2f((unsigned short)(v & 0xffff)); }
inline float mma_hi(unsigned v) { return h2f((unsigned short)(v >> 16)); }
inline void mma_warp(float (*c)[4], unsigned (*a)[4], unsigned (*b)[2]) {
  float am[16][16], bm[16][8];
  for (int l = 0; l < 32; ++l) {
    int g = l >> 2, t = (l & 3) * 2;
    for (int h = 0; h < 4; ++h) {
      int row = g + (h & 1) * 8, col = t + (h >> 1) * 8;
      am[row][col] = mma_lo(a[l][h]); am[row][col + 1] = mma_hi(a[l][h]);
    }
    for (int h = 0; h < 2; ++h) { bm[t + h * 8][g] = mma_lo(b[l][h]); bm[t + 1 + h * 8][g] = mma_hi(b[l][h]); }
  }
  for (int l = 0; l < 32; ++l) {
    int g = l >> 2, t = (l & 3) * 2;
    for (int r = 0; r < 4; ++r) {
      int row = g + (r >> 1) * 8, col = t + (r & 1);
      float s = 0.f;
      for (int kk = 0; kk < 16; ++kk) s += am[row][kk] * bm[kk][col];
      c[l][r] += s;
    }
  }
}
#endif
// One tap of one staged slice for warp w of a block whose warps lie WN to a row of warps: its
// 32x32 part of the tile (2 by 4 MMAs). acc holds the warp's lanes from MMA_SLOT(w, 0) on (one on
// the GPU, 32 on the host).
template <int WN>
__device__ __forceinline__ void mma_warp_tap(float (*acc)[2][4][4], const unsigned short* ws, const unsigned short* xs, int w) {
  const unsigned short* wa = ws + (w / WN) * 32 * MMA_RS;
  const unsigned short* xb = xs + (w % WN) * 32 * MMA_RS;
#ifdef __CUDACC__
  int lane = threadIdx.x & 31;
  unsigned a[2][4], b[4][2];
  for (int mi = 0; mi < 2; ++mi) mma_frag_a(a[mi], wa + mi * 16 * MMA_RS, lane);
  for (int ni = 0; ni < 4; ++ni) mma_frag_b(b[ni], xb + ni * 8 * MMA_RS, lane);
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 4; ++ni) mma_16816(acc[0][mi][ni], a[mi], b[ni]);
#else
  unsigned a[2][32][4], b[4][32][2];
  float c[32][4];
  for (int l = 0; l < 32; ++l) {
    for (int mi = 0; mi < 2; ++mi) mma_frag_a(a[mi][l], wa + mi * 16 * MMA_RS, l);
    for (int ni = 0; ni < 4; ++ni) mma_frag_b(b[ni][l], xb + ni * 8 * MMA_RS, l);
  }
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 4; ++ni) {
      for (int l = 0; l < 32; ++l) for (int r = 0; r < 4; ++r) c[l][r] = acc[l][mi][ni][r];
      mma_warp(c, a[mi], b[ni]);
      for (int l = 0; l < 32; ++l) for (int r = 0; r < 4; ++r) acc[l][mi][ni][r] = c[l][r];
    }
#endif
}
// out[b][co][t] = sum over ci, tap of w[co][ci][tap] * x[b][ci][t + tap*dil - pad] (stride 1).
// A block computes TM output channels by TN positions (`mma::TILES`: eight warps of 32 by 32).
// Grid: x over TN output positions, y over TM output channels, z over the items and, within an
// item, the `splits` parts of its input slices; 256 threads. With more than one part, part p of
// item b writes its partial sums (FP32) at [p][b][co][t] and conv_mma_sum adds them up.
// w is packed by tile, slice, tap (`pack_weight`); cin is a multiple of MMA_KC.
template <int TM, int TN, bool SPLIT, typename X, typename O>
__device__ __forceinline__ void conv_mma_at(O* out, const X* x, const unsigned short* w, int cout, int cin, int t_in, int t_out, int k, int dil, int pad, int splits) {
  const int parts = SPLIT ? splits : 1;
  constexpr int WN = TN / 32;
  static_assert(TM * TN == 8 * 32 * 32, "eight warps of 32 by 32");
  __shared__ unsigned short xs[(TN + MMA_REACH) * MMA_RS] __attribute__((aligned(16)));
  __shared__ unsigned short ws[MMA_KMAX * TM * MMA_RS] __attribute__((aligned(16)));
  const int b = (int)blockIdx.z / parts, part = (int)blockIdx.z % parts, items = (int)gridDim.z / parts;
  const int t0 = (int)blockIdx.x * TN, co0 = (int)blockIdx.y * TM;
  const int span = TN + dil * (k - 1), slices = cin / MMA_KC;
  const int sl_end = (part + 1) * slices / parts;
  float acc[MMA_SLOTS][2][4][4];
  for (int s = 0; s < MMA_SLOTS; ++s)
    for (int mi = 0; mi < 2; ++mi)
      for (int ni = 0; ni < 4; ++ni)
        for (int r = 0; r < 4; ++r) acc[s][mi][ni][r] = 0.f;
  for (int sl = part * slices / parts; sl < sl_end; ++sl) {
    __syncthreads();
    // The slice's input span: a thread gathers 8 channels of one position (neighbouring threads
    // read neighbouring positions of each channel) and stores them as one 16-byte row half.
    const X* xc = x + ((i64)b * cin + (i64)sl * MMA_KC) * t_in;
    for (int h = 0; h < 2; ++h)
      for (int j = (int)threadIdx.x; j < span; j += (int)blockDim.x) {
        const int p = t0 - pad + j;
        unsigned u[4] = {0u, 0u, 0u, 0u};
        if (p >= 0 && p < t_in) {
          const X* src = xc + (i64)(h * 8) * t_in + p;
          for (int c = 0; c < 4; ++c)
            u[c] = (unsigned)ldh(src[(i64)(2 * c) * t_in]) | ((unsigned)ldh(src[(i64)(2 * c + 1) * t_in]) << 16);
        }
        *(mma_u4*)(xs + j * MMA_RS + h * 8) = mma_u4{u[0], u[1], u[2], u[3]};
      }
    // The slice's weights, k taps of [TM][MMA_KC], one contiguous run: 16 bytes a copy.
    const mma_u4* wc = (const mma_u4*)(w + (((i64)blockIdx.y * slices + sl) * k) * TM * MMA_KC);
    for (int q = (int)threadIdx.x; q < k * TM * 2; q += (int)blockDim.x)
      *(mma_u4*)(ws + (q >> 1) * MMA_RS + (q & 1) * 8) = wc[q];
    __syncthreads();
    for (int tap = 0; tap < k; ++tap) {
      MMA_WARPS(wp) mma_warp_tap<WN>(acc + MMA_SLOT(wp, 0), ws + tap * TM * MMA_RS, xs + tap * dil * MMA_RS, wp);
    }
  }
  // A lane's outputs come in pairs of adjacent positions: one store each where the pair is
  // whole and aligned for it.
  MMA_WARPS(wp) MMA_LANES(l) {
    const int g = l >> 2, c = (l & 3) * 2;
    for (int mi = 0; mi < 2; ++mi)
      for (int ni = 0; ni < 4; ++ni)
        for (int h = 0; h < 2; ++h) {
          const int co = co0 + (wp / WN) * 32 + mi * 16 + g + h * 8;
          const int t = t0 + (wp % WN) * 32 + ni * 8 + c;
          if (co >= cout || t >= t_out) continue;
          const i64 at = (((i64)part * items + b) * cout + co) * t_out + t;
          const float* v = acc[MMA_SLOT(wp, l)][mi][ni] + 2 * h;
          if (t + 1 < t_out && (at & 1) == 0) stf2(out + at, v[0], v[1]);
          else {
            stf(out + at, v[0]);
            if (t + 1 < t_out) stf(out + at + 1, v[1]);
          }
        }
  }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_launches_of_few_blocks_split_their_slices() {
        // The flow of a batch-1 sentence on the H200: 24 blocks, 12 slices.
        assert_eq!(splits(24, 12, 132), 5);
        assert_eq!(splits(12, 12, 132), 6, "each part keeps two slices");
        assert_eq!(splits(2, 64, 132), 8, "at most 8 parts");
        assert_eq!(splits(67, 12, 132), 1, "more than half a wave is enough");
        assert_eq!(splits(66, 12, 132), 2);
        assert_eq!(splits(24, 3, 132), 1, "too few slices to share");
        assert_eq!(splits(0, 12, 132), 1);
    }

    #[test]
    fn fits_only_what_the_stages_hold() {
        assert!(fits(256, 11, 5));
        assert!(fits(16, 1, 1));
        assert!(!fits(24, 3, 1), "channels not a multiple of the slice");
        assert!(!fits(0, 3, 1));
        assert!(!fits(32, 12, 1), "more taps than the weight stage holds");
        assert!(!fits(32, 0, 1));
        assert!(!fits(32, 3, 65), "reach past the input stage");
        assert!(fits(32, 3, 64));
    }

    #[test]
    fn packed_weights_run_by_tile_slice_tap() {
        let (cout, cin, k) = (70, 32, 3);
        let w: Vec<f32> = (0..cout * cin * k).map(|i| i as f32).collect();
        let p = pack_weight(&w, cout, cin, k);
        assert_eq!(tile(cout), Tile { co: 64, t: 128 });
        assert_eq!(p.len(), 2 * 2 * k * 64 * SLICE);
        let at = |tile: usize, slice: usize, tap: usize, co: usize, c: usize| {
            p[(((tile * 2 + slice) * k + tap) * 64 + co) * SLICE + c]
        };
        assert_eq!(at(0, 0, 0, 0, 0), w[0]);
        assert_eq!(at(0, 1, 2, 5, 3), w[(5 * cin + 19) * k + 2]);
        assert_eq!(at(1, 0, 1, 5, 15), w[(69 * cin + 15) * k + 1]);
        assert_eq!(at(1, 1, 0, 6, 0), 0.0, "channel 70 is past cout");
    }

    #[test]
    fn narrow_layers_pack_into_the_narrow_tile() {
        let (cout, cin, k) = (20, 16, 3);
        let w: Vec<f32> = (0..cout * cin * k).map(|i| i as f32 + 1.0).collect();
        let p = pack_weight(&w, cout, cin, k);
        assert_eq!(tile(cout), Tile { co: 32, t: 256 });
        assert_eq!(p.len(), k * 32 * SLICE);
        assert_eq!(p[(2 * 32 + 19) * SLICE + 4], w[(19 * cin + 4) * k + 2]);
        assert!(
            p[(32 + 20) * SLICE..2 * 32 * SLICE]
                .iter()
                .all(|&v| v == 0.0)
        );
        assert_eq!(tile(32).co, 32);
        assert_eq!(name(33, true, false), "conv_mma64_hf");
        // Four whole kernels and two split ones per tile, and the two sums.
        assert_eq!(names().count(), 14);
        assert_eq!(split_name(20, true), "conv_mma32_hf_split");
    }
}
