// gpu.ref64 device code: a portable scalar kernel (every target) and an FP64 tensor-core kernel
// (mma.sync m16n8k8 f64, sm_90). Contract in attest/kernels/gpu/attn_fwd_ref64.hpp.
#include "attest/kernels/gpu/attn_fwd_ref64.hpp"
#include "attest/kernels/gpu/ref64_math.hpp"

#include <cmath>
#include <string>

#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;

constexpr int kMaskNone = static_cast<int>(Mask::none), kMaskTl = static_cast<int>(Mask::causal_tl);

// Plain-data copy of Ref64Args for the kernel parameter block (Mask as int, no C++ enums with
// host-only helpers involved).
struct Params {
  i64 batch, heads_q, heads_kv, seqlen_q, seqlen_kv, head_dim, head_dim_v;
  int mask;
  double scale;
  const i64* cu_q;
  const i64* cu_kv;
  TensorRef q, k, v, out, lse;
  // K/V tile copies of the MMA path (set by the host, kv_copy_mode): 0 element by element with
  // 64-bit offsets; 1 element by element with 32-bit offsets inside the tile; 2 the same in
  // 16-byte pieces (innermost stride 1, every other stride and both bases 16-byte aligned).
  int kv_copy;
  // ref64::kExpTab, copied here by the host: a namespace-scope constexpr array cannot be indexed
  // in device code; the launch parameters sit in constant memory.
  double exp_tab[ref64::kExpTable];
};

__device__ inline i64 len_q(const Params& p, i64 b) { return p.cu_q ? p.cu_q[b + 1] - p.cu_q[b] : p.seqlen_q; }
__device__ inline i64 len_kv(const Params& p, i64 b) { return p.cu_kv ? p.cu_kv[b + 1] - p.cu_kv[b] : p.seqlen_kv; }

// Visible keys [0, hi) of query row i, clamped to [0, len_kv] (Problem::visible_keys).
__device__ inline i64 visible(const Params& p, i64 lq, i64 lk, i64 i) {
  i64 hi = lk;
  if (p.mask == kMaskTl) hi = i + 1;
  else if (p.mask != kMaskNone) hi = i + 1 + lk - lq;
  hi = hi < lk ? hi : lk;
  return hi > 0 ? hi : 0;
}

// Element offset of (b, token s, head h, channel d); ragged tensors index tokens cu[b] + s.
__device__ inline i64 offset(const TensorRef& t, const i64* cu, i64 b, i64 s, i64 h, i64 d) {
  if (cu) return (cu[b] + s) * t.stride[1] + h * t.stride[2] + d * t.stride[3];
  return b * t.stride[0] + s * t.stride[1] + h * t.stride[2] + d * t.stride[3];
}

template <class TIn>
__device__ inline double load(const TensorRef& t, i64 off) {
  return static_cast<double>(static_cast<const TIn*>(t.data)[off]);
}

__device__ inline void store(const TensorRef& t, i64 off, double v) {
  void* data = const_cast<void*>(t.data);  // out and lse: the caller's writable buffers
  if (t.dtype == DType::f64) static_cast<double*>(data)[off] = v;
  else static_cast<float*>(data)[off] = static_cast<float>(v);
}

// Max that keeps NaN: once a NaN logit is seen the row stays NaN, as in the reference. Selects,
// not branches: it runs on every logit of the MMA path.
__device__ inline double nan_max(double a, double b) {
  const double m = a > b ? a : b;
  return (a != a || b != b) ? a + b : m;  // a + b is NaN when either is
}

__device__ inline void write_lse(const Params& p, i64 b, i64 h, i64 i, double m, double l) {
  if (p.lse.data == nullptr) return;
  const i64 tok = p.cu_q ? p.cu_q[b] + i : i;
  const i64 off = (p.cu_q ? 0 : b * p.lse.stride[0]) + h * p.lse.stride[1] + tok * p.lse.stride[2];
  // l == 0: no visible key or all visible logits -inf. NaN l falls through to m + log(l) = NaN.
  store(p.lse, off, l == 0.0 ? -INFINITY : m + log(l));
}

// ---------------------------------------------------------------------------------------------
// Portable path: one block per (query row, head); threads split the keys of a tile for the dot
// products and the channels of V for the accumulation. Every reduction is a fixed tree or a
// fixed sequential loop, so the result does not depend on scheduling. Block size is a power of
// two; no code depends on the warp size.
constexpr int kPortableThreads = 128;

template <class TIn>
__global__ void __launch_bounds__(kPortableThreads) ref64_portable(Params p) {
  extern __shared__ double smem[];
  const int nt = blockDim.x, tid = threadIdx.x;
  double* qs = smem;                   // [head_dim]
  double* acc = qs + p.head_dim;       // [head_dim_v]
  double* ps = acc + p.head_dim_v;     // [nt] logits, then probabilities
  double* red = ps + nt;               // [nt] reduction scratch

  const i64 b = blockIdx.x / p.seqlen_q, i = blockIdx.x % p.seqlen_q, h = blockIdx.y;
  const i64 lq = len_q(p, b), lk = len_kv(p, b);
  if (i >= lq) return;  // padding rows of a ragged batch: uniform over the block
  const i64 g = h / (p.heads_q / p.heads_kv);
  const i64 hi = visible(p, lq, lk, i);

  for (i64 d = tid; d < p.head_dim; d += nt) qs[d] = load<TIn>(p.q, offset(p.q, p.cu_q, b, i, h, d));
  for (i64 d = tid; d < p.head_dim_v; d += nt) acc[d] = 0.0;
  __syncthreads();

  double m = -INFINITY, l = 0.0;
  for (i64 j0 = 0; j0 < hi; j0 += nt) {
    const i64 cnt = hi - j0 < nt ? hi - j0 : nt;
    const i64 j = j0 + tid;
    double s = -INFINITY;
    if (tid < cnt) {
      double dot = 0.0;
      for (i64 d = 0; d < p.head_dim; ++d) dot += qs[d] * load<TIn>(p.k, offset(p.k, p.cu_kv, b, j, g, d));
      s = p.scale * dot;
      red[tid] = s;
    } else {
      red[tid] = -INFINITY;
    }
    __syncthreads();
    for (int w = nt / 2; w > 0; w /= 2) {
      if (tid < w) red[tid] = nan_max(red[tid], red[tid + w]);
      __syncthreads();
    }
    const double m_new = nan_max(m, red[0]);
    const double shift = m_new == -INFINITY ? 0.0 : m_new;
    const double alpha = exp(m - shift);
    __syncthreads();  // everyone has read red[0]
    if (tid < cnt) ps[tid] = exp(s - shift);
    __syncthreads();
    double tile_sum = 0.0;  // every thread sums in the same order: identical l everywhere
    for (i64 jj = 0; jj < cnt; ++jj) tile_sum += ps[jj];
    l = l * alpha + tile_sum;
    for (i64 d = tid; d < p.head_dim_v; d += nt) {
      double a = 0.0;
      for (i64 jj = 0; jj < cnt; ++jj) a += ps[jj] * load<TIn>(p.v, offset(p.v, p.cu_kv, b, j0 + jj, g, d));
      acc[d] = acc[d] * alpha + a;
    }
    m = m_new;
    __syncthreads();  // ps and red are rewritten by the next tile
  }
  for (i64 d = tid; d < p.head_dim_v; d += nt)
    store(p.out, offset(p.out, p.cu_q, b, i, h, d), l == 0.0 ? 0.0 : acc[d] / l);
  if (tid == 0) write_lse(p, b, h, i, m, l);
}

// ---------------------------------------------------------------------------------------------
// Tensor-core path (NVIDIA sm_90). A block of 8 warps owns 128 query rows of one (b, h); each
// warp 16 rows. Per key tile of 16: S = Q K^T (m16n8k8 f64 MMAs from shared memory), masking,
// online softmax in registers, O += P V (MMAs) with P taken straight from the S accumulators:
// the MMA sums over its k index in any order, so the keys of each 8-key group are fed in the
// order the accumulator layout holds them (lane tig has keys 2 tig and 2 tig + 1) and V's rows
// are read in that same order. No P round trip through shared memory.
// The FP64 pipe that runs the MMAs also runs every softmax instruction, so the softmax is kept
// short: exp is ref64_math.hpp's table-driven exp_nonpos (10 instructions, no branch, where the
// library's takes 15 and branches), the row maximum is one compare on unscaled logits.
// K/V tiles: f64 inputs are double-buffered with cp.async (the next tile's copies run during
// this tile's MMAs); f32 inputs are copied raw by cp.async into a staging tile and converted
// to double once per tile (one cvt per element, not one per fragment load).
// The mma instruction is a 32-lane warp operation by definition, so this path is NVIDIA-only
// and its lane arithmetic (quads of 4 lanes) is that instruction's fragment layout, not a
// warp-size assumption of the portable code.
#if defined(ATTEST_GPU_NVIDIA)
constexpr int kMmaWarps = 8, kMmaRows = 16 * kMmaWarps, kMmaKeys = 16;
constexpr int kMmaThreads = 32 * kMmaWarps;

template <class TIn, int D>
constexpr int mma_shared_bytes() {
  // Rows padded by 4 doubles: the fragment loads then hit distinct 8-byte bank pairs (row
  // stride D + 4 = 4 mod 16 pairs). Q; K/V (f64: two stages of K and V; f32: one stage of K and
  // V in double plus the raw f32 staging tile of K and V); each warp's P scratch; the exp table.
  constexpr int kv = sizeof(TIn) == 8 ? 4 * kMmaKeys * (D + 4) * 8 : 2 * kMmaKeys * (D + 4) * 8 + 2 * kMmaKeys * D * 4;
  return kMmaRows * (D + 4) * 8 + kv + kMmaWarps * 16 * (kMmaKeys + 4) * 8 + ref64::kExpTable * 8;
}

// c += a * b for one 16x8x8 f64 tile. Fragments (lane = 4 * grp + tig):
//   a[v]: A[grp + 8 (v & 1)][tig + 4 (v >> 1)]   b[v]: B[tig + 4 v][grp]
//   c[v]: C[grp + 8 (v >> 1)][2 tig + (v & 1)]
__device__ inline void mma_16x8x8(double (&c)[4], const double (&a)[4], const double (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#else
  __trap();
#endif
}

// N-byte (4 or 8) asynchronous global -> shared copy; src_bytes 0 writes zeros, reads nothing.
template <int N>
__device__ inline void cp_async(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src), "n"(N), "r"(src_bytes) : "memory");
#else
  for (int i = 0; i < N; ++i) static_cast<char*>(dst)[i] = src_bytes ? static_cast<const char*>(src)[i] : 0;
#endif
}
__device__ inline void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ inline void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__global__ void mma_selftest_kernel(const double* a, const double* b, double* c) {
  const int lane = threadIdx.x, grp = lane >> 2, tig = lane & 3;
  double fa[4], fb[2], fc[4];
#pragma unroll
  for (int v = 0; v < 4; ++v) fa[v] = a[(grp + 8 * (v & 1)) * 8 + tig + 4 * (v >> 1)];
#pragma unroll
  for (int v = 0; v < 2; ++v) fb[v] = b[(tig + 4 * v) * 8 + grp];
#pragma unroll
  for (int v = 0; v < 4; ++v) fc[v] = c[(grp + 8 * (v >> 1)) * 8 + 2 * tig + (v & 1)];
  mma_16x8x8(fc, fa, fb);
#pragma unroll
  for (int v = 0; v < 4; ++v) c[(grp + 8 * (v >> 1)) * 8 + 2 * tig + (v & 1)] = fc[v];
}

// The MMA path's row maximum: a > b ? a : b, one compare where nan_max takes three FP64-pipe
// instructions. A NaN logit may or may not become the maximum; either way its P is NaN, so l,
// O and the LSE of its row are NaN, as in the reference.
__device__ inline double max_of(double a, double b) { return a > b ? a : b; }
__device__ inline double quad_max(double x) {
  x = max_of(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return max_of(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

// Elements of T in one 16-byte piece of copy mode 2: copy_kv_tile's copy and own_nonfinite's
// check must agree on which elements a thread owns.
template <class T>
inline constexpr int kPieceElems = 16 / sizeof(T);

// Starts the copy of key tile [j0, j0+16) of K and V into `ks`/`vs` (element type TIn, row
// stride ld). Keys at or beyond `max_hi` (seen by no row of the block) are never read: their
// slots get zeros. Modes (Params::kv_copy): the tile's base pointers once per tile and 32-bit
// offsets inside it, in 16-byte pieces where the layout allows (fewer instructions per MMA:
// this loop runs on every tile of every block).
template <class TIn, int D>
__device__ inline void copy_kv_tile(const Params& p, TIn* ks, TIn* vs, int ld, i64 b, i64 g, i64 j0, i64 max_hi) {
  const i64 left = max_hi - j0;
  const int nin = left < kMmaKeys ? static_cast<int>(left) : kMmaKeys;  // rows of the tile to read
  const TIn* k0 = static_cast<const TIn*>(p.k.data);
  const TIn* v0 = static_cast<const TIn*>(p.v.data);
  if (p.kv_copy == 0) {
    for (int idx = threadIdx.x; idx < kMmaKeys * D; idx += kMmaThreads) {
      const int r = idx / D, c = idx % D;
      const bool in = r < nin;
      const i64 ok = in ? offset(p.k, p.cu_kv, b, j0 + r, g, c) : 0;
      const i64 ov = in ? offset(p.v, p.cu_kv, b, j0 + r, g, c) : 0;
      cp_async<sizeof(TIn)>(ks + r * ld + c, k0 + ok, in ? sizeof(TIn) : 0);
      cp_async<sizeof(TIn)>(vs + r * ld + c, v0 + ov, in ? sizeof(TIn) : 0);
    }
  } else {
    const TIn* kb = k0 + offset(p.k, p.cu_kv, b, j0, g, 0);
    const TIn* vb = v0 + offset(p.v, p.cu_kv, b, j0, g, 0);
    const int k1 = static_cast<int>(p.k.stride[1]), k3 = static_cast<int>(p.k.stride[3]);
    const int v1 = static_cast<int>(p.v.stride[1]), v3 = static_cast<int>(p.v.stride[3]);
    if (p.kv_copy == 2) {
      constexpr int W = kPieceElems<TIn>, DW = D / W;  // elements per piece, pieces per row
      for (int idx = threadIdx.x; idx < kMmaKeys * DW; idx += kMmaThreads) {
        const int r = idx / DW, c = (idx % DW) * W;
        const bool in = r < nin;
        cp_async<16>(ks + r * ld + c, in ? kb + (r * k1 + c) : k0, in ? 16 : 0);
        cp_async<16>(vs + r * ld + c, in ? vb + (r * v1 + c) : v0, in ? 16 : 0);
      }
    } else {
      for (int idx = threadIdx.x; idx < kMmaKeys * D; idx += kMmaThreads) {
        const int r = idx / D, c = idx % D;
        const bool in = r < nin;
        cp_async<sizeof(TIn)>(ks + r * ld + c, in ? kb + (r * k1 + c * k3) : k0, in ? sizeof(TIn) : 0);
        cp_async<sizeof(TIn)>(vs + r * ld + c, in ? vb + (r * v1 + c * v3) : v0, in ? sizeof(TIn) : 0);
      }
    }
  }
  cp_async_commit();
}

// Whether a V element this thread copied itself (copy_kv_tile's ownership, which depends on the
// copy mode: elements, or 16-byte pieces of kPieceElems doubles) is not finite: after cp_async_wait its
// own copies are visible to it, another thread's only after a barrier. (Checking element idx
// whatever the mode, as before 2026-12-07, read other threads' pieces in mode 2 before the
// barrier: a race that could miss a non-finite V value.)
template <int D>
__device__ inline int own_nonfinite(const Params& p, const double* vs, int ld) {
  int bad = 0;
  if (p.kv_copy == 2) {
    constexpr int W = kPieceElems<double>, DW = D / W;
    for (int idx = threadIdx.x; idx < kMmaKeys * DW; idx += kMmaThreads) {
      const double* x = vs + (idx / DW) * ld + (idx % DW) * W;
#pragma unroll
      for (int w = 0; w < W; ++w) bad |= !isfinite(x[w]);
    }
  } else {
    for (int idx = threadIdx.x; idx < kMmaKeys * D; idx += kMmaThreads) bad |= !isfinite(vs[(idx / D) * ld + idx % D]);
  }
  return bad;
}

template <class TIn, int D>
__global__ void __launch_bounds__(kMmaThreads, 1) ref64_mma(Params p) {
  constexpr bool kF64 = sizeof(TIn) == 8;
  constexpr int LD = D + 4, LDP = kMmaKeys + 4, NT = D / 8;
  extern __shared__ double smem[];
  double* qs = smem;                // [kMmaRows][LD]
  double* kv = qs + kMmaRows * LD;  // f64: 2 stages x (K, V) [kMmaKeys][LD]; f32: 1 stage, then staging
  double* pw = kv + (kF64 ? 4 : 2) * kMmaKeys * LD;           // [kMmaWarps][16][LDP]: P, fallback route only
  double* etab = pw + kMmaWarps * 16 * LDP;                   // [ref64::kExpTable]: 2^(j/64)
  float* stg = reinterpret_cast<float*>(etab + ref64::kExpTable);  // f32 only: raw K, V [kMmaKeys][D]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, grp = lane >> 2, tig = lane & 3;
  // Heaviest query tiles (most visible keys under causal masks) are scheduled first.
  const i64 b = blockIdx.z, h = blockIdx.y, q0 = static_cast<i64>(gridDim.x - 1 - blockIdx.x) * kMmaRows;
  const i64 lq = len_q(p, b), lk = len_kv(p, b);
  if (q0 >= lq) return;  // uniform over the block
  const i64 g = h / (p.heads_q / p.heads_kv);
  const i64 rows = lq - q0 < kMmaRows ? lq - q0 : kMmaRows;
  // Visibility grows with the row index for every mask, so the first and last rows bound the
  // block: keys below min_hi are visible to every row of the block.
  const i64 max_hi = visible(p, lq, lk, q0 + rows - 1), min_hi = visible(p, lq, lk, q0);
  double* ps = pw + warp * 16 * LDP;
  if (tid < ref64::kExpTable) etab[tid] = p.exp_tab[tid];  // published by the loop's first barrier

  if (max_hi > 0) {
    if constexpr (kF64) copy_kv_tile<double, D>(p, kv, kv + kMmaKeys * LD, LD, b, g, 0, max_hi);
    else copy_kv_tile<float, D>(p, stg, stg + kMmaKeys * D, D, b, g, 0, max_hi);
  }
  for (int idx = tid; idx < kMmaRows * D; idx += kMmaThreads) {
    const int r = idx / D, c = idx % D;
    qs[r * LD + c] = r < rows ? load<TIn>(p.q, offset(p.q, p.cu_q, b, q0 + r, h, c)) : 0.0;
  }

  // This thread's two rows (fragment rows grp and grp + 8 of the warp's 16).
  const int lr[2] = {warp * 16 + grp, warp * 16 + grp + 8};
  i64 hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) hi[r] = lr[r] < rows ? visible(p, lq, lk, q0 + lr[r]) : 0;

  double o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int v = 0; v < 4; ++v) o[n][v] = 0.0;
  double m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0, 0.0};

  int stage = 0;
  for (i64 j0 = 0; j0 < max_hi; j0 += kMmaKeys, stage ^= 1) {
    double* ks = kF64 ? kv + stage * 2 * kMmaKeys * LD : kv;
    double* vs = ks + kMmaKeys * LD;
    const bool more = j0 + kMmaKeys < max_hi;
    int bad = 0;
    if constexpr (kF64) {
      if (more) {
        // The other stage was released by the barrier at the end of the previous tile.
        double* kn = kv + (stage ^ 1) * 2 * kMmaKeys * LD;
        copy_kv_tile<double, D>(p, kn, kn + kMmaKeys * LD, LD, b, g, j0 + kMmaKeys, max_hi);
        cp_async_wait<1>();  // this tile's copies (issued one tile earlier) are complete
      } else {
        cp_async_wait<0>();
      }
      // Each thread checks the V elements it copied itself (visible to it after the wait), on
      // tiles with masked keys only (the only ones whose result is used below).
      if (j0 + kMmaKeys > min_hi) bad = own_nonfinite<D>(p, vs, LD);
    } else {
      cp_async_wait<0>();
      __syncthreads();  // the staging tile is complete; every warp is done with the last tile
      for (int idx = tid; idx < kMmaKeys * D; idx += kMmaThreads) {
        const int r = idx / D, c = idx % D;
        ks[r * LD + c] = static_cast<double>(stg[idx]);
        const double x = static_cast<double>(stg[kMmaKeys * D + idx]);
        vs[r * LD + c] = x;
        bad |= !isfinite(x);
      }
    }
    // A non-finite V value would turn 0 * V of a key masked for some row into NaN inside the
    // MMA; such tiles take the exact per-row scalar route below. Keys below min_hi are masked
    // for no row. The barrier also publishes the tile.
    const int v_nonfinite = __syncthreads_or(j0 + kMmaKeys > min_hi ? bad : 0);
    if constexpr (!kF64) {
      if (more) copy_kv_tile<float, D>(p, stg, stg + kMmaKeys * D, D, b, g, j0 + kMmaKeys, max_hi);  // staging is free
    }

    double s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int v = 0; v < 4; ++v) s[n][v] = 0.0;
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      double a[4];
#pragma unroll
      for (int v = 0; v < 4; ++v) a[v] = qs[(warp * 16 + grp + 8 * (v & 1)) * LD + kk * 8 + tig + 4 * (v >> 1)];
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const double bf[2] = {ks[(n * 8 + grp) * LD + kk * 8 + tig], ks[(n * 8 + grp) * LD + kk * 8 + tig + 4]};
        mma_16x8x8(s[n], a, bf);
      }
    }

    // Masking replaces the logits of invisible keys by -inf, so their K values (NaN included)
    // never reach m, p or l.
    // Keys below min_hi are visible to every row: the compare runs on the tiles that have
    // masked keys only (a uniform branch), in 32 bits relative to the tile.
    double tile_max[2] = {-INFINITY, -INFINITY};
    if (j0 + kMmaKeys <= min_hi) {
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          tile_max[v >> 1] = max_of(tile_max[v >> 1], s[n][v]);
        }
    } else {
      int lim[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const i64 left = hi[r] - j0;
        lim[r] = left <= 0 ? 0 : left < kMmaKeys ? static_cast<int>(left) : kMmaKeys;
      }
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int r = v >> 1;
          s[n][v] = n * 8 + 2 * tig + (v & 1) < lim[r] ? s[n][v] : -INFINITY;
          tile_max[r] = max_of(tile_max[r], s[n][v]);
        }
    }
    double alpha[2], shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The maximum is taken on the unscaled logits: scale > 0 and rounding is monotone, so
      // scale * max(s) is the maximum of the scaled logits, bit for bit (one multiply per row,
      // not one per logit).
      const double m_new = max_of(m[r], p.scale * quad_max(tile_max[r]));
      shift[r] = m_new == -INFINITY ? 0.0 : m_new;
      // exp(0) is exactly 1: an unchanged maximum skips the call, bit for bit the same alpha.
      alpha[r] = m[r] == shift[r] ? 1.0 : ref64::exp_nonpos(m[r] - shift[r], etab);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int r = v >> 1;
        // scale * s - shift rounded twice (no contraction: --fmad=false), so the row maximum's
        // argument is exactly 0 and every other one <= 0 at any logit size (in a row with a NaN
        // logit the maximum may miss a larger value; that row's P, l and O are NaN anyway).
        s[n][v] = ref64::exp_nonpos(p.scale * s[n][v] - shift[r], etab);  // s now holds P
        l[r] += s[n][v];  // per-lane partial; the 4 lanes of a row share alpha, so the partials add up to l
      }
    // x * 1 is x (NaN and infinities included): once no row of the warp has a new maximum the
    // rescale of O is skipped, bit for bit the same O (+1% at b1h24s8192d128, H100;
    // docs/results/complete-gpu/README.md).
    if (__any_sync(0xffffffffu, alpha[0] != 1.0 || alpha[1] != 1.0))
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int v = 0; v < 4; ++v) o[n][v] *= alpha[v >> 1];

    if (!v_nonfinite) {
#pragma unroll
      for (int kk = 0; kk < kMmaKeys / 8; ++kk) {
        // A slot (row grp + 8 rb, k = tig + 4 e) carries key 2 tig + e of group kk: this lane's
        // own s[kk][2 rb + e]. B row k = tig + 4 e is then V's row kk * 8 + 2 tig + e.
        const double a[4] = {s[kk][0], s[kk][2], s[kk][1], s[kk][3]};
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const double bf[2] = {vs[(kk * 8 + 2 * tig) * LD + n * 8 + grp], vs[(kk * 8 + 2 * tig + 1) * LD + n * 8 + grp]};
          mma_16x8x8(o[n], a, bf);
        }
      }
    } else {
      // Exact per-row route (rare: a non-finite V value in a tile with masked keys): P goes
      // through this warp's shared scratch and every visible key's p * v is added in key order;
      // invisible keys are skipped (never 0 * inf).
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int v = 0; v < 4; ++v) ps[(grp + 8 * (v >> 1)) * LDP + n * 8 + 2 * tig + (v & 1)] = s[n][v];
      __syncwarp();
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int r = v >> 1, col = n * 8 + 2 * tig + (v & 1);
          double acc = 0.0;
          for (int jj = 0; jj < kMmaKeys && j0 + jj < hi[r]; ++jj) acc += ps[(grp + 8 * r) * LDP + jj] * vs[jj * LD + col];
          o[n][v] += acc;
        }
      __syncwarp();  // ps is rewritten by this warp's next fallback tile
    }
    if constexpr (kF64) __syncthreads();  // every warp is done with this stage before it is refilled
  }

  double lt[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // (l0 + l1) + (l2 + l3) on every lane of the quad: addition commutes bitwise, so all four
    // lanes hold the same total.
    lt[r] = l[r] + __shfl_xor_sync(0xffffffffu, l[r], 1);
    lt[r] = lt[r] + __shfl_xor_sync(0xffffffffu, lt[r], 2);
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const int r = v >> 1;
      if (lr[r] >= rows) continue;
      const int col = n * 8 + 2 * tig + (v & 1);
      store(p.out, offset(p.out, p.cu_q, b, q0 + lr[r], h, col), lt[r] == 0.0 ? 0.0 : o[n][v] / lt[r]);
    }
  if (tig == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      if (lr[r] < rows) write_lse(p, b, h, q0 + lr[r], m[r], lt[r]);
}
#endif  // ATTEST_GPU_NVIDIA

// The MMA path's K/V copy mode (Params::kv_copy): 32-bit offsets inside a 16-key tile when they
// fit, 16-byte pieces when the innermost stride is 1 and every other stride and both base
// pointers are 16-byte aligned.
int kv_copy_mode(const Ref64Args& a) {
#if defined(ATTEST_GPU_NVIDIA)
  const std::int64_t esize = a.k.dtype == DType::f64 ? 8 : 4, lim = 0x7FFFFFFF;
  bool fits = true, vec = true;
  for (const TensorRef* t : {&a.k, &a.v}) {
    const std::int64_t s1 = t->stride[1], s3 = t->stride[3];
    fits = fits && s1 >= 0 && s3 >= 0 && (kMmaKeys - 1) * s1 + (a.head_dim - 1) * s3 < lim;
    vec = vec && s3 == 1 && reinterpret_cast<std::uintptr_t>(t->data) % 16 == 0;
    for (int d = 0; d < 3; ++d) vec = vec && (t->stride[d] * esize) % 16 == 0;
  }
  return !fits ? 0 : vec ? 2 : 1;
#else
  (void)a;
  return 0;  // no MMA path
#endif
}

Params to_params(const Ref64Args& a) {
  Params p{a.batch, a.heads_q, a.heads_kv, a.seqlen_q, a.seqlen_kv, a.head_dim, a.head_dim_v, static_cast<int>(a.mask),
           a.scale, a.cu_q, a.cu_kv, a.q, a.k, a.v, a.out, a.lse, kv_copy_mode(a), {}};
  for (int j = 0; j < ref64::kExpTable; ++j) p.exp_tab[j] = ref64::kExpTab[j];
  return p;
}

void validate(const Ref64Args& a) {
  auto fail = [](const std::string& s) { throw Error("attn_fwd_ref64: " + s); };
  if (a.batch < 1 || a.heads_q < 1 || a.heads_kv < 1 || a.seqlen_q < 1 || a.seqlen_kv < 1 || a.head_dim < 1 || a.head_dim_v < 1)
    fail("every extent must be >= 1");
  if (a.heads_q % a.heads_kv != 0) fail("heads_q is not a multiple of heads_kv");
  if (!(a.scale > 0) || !std::isfinite(a.scale)) fail("scale must be finite and > 0");
  if ((a.cu_q == nullptr) != (a.cu_kv == nullptr)) fail("ragged problems need both cu_q and cu_kv");
  if (!a.q.data || !a.k.data || !a.v.data || !a.out.data) fail("q, k, v and out must be set");
  if (a.q.dtype != a.k.dtype || a.q.dtype != a.v.dtype) fail("q, k and v must have one element type");
  const auto check = [&](const TensorRef& t, const char* what) {
    if (t.dtype != DType::f32 && t.dtype != DType::f64) fail(std::string(what) + " must be f32 or f64");
    if (!t.device) fail(std::string(what) + " must be device memory (TensorRef::device)");
  };
  check(a.q, "q"), check(a.k, "k"), check(a.v, "v"), check(a.out, "out");
  if (a.lse.data) check(a.lse, "lse");
  if (a.batch * a.seqlen_q > 0x7FFFFFFF || a.heads_q > 65535 || a.batch > 65535) fail("grid too large");
}

}  // namespace

const char* path_name(Ref64Path p) {
  switch (p) {
    case Ref64Path::automatic: return "automatic";
    case Ref64Path::portable: return "portable";
    case Ref64Path::mma: return "mma";
  }
  return "?";
}

Ref64Args ref64_args(const Problem& p) {
  Ref64Args a;
  a.batch = p.batch;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.seqlen_q = p.seqlen_q;
  a.seqlen_kv = p.seqlen_kv;
  a.head_dim = p.head_dim;
  a.head_dim_v = p.head_dim_v;
  a.mask = p.mask;
  a.scale = p.scale();
  return a;
}

Ref64Path ref64_resolve(const Ref64Args& a, Ref64Path requested) {
  if (requested == Ref64Path::portable) return requested;
  std::string why;
#if defined(ATTEST_GPU_NVIDIA)
  int dev = 0;
  ATTEST_GPU_CHECK(hipGetDevice(&dev));
  hipDeviceProp_t prop{};
  ATTEST_GPU_CHECK(hipGetDeviceProperties(&prop, dev));
  if (prop.major != 9) why = "needs sm_90 (device is sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  else if (a.head_dim != a.head_dim_v || (a.head_dim != 64 && a.head_dim != 128))
    why = "needs head_dim == head_dim_v in {64, 128}";
#else
  why = "FP64 MMA path is NVIDIA sm_90 only (AMD MFMA f64 path not written yet)";
  (void)a;
#endif
  if (why.empty()) return Ref64Path::mma;
  if (requested == Ref64Path::mma) throw Error("attn_fwd_ref64: mma path unavailable: " + why);
  return Ref64Path::portable;
}

void attn_fwd_ref64(const Ref64Args& a, Ref64Path path, void* stream) {
  validate(a);
  const Params p = to_params(a);
  const auto st = static_cast<hipStream_t>(stream);
  const bool f64 = a.q.dtype == DType::f64;
  if (ref64_resolve(a, path) == Ref64Path::portable) {
    const dim3 grid(static_cast<unsigned>(a.batch * a.seqlen_q), static_cast<unsigned>(a.heads_q));
    const size_t shared = static_cast<size_t>(a.head_dim + a.head_dim_v + 2 * kPortableThreads) * sizeof(double);
    auto* kernel = f64 ? &ref64_portable<double> : &ref64_portable<float>;
    if (shared > 48 * 1024) ATTEST_GPU_CHECK(hipFuncSetAttributeMaxDynamicSharedMemorySize(kernel, static_cast<int>(shared)));
    kernel<<<grid, kPortableThreads, shared, st>>>(p);
    ATTEST_GPU_CHECK_LAUNCH();
    return;
  }
#if defined(ATTEST_GPU_NVIDIA)
  const dim3 grid(static_cast<unsigned>((a.seqlen_q + kMmaRows - 1) / kMmaRows), static_cast<unsigned>(a.heads_q),
                  static_cast<unsigned>(a.batch));
  auto launch = [&](auto* kernel, int shared) {
    ATTEST_GPU_CHECK(hipFuncSetAttributeMaxDynamicSharedMemorySize(kernel, shared));
    kernel<<<grid, kMmaThreads, shared, st>>>(p);
    ATTEST_GPU_CHECK_LAUNCH();
  };
  if (a.head_dim == 128) {
    if (f64) launch(&ref64_mma<double, 128>, mma_shared_bytes<double, 128>());
    else launch(&ref64_mma<float, 128>, mma_shared_bytes<float, 128>());
  } else {
    if (f64) launch(&ref64_mma<double, 64>, mma_shared_bytes<double, 64>());
    else launch(&ref64_mma<float, 64>, mma_shared_bytes<float, 64>());
  }
#endif
}

namespace detail {
bool mma_16x8x8_selftest(const double* a, const double* b, double* c) {
#if defined(ATTEST_GPU_NVIDIA)
  int dev = 0;
  ATTEST_GPU_CHECK(hipGetDevice(&dev));
  hipDeviceProp_t prop{};
  ATTEST_GPU_CHECK(hipGetDeviceProperties(&prop, dev));
  if (prop.major != 9) return false;
  double* d = nullptr;
  ATTEST_GPU_CHECK(hipMalloc(&d, (128 + 64 + 128) * sizeof(double)));
  try {
    ATTEST_GPU_CHECK(hipMemcpy(d, a, 128 * sizeof(double), hipMemcpyHostToDevice));
    ATTEST_GPU_CHECK(hipMemcpy(d + 128, b, 64 * sizeof(double), hipMemcpyHostToDevice));
    ATTEST_GPU_CHECK(hipMemcpy(d + 192, c, 128 * sizeof(double), hipMemcpyHostToDevice));
    mma_selftest_kernel<<<1, 32>>>(d, d + 128, d + 192);
    ATTEST_GPU_CHECK_LAUNCH();
    ATTEST_GPU_CHECK(hipMemcpy(c, d + 192, 128 * sizeof(double), hipMemcpyDeviceToHost));
  } catch (...) {
    (void)hipFree(d);
    throw;
  }
  ATTEST_GPU_CHECK(hipFree(d));
  return true;
#else
  (void)a, (void)b, (void)c;
  return false;
#endif
}
}  // namespace detail

}  // namespace attest::gpu
