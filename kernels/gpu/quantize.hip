// Device quantizers (attest/kernels/gpu/quantize.hpp). The scalar arithmetic is quantize_math.hpp
// and the per-thread work of the fast path quantize_fast.hpp, both shared with a CPU test; this
// file schedules them.
//
// Fast path (quantize_fast.hpp's plan_fast decides; the common case: unit channel stride, C / V a
// power of two <= 32, aligned rows, 32-bit extents). One kernel per (element format, family, V)
// whose threads own 32 values each (K chunks of V consecutive channels, 16-byte loads, packed
// 8/16-byte code stores), with all pre-transforms in registers (smoothing, rotation with the
// 128-channel FWHT's last two stages across the row's 4 lanes, prescale):
//   casts: element-wise;
//   per_token, mx: the group's lanes combine their maxima by warp shuffles (xor butterflies
//     inside aligned lane segments), every lane then derives the group's scale itself;
//   per_block / per_warp / per_thread: one block per span of R rows; row lanes combine by
//     shuffles, one lane per row then an atomicMax into the span's 1, 4 or 8 shared maxima;
//   per_tensor / per_channel: an amax pass (same loads and pre-transforms; registers, then warp
//     shuffles, then one shared and one global atomicMax per block and group), the scales
//     kernel, then the element-wise codes kernel (the input is read twice).
// The smoothing mean streams the tokens of a 32-channel strip through shared memory (a block's
// threads load, one lane per channel sums in double in token order, as the reference).
//
// Generic path (anything else: other strides, alignments or shapes): the original kernels,
// 64-bit indices:
//   1. smoothing mean (one thread per (slab, channel): sum in double in token order, as the
//      reference), then pre-transforms (smoothing, rotation, prescale) into a contiguous
//      workspace copy, only when the scheme has any;
//   2a. token-local groups (per_block, per_warp, per_thread, per_token, mx, casts): one block per
//      group row span does amax (shared atomicMax on |x| bits), scales and codes in one kernel; the
//      second read of the span hits L1/L2;
//   2b. groups spanning the tensor (per_tensor, per_channel): amax kernel (block partial maxima,
//      one global atomicMax each), a scales kernel, then an elementwise codes kernel.
// The amax is a max over |x| bits (NaN above everything), so its result does not depend on the
// order of the atomics or shuffles: the outputs are deterministic and equal to the reference's.
#include "attest/kernels/gpu/quantize.hpp"

#include <string>

#include "attest/kernels/gpu/quantize_fast.hpp"
#include "runtime.hpp"

namespace attest::gpu {
namespace {

using i64 = std::int64_t;
using namespace qm;

constexpr int kThreads = 256;

/// Source of prepared values: x with its strides and the elementwise pre-transforms applied on
/// the fly (smoothing, then prescale: the reference's order when there is no rotation), or the
/// contiguous workspace copy a rotation wrote (transforms already applied).
struct Src {
  const float* p;
  i64 lead1, s0, s1, st, sc;
  i64 C = 0;
  const float* km = nullptr;  // smoothing means [slab][C], or nullptr
  Smoothing sm = Smoothing::none;
  bool scale = false;         // prescale by `factor`
  float factor = 1.0f;
  __device__ float fix(float v, i64 slab, i64 c) const {
    if (km != nullptr) v = smooth_value(v, km[slab * C + c], sm);
    if (scale) v = v * factor;
    return v;
  }
  __device__ float raw(i64 slab, i64 t, i64 c) const { return p[slab_base(slab) + t * st + c * sc]; }
  __device__ float at(i64 slab, i64 t, i64 c) const { return fix(raw(slab, t, c), slab, c); }
  __device__ i64 slab_base(i64 slab) const { return (slab / lead1) * s0 + (slab % lead1) * s1; }
};

// Thread layout of the row kernels: `tpr` threads per token row (C rounded up to a warp, at most
// the block), blockDim / tpr rows at a time, so element indices need no division.
__device__ inline int threads_per_row(i64 C) {
  const int w = static_cast<int>((C + 31) / 32 * 32);
  return w < static_cast<int>(blockDim.x) ? w : static_cast<int>(blockDim.x);
}

__device__ inline void store_code(void* codes, bool wide, i64 o, std::uint32_t code) {
  if (wide) static_cast<std::uint16_t*>(codes)[o] = static_cast<std::uint16_t>(code);
  else static_cast<std::uint8_t*>(codes)[o] = static_cast<std::uint8_t>(code);
}
__device__ inline void store_scale(void* scales, bool mx, i64 k, std::uint32_t stored) {
  if (mx) static_cast<std::uint8_t*>(scales)[k] = static_cast<std::uint8_t>(stored);
  else static_cast<std::uint32_t*>(scales)[k] = stored;
}

// ---- 1. smoothing mean and pre-transforms ----

__global__ void mean_kernel(Src x, i64 n, i64 T, i64 C, Smoothing sm, const float* mean_in, float* km) {
  const i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= n * C) return;
  const i64 slab = id / C, c = id % C;
  if (mean_in != nullptr) {
    km[id] = mean_in[id];
    return;
  }
  double acc = 0.0;  // token order, as the reference
  for (i64 t = 0; t < T; ++t) acc += static_cast<double>(x.raw(slab, t, c));
  float m = T > 0 ? static_cast<float>(acc / static_cast<double>(T)) : 0.0f;
  if (sm == Smoothing::bf16) m = round_bf16(m);
  km[id] = m;
}

// One thread per (slab, token, piece): a piece is the whole row (h128: 128 channels), one
// 32-channel block (h32_bf16) or one element (no rotation).
__global__ void prepare_kernel(Src x, i64 n, i64 T, i64 C, Scheme s, float factor, const float* km, float* w) {
  const i64 piece = s.rotate == Rotation::none ? 1 : s.rotate == Rotation::h32_bf16 ? 32 : C;
  const i64 per_row = C / piece;
  const i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= n * T * per_row) return;
  const i64 row = id / per_row, c0 = (id % per_row) * piece;
  const i64 slab = row / T, t = row % T;
  float buf[128];
  for (i64 j = 0; j < piece; ++j) {
    float v = x.raw(slab, t, c0 + j);
    if (s.smooth != Smoothing::none) v = smooth_value(v, km[slab * C + c0 + j], s.smooth);
    buf[j] = v;
  }
  rotate_prescale_row(buf, piece, s, factor);
  for (i64 j = 0; j < piece; ++j) w[row * C + c0 + j] = buf[j];
}

// ---- 2a. token-local groups: one block per row span ----

struct RowsArgs {
  Src x;
  Scheme s;
  Grid g;
  i64 T, C;
  i64 span;      // tokens per block (the group's rows; 1 for per_token / mx / casts)
  i64 local_gc;  // scale groups inside one span
  void* codes;
  void* scales;
  bool wide;
  bool staged;  // the span's values are kept in shared memory between the two passes
};

/// Byte offsets inside rows_kernel's dynamic shared memory: amax, scales, staged values.
struct RowsSmem {
  std::size_t gs, vals, total;
};
__host__ __device__ inline RowsSmem rows_smem(i64 local_gc, i64 span, i64 C, bool staged) {
  RowsSmem m{};
  m.gs = static_cast<std::size_t>((local_gc * 4 + 15) / 16 * 16);
  m.vals = m.gs + (static_cast<std::size_t>(local_gc) * sizeof(GroupScale) + 15) / 16 * 16;
  m.total = m.vals + (staged ? static_cast<std::size_t>(span * C) * 4 : 0);
  return m;
}

__global__ void rows_kernel(RowsArgs a) {
  extern __shared__ unsigned char smem[];
  auto* amax = reinterpret_cast<std::uint32_t*>(smem);
  const RowsSmem lay = rows_smem(a.local_gc, a.span, a.C, a.staged);
  auto* gs = reinterpret_cast<GroupScale*>(smem + lay.gs);
  auto* vals = reinterpret_cast<float*>(smem + lay.vals);  // [span][C] when staged
  const i64 spans_per_slab = (a.T + a.span - 1) / a.span;
  const i64 slab = static_cast<i64>(blockIdx.x) / spans_per_slab;
  const i64 t0 = (static_cast<i64>(blockIdx.x) % spans_per_slab) * a.span;
  const i64 rows = a.T - t0 < a.span ? a.T - t0 : a.span;
  const int tpr = threads_per_row(a.C);
  const int r_step = static_cast<int>(blockDim.x) / tpr;
  const int r_first = static_cast<int>(threadIdx.x) / tpr, c_first = static_cast<int>(threadIdx.x) % tpr;
  const bool active = r_first < r_step;  // threads beyond the last whole row stay idle
  const i64 base = a.x.slab_base(slab);
  const bool mx = a.s.family == Family::mx, per_thread = a.s.family != Family::mx && a.s.granularity == Granularity::per_thread;
  const int mx_block = static_cast<int>(a.s.block);
  for (i64 k = threadIdx.x; k < a.local_gc; k += blockDim.x) amax[k] = 0u;
  __syncthreads();
  if (a.s.family != Family::cast && active)
    for (i64 r = r_first; r < rows; r += r_step) {
      const i64 t = t0 + r;
      const float* row = a.x.p + base + t * a.x.st;
      const int tg = per_thread ? (a.s.role == Role::k ? static_cast<int>(t % 8) / 2 : static_cast<int>(t % 8)) : 0;
      std::uint32_t m = 0u;  // this thread's partial max of a row group (non-MX)
      for (int c = c_first; c < a.C; c += tpr) {
        const float v = a.x.fix(row[c * a.x.sc], slab, c);
        if (a.staged) vals[r * a.C + c] = v;  // read back below by this same thread
        const std::uint32_t b = amax_bits(v);
        if (mx) atomicMax(&amax[c / mx_block], b);
        else m = b > m ? b : m;
      }
      if (!mx && m != 0u) atomicMax(&amax[tg], m);
    }
  __syncthreads();
  for (i64 k = threadIdx.x; k < a.local_gc; k += blockDim.x) {
    gs[k] = group_scale(ffrom(amax[k]), a.s);
    // Global scale index of local group k: the span's first row stands for every row of a
    // block/warp group; per_thread group k sits at offset k of the span's scale row; mx group k
    // at channel k * block.
    i64 gk = -1;
    if (mx) gk = group_index(a.s, a.g, slab, t0, k * a.s.block);
    else if (a.s.family != Family::cast) gk = group_index(a.s, a.g, slab, t0, 0) + (per_thread ? k : 0);
    if (gk >= 0) store_scale(a.scales, mx, gk, gs[k].stored);
  }
  __syncthreads();
  if (!active) return;
  for (i64 r = r_first; r < rows; r += r_step) {
    const i64 t = t0 + r;
    const float* row = a.x.p + base + t * a.x.st;
    const i64 o = (slab * a.T + t) * a.C;
    const int tg = per_thread ? (a.s.role == Role::k ? static_cast<int>(t % 8) / 2 : static_cast<int>(t % 8)) : 0;
    for (int c = c_first; c < a.C; c += tpr) {
      const GroupScale& g = gs[mx ? c / mx_block : tg];
      const float v = a.staged ? vals[r * a.C + c] : a.x.fix(row[c * a.x.sc], slab, c);
      store_code(a.codes, a.wide, o + c, element_code(v, g, a.s));
    }
  }
}

// ---- 2b. per_tensor / per_channel ----

constexpr i64 kTokensPerBlock = 64;

__global__ void amax_global_kernel(Src x, i64 T, i64 C, bool per_channel, std::uint32_t* amax) {
  __shared__ std::uint32_t block_max;
  const i64 chunks = (T + kTokensPerBlock - 1) / kTokensPerBlock;
  const i64 slab = static_cast<i64>(blockIdx.x) / chunks;
  const i64 t0 = (static_cast<i64>(blockIdx.x) % chunks) * kTokensPerBlock;
  const i64 t1 = T < t0 + kTokensPerBlock ? T : t0 + kTokensPerBlock;
  if (threadIdx.x == 0) block_max = 0u;
  __syncthreads();
  std::uint32_t mine = 0u;
  for (i64 c = threadIdx.x; c < C; c += blockDim.x) {
    std::uint32_t m = 0u;
    for (i64 t = t0; t < t1; ++t) {
      const std::uint32_t b = amax_bits(x.at(slab, t, c));
      m = b > m ? b : m;
    }
    if (per_channel) {
      if (m != 0u) atomicMax(&amax[slab * C + c], m);
    } else {
      mine = m > mine ? m : mine;
    }
  }
  if (!per_channel) {
    atomicMax(&block_max, mine);
    __syncthreads();
    if (threadIdx.x == 0 && block_max != 0u) atomicMax(amax, block_max);
  }
}

__global__ void scales_kernel(Scheme s, i64 groups, const std::uint32_t* amax, void* scales, GroupScale* gs) {
  const i64 k = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= groups) return;
  gs[k] = group_scale(ffrom(amax[k]), s);
  store_scale(scales, false, k, gs[k].stored);
}

__global__ void codes_kernel(Src x, Scheme s, i64 n, i64 T, i64 C, const GroupScale* gs, void* codes, bool wide) {
  const int tpr = threads_per_row(C);
  const int r_step = static_cast<int>(blockDim.x) / tpr;
  const int r_first = static_cast<int>(threadIdx.x) / tpr, c_first = static_cast<int>(threadIdx.x) % tpr;
  if (r_first >= r_step) return;
  const bool per_channel = s.granularity == Granularity::per_channel;
  for (i64 r = static_cast<i64>(blockIdx.x) * r_step + r_first; r < n * T; r += static_cast<i64>(gridDim.x) * r_step) {
    const i64 slab = r / T, t = r % T;
    const float* row = x.p + x.slab_base(slab) + t * x.st;
    const GroupScale* gr = per_channel ? gs + slab * C : gs;  // per_tensor: group 0
    for (int c = c_first; c < C; c += tpr)
      store_code(codes, wide, r * C + c, element_code(x.fix(row[c * x.sc], slab, c), gr[per_channel ? c : 0], s));
  }
}

__global__ void one_kernel(float* p) { *p = 1.0f; }

// ---- fast path (quantize_fast.hpp) ----

__device__ inline std::uint32_t shfl_xor_u32(std::uint32_t v, int mask) {
#if defined(ATTEST_GPU_NVIDIA)
  return __shfl_xor_sync(0xffffffffu, v, mask);
#else
  return __shfl_xor(v, mask);
#endif
}
__device__ inline float shfl_xor_f32(float v, int mask) { return ffrom(shfl_xor_u32(fbits(v), mask)); }
/// Max over the aligned segment of `width` lanes (a power of two <= warpSize) holding this lane: an
/// xor butterfly, every lane ends with the segment's maximum. Every lane of the warp calls it
/// (blocks are whole warps and no thread leaves before), with the same width.
__device__ inline std::uint32_t seg_max(std::uint32_t m, int width) {
  for (int o = 1; o < width; o <<= 1) {
    const std::uint32_t p = shfl_xor_u32(m, o);
    m = p > m ? p : m;
  }
  return m;
}

/// Load and pre-transforms of one thread's chunks (shared by the codes and amax kernels).
template <int V>
__device__ __forceinline__ void prepare_chunks(qf::Chunks<V>& th, const qf::FastArgs& a, std::int32_t tile) {
  th.setup(a, tile, static_cast<std::int32_t>(threadIdx.x));
  th.load(a);
  th.smooth(a);
  if constexpr (V == 32) {
    if (a.s.rotate != Rotation::none) {
      th.rotate_local(a.s);
      if (a.s.rotate != Rotation::h32_bf16) {
        // h128: stages h = 32 and 64 pair channel i with i + h, held by the lane 1 and 2 away
        // (a row's 128 channels are 4 adjacent lanes of 32).
#pragma unroll
        for (int stage = 0; stage < 2; ++stage) {
          const int mask = 1 << stage;
          float other[32];
#pragma unroll
          for (int j = 0; j < 32; ++j) other[j] = shfl_xor_f32(th.v[0][j], mask);
          th.fwht_cross(other, (th.cc & mask) != 0);
        }
      }
    }
  }
  th.finish(a);
}

template <FormatId F, Family FAM, int V>
__global__ void __launch_bounds__(qf::kFastMaxThreads) fast_kernel(qf::FastArgs a) {
  using Ch = qf::Chunks<V>;
  constexpr int K = Ch::K;
  __shared__ std::uint32_t s_amax[8];
  __shared__ GroupScale s_gs[8];
  Ch th;
  prepare_chunks<V>(th, a, static_cast<std::int32_t>(blockIdx.x));
  const int tpr = 1 << a.tpr_log2;
  if (a.kind == qf::Kind::elementwise) {
    if (a.gs == nullptr) {  // casts: no scale
      const GroupScale one{fbits(1.0f), 1.0f, 1.0f};
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (th.ok[k]) th.template store<F, FAM>(a, k, [&](int) { return one; });
    } else if (a.s.granularity == Granularity::per_channel) {
      GroupScale gch[V];  // the thread's channels are fixed: their scales once
      const GroupScale* gp = a.gs + static_cast<std::int64_t>(th.slab) * a.C + th.c0;
#pragma unroll
      for (int j = 0; j < V; ++j) gch[j] = gp[j];
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (th.ok[k]) th.template store<F, FAM>(a, k, [&](int j) { return gch[j]; });
    } else {
      const GroupScale g0 = a.gs[0];
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (th.ok[k]) th.template store<F, FAM>(a, k, [&](int) { return g0; });
    }
    return;
  }
  GroupScale g[K];
  if (a.kind == qf::Kind::per_token || a.kind == qf::Kind::mx) {
    const bool mx = a.kind == qf::Kind::mx;
    const int width = mx ? 1 << a.lpg_log2 : tpr;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::uint32_t m = seg_max(th.chunk_amax(k), width);
      g[k] = group_scale_t<F>(ffrom(m), a.s);
      if (th.ok[k] && (th.cc & (width - 1)) == 0)
        qf::store_scale(a.scales, mx, mx ? th.mx_scale_index(a, k) : th.token_scale_index(a, k), g[k].stored);
    }
  } else {  // Kind::rows: this block's tile is one span of R rows
    if (threadIdx.x < 8) s_amax[threadIdx.x] = 0u;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::uint32_t m = seg_max(th.chunk_amax(k), tpr);
      if (th.cc == 0 && m != 0u) atomicMax(&s_amax[qf::row_group(a.s, th.t[k])], m);
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < a.local_groups) {
      const GroupScale gg = group_scale_t<F>(ffrom(s_amax[threadIdx.x]), a.s);
      s_gs[threadIdx.x] = gg;
      qf::store_scale(a.scales, false, static_cast<std::int64_t>(blockIdx.x) * a.gc + threadIdx.x, gg.stored);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) g[k] = s_gs[qf::row_group(a.s, th.t[k])];
  }
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (th.ok[k]) th.template store<F, FAM>(a, k, [&](int) { return g[k]; });
}

/// Amax pass of per_tensor / per_channel: each block covers `tiles` consecutive tiles of one
/// slab, keeps running maxima in registers (per_channel: one per owned channel), combines them
/// across the warp by shuffles, then in shared memory, then one global atomicMax per group.
constexpr int kAmaxMaxC = 1024;  // C <= 32 chunks x 32 channels
template <int V>
__global__ void __launch_bounds__(qf::kFastThreads) amax_fast_kernel(qf::FastArgs a, std::int32_t tiles, std::uint32_t* amax) {
  __shared__ std::uint32_t s_max[kAmaxMaxC];
  using Ch = qf::Chunks<V>;
  constexpr int K = Ch::K;
  const bool per_channel = a.s.granularity == Granularity::per_channel;
  const std::int32_t blocks_per_slab = (a.tiles_per_slab + tiles - 1) / tiles;
  const std::int32_t slab = static_cast<std::int32_t>(blockIdx.x) / blocks_per_slab;
  const std::int32_t i0 = (static_cast<std::int32_t>(blockIdx.x) - slab * blocks_per_slab) * tiles;
  const std::int32_t i1 = i0 + tiles < a.tiles_per_slab ? i0 + tiles : a.tiles_per_slab;
  for (int c = threadIdx.x; c < (per_channel ? a.C : 1); c += blockDim.x) s_max[c] = 0u;
  __syncthreads();
  std::uint32_t run = 0u, runc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) runc[j] = 0u;
  const int c0 = (static_cast<int>(threadIdx.x) & ((1 << a.tpr_log2) - 1)) * V;  // the thread's channels
  for (std::int32_t i = i0; i < i1; ++i) {  // same trip count in every thread (shuffles inside)
    Ch th;
    prepare_chunks<V>(th, a, slab * a.tiles_per_slab + i);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (per_channel) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const std::uint32_t b = th.ok[k] ? amax_bits(th.v[k][j]) : 0u;
          runc[j] = b > runc[j] ? b : runc[j];
        }
      } else {
        const std::uint32_t b = th.chunk_amax(k);
        run = b > run ? b : run;
      }
    }
  }
  const int tpr = 1 << a.tpr_log2;
  const int lane = static_cast<int>(threadIdx.x) & (warpSize - 1);
  if (per_channel) {
    // Lanes tpr apart hold the same channels (other rows): butterfly over them.
#pragma unroll
    for (int j = 0; j < V; ++j)
      for (int o = tpr; o < warpSize; o <<= 1) {
        const std::uint32_t p = shfl_xor_u32(runc[j], o);
        runc[j] = p > runc[j] ? p : runc[j];
      }
    if (lane < tpr)
#pragma unroll
      for (int j = 0; j < V; ++j)
        if (runc[j] != 0u) atomicMax(&s_max[c0 + j], runc[j]);
  } else {
    run = seg_max(run, warpSize);
    if (lane == 0 && run != 0u) atomicMax(&s_max[0], run);
  }
  __syncthreads();
  if (per_channel) {
    for (int c = threadIdx.x; c < a.C; c += blockDim.x)
      if (s_max[c] != 0u) atomicMax(&amax[static_cast<std::int64_t>(slab) * a.C + c], s_max[c]);
  } else if (threadIdx.x == 0 && s_max[0] != 0u) {
    atomicMax(amax, s_max[0]);
  }
}

/// Smoothing mean, streamed (qf::mean_stream_ok): block = (slab, strip of 32 channels). Each
/// stage, all threads load the next kMeanStage tokens of the strip (16-byte loads into
/// registers) while lane c of warp 0 adds the current stage's tokens of channel c from shared
/// memory, in token order, in double: acc = ((0 + x_0) + x_1) + ... exactly the reference's
/// sequence of roundings (one chain per channel; only the loads run ahead). Double buffered, one
/// barrier per stage.
constexpr int kMeanStage = 192;    // tokens per stage: 2 x 192 x 32 floats = 48 KB shared
constexpr int kMeanThreads = 256;
constexpr int kMeanLoads = kMeanStage * (qf::kMeanStrip / 4) / kMeanThreads;  // float4 per thread per stage
static_assert(kMeanLoads * kMeanThreads == kMeanStage * qf::kMeanStrip / 4, "stage tiling");
struct MeanArgs {
  const float* x;
  std::int64_t s0, s1;
  std::int32_t lead1, st, T, C, strips;
  Smoothing sm;
  float* km;
};
__global__ void __launch_bounds__(kMeanThreads) mean_stream_kernel(MeanArgs a) {
  __shared__ alignas(16) float buf[2][kMeanStage][qf::kMeanStrip];
  const std::int32_t slab = static_cast<std::int32_t>(blockIdx.x) / a.strips;
  const std::int32_t c0 = (static_cast<std::int32_t>(blockIdx.x) - slab * a.strips) * qf::kMeanStrip;
  const float* xs = a.x + (slab / a.lead1) * a.s0 + (slab % a.lead1) * a.s1 + c0;
  const int q = static_cast<int>(threadIdx.x) & 7, tr = static_cast<int>(threadIdx.x) >> 3;  // float4 q of tokens tr + 32 i
  const std::int32_t stages = (a.T + kMeanStage - 1) / kMeanStage;
  // The next stage's values, in flight: plain float registers (no lambdas, no struct selects,
  // which compilers may route through scratch memory).
  float r[kMeanLoads][4];
  auto fetch = [](float* out, const float* p, bool valid) {
    if (valid) {
      qf::load4(p, out);
    } else {
      out[0] = 0.0f, out[1] = 0.0f, out[2] = 0.0f, out[3] = 0.0f;
    }
  };
#pragma unroll
  for (int i = 0; i < kMeanLoads; ++i) {
    const std::int32_t t = tr + 32 * i;
    fetch(r[i], xs + static_cast<std::int64_t>(t) * a.st + 4 * q, t < a.T);
  }
#pragma unroll
  for (int i = 0; i < kMeanLoads; ++i)
    *reinterpret_cast<qf::Floats4*>(&buf[0][tr + 32 * i][4 * q]) = qf::Floats4{{r[i][0], r[i][1], r[i][2], r[i][3]}};
  double acc = 0.0;
  __syncthreads();
  for (std::int32_t st = 0; st < stages; ++st) {
    const bool next = st + 1 < stages;
    if (next) {
#pragma unroll
      for (int i = 0; i < kMeanLoads; ++i) {
        const std::int32_t t = (st + 1) * kMeanStage + tr + 32 * i;
        fetch(r[i], xs + static_cast<std::int64_t>(t) * a.st + 4 * q, t < a.T);
      }
    }
    if (threadIdx.x < qf::kMeanStrip) {
      const std::int32_t nt = a.T - st * kMeanStage < kMeanStage ? a.T - st * kMeanStage : kMeanStage;
      const float* col = &buf[st & 1][0][threadIdx.x];
#pragma unroll 8
      for (std::int32_t tt = 0; tt < nt; ++tt) acc += static_cast<double>(col[tt * qf::kMeanStrip]);
    }
    if (next) {
#pragma unroll
      for (int i = 0; i < kMeanLoads; ++i)
        *reinterpret_cast<qf::Floats4*>(&buf[(st + 1) & 1][tr + 32 * i][4 * q]) = qf::Floats4{{r[i][0], r[i][1], r[i][2], r[i][3]}};
    }
    __syncthreads();
  }
  if (threadIdx.x < qf::kMeanStrip) {
    float m = static_cast<float>(acc / static_cast<double>(a.T));  // T >= 1 (mean_stream_ok)
    if (a.sm == Smoothing::bf16) m = round_bf16(m);
    a.km[static_cast<std::int64_t>(slab) * a.C + c0 + threadIdx.x] = m;
  }
}

template <FormatId F, Family FAM, int V>
void launch_fast(const qf::FastPlan& p, const qf::FastArgs& a, hipStream_t stream) {
  fast_kernel<F, FAM, V><<<dim3(static_cast<unsigned>(p.grid)), dim3(p.threads), 0, stream>>>(a);
  ATTEST_GPU_CHECK_LAUNCH();
}
/// The codes kernel of the scheme's (family, element format), V channels per chunk.
template <int V>
void launch_fast_codes(const qf::FastPlan& p, const qf::FastArgs& a, hipStream_t stream) {
  using F = FormatId;
  const Scheme& s = a.s;
  switch (s.family) {
    case Family::cast:
      if constexpr (V == 8) {  // casts have no rotation
        if (s.element == F::bf16) return launch_fast<F::bf16, Family::cast, V>(p, a, stream);
        if (s.element == F::fp16) return launch_fast<F::fp16, Family::cast, V>(p, a, stream);
      }
      break;
    case Family::int8: return launch_fast<F::int8, Family::int8, V>(p, a, stream);
    case Family::fp8:
      switch (s.element) {
        case F::fp8_e4m3fn: return launch_fast<F::fp8_e4m3fn, Family::fp8, V>(p, a, stream);
        case F::fp8_e5m2: return launch_fast<F::fp8_e5m2, Family::fp8, V>(p, a, stream);
        case F::fp8_e4m3fnuz: return launch_fast<F::fp8_e4m3fnuz, Family::fp8, V>(p, a, stream);
        case F::fp8_e5m2fnuz: return launch_fast<F::fp8_e5m2fnuz, Family::fp8, V>(p, a, stream);
        default: break;
      }
      break;
    case Family::mx:
      switch (s.element) {
        case F::fp8_e4m3fn: return launch_fast<F::fp8_e4m3fn, Family::mx, V>(p, a, stream);
        case F::fp8_e5m2: return launch_fast<F::fp8_e5m2, Family::mx, V>(p, a, stream);
        case F::fp6_e2m3fn: return launch_fast<F::fp6_e2m3fn, Family::mx, V>(p, a, stream);
        case F::fp6_e3m2fn: return launch_fast<F::fp6_e3m2fn, Family::mx, V>(p, a, stream);
        case F::fp4_e2m1fn: return launch_fast<F::fp4_e2m1fn, Family::mx, V>(p, a, stream);
        case F::int8: return launch_fast<F::int8, Family::mx, V>(p, a, stream);
        default: break;
      }
      break;
    case Family::identity: break;
  }
  throw Error("quantize_device: no fast kernel for " + to_string(s));  // unreachable: parse_scheme's heads
}

// ---- layout of the workspace ----

std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }
bool global_path(const Scheme& s) {
  return (s.family == Family::int8 || s.family == Family::fp8) && (s.granularity == Granularity::per_tensor || s.granularity == Granularity::per_channel);
}
struct Workspace {
  std::size_t w = 0, km = 0, amax = 0, gs = 0, total = 0;  // byte offsets and total
};
Workspace workspace_layout(const Scheme& s, i64 n, i64 T, i64 C) {
  Workspace l;
  std::size_t off = 0;
  if (s.rotate != Rotation::none) {
    l.w = off;
    off += align256(static_cast<std::size_t>(n * T * C) * 4);
  }
  if (s.smooth != Smoothing::none) {
    l.km = off;
    off += align256(static_cast<std::size_t>(n * C) * 4);
  }
  if (global_path(s)) {
    const Grid g = grid_of(s, T, C);
    const i64 groups = g.global ? 1 : n * g.GT * g.GC;
    l.amax = off;
    off += align256(static_cast<std::size_t>(groups) * 4);
    l.gs = off;
    off += align256(static_cast<std::size_t>(groups) * sizeof(GroupScale));
  }
  l.total = off;
  return l;
}

unsigned blocks_for(i64 n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

std::size_t quantize_codes_bytes(const Scheme& s, std::int64_t n_elements) {
  require_device_quantizer(s);
  return static_cast<std::size_t>(n_elements) * (s.family == Family::cast ? 2 : 1);
}
std::int64_t quantize_scales_count(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C) {
  require_device_quantizer(s);
  const Grid g = grid_of(s, T, C);
  return g.global ? 1 : slabs * g.GT * g.GC;
}
std::size_t quantize_scales_bytes(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C) {
  return static_cast<std::size_t>(quantize_scales_count(s, slabs, T, C)) * (s.family == Family::mx ? 1 : 4);
}
std::size_t quantize_workspace_bytes(const Scheme& s, std::int64_t slabs, std::int64_t T, std::int64_t C) {
  require_device_quantizer(s);
  return workspace_layout(s, slabs, T, C).total;
}

void quantize_device(const Scheme& s, const QuantizeArgs& a, void* stream_ptr) {
  require_device_quantizer(s);
  const auto stream = static_cast<hipStream_t>(stream_ptr);
  const i64 n = a.lead0 * a.lead1, T = a.T, C = a.C;
  if (a.lead0 < 1 || a.lead1 < 1 || T < 0 || C < 0)
    throw Error("quantize_device: bad shape [" + std::to_string(a.lead0) + ", " + std::to_string(a.lead1) + ", " +
                std::to_string(T) + ", " + std::to_string(C) + "]");
  if ((s.rotate == Rotation::h128 || s.rotate == Rotation::h128_bf16) && C != 128)
    throw Error("quantize_device: " + to_string(s) + " needs 128 channels, got " + std::to_string(C));
  if (s.rotate == Rotation::h32_bf16 && C % 32 != 0)
    throw Error("quantize_device: " + to_string(s) + " needs a multiple of 32 channels, got " + std::to_string(C));
  float factor = 1.0f;
  if (s.prescale == Prescale::sm_log2e) {
    if (!(a.sm_scale > 0 && a.sm_scale < 1e300))
      throw Error("quantize_device: prescale=sm_log2e needs a finite sm_scale > 0, got " + std::to_string(a.sm_scale));
    factor = static_cast<float>(a.sm_scale * 1.44269504);  // Sage computes it in Python (double)
  }
  const Workspace lay = workspace_layout(s, n, T, C);
  if (lay.total > 0 && a.workspace == nullptr) throw Error("quantize_device: " + to_string(s) + " needs a workspace");
  auto* ws = static_cast<unsigned char*>(a.workspace);
  const i64 total = n * T * C;
  Src src{a.x, a.lead1, a.stride[0], a.stride[1], a.stride[2], a.stride[3]};
  if (total > 0 && a.x == nullptr) throw Error("quantize_device: no input");

  const qf::FastInput fin{a.lead0, a.lead1, T, C, {a.stride[0], a.stride[1], a.stride[2], a.stride[3]}, a.x, a.codes};
  auto* km = s.smooth != Smoothing::none ? reinterpret_cast<float*>(ws + lay.km) : nullptr;
  if (km != nullptr && n * C > 0) {
    if (a.mean_in == nullptr && a.allow_fast && qf::mean_stream_ok(fin)) {
      const MeanArgs ma{a.x, a.stride[0], a.stride[1], static_cast<std::int32_t>(a.lead1), static_cast<std::int32_t>(a.stride[2]),
                        static_cast<std::int32_t>(T), static_cast<std::int32_t>(C), static_cast<std::int32_t>(C / qf::kMeanStrip),
                        s.smooth, km};
      hipLaunchKernelGGL(mean_stream_kernel, dim3(static_cast<unsigned>(n * (C / qf::kMeanStrip))), dim3(kMeanThreads), 0, stream, ma);
    } else {
      hipLaunchKernelGGL(mean_kernel, dim3(blocks_for(n * C)), dim3(kThreads), 0, stream, src, n, T, C, s.smooth, a.mean_in, km);
    }
    ATTEST_GPU_CHECK_LAUNCH();
    if (a.mean_out != nullptr)
      ATTEST_GPU_CHECK(hipMemcpyAsync(a.mean_out, km, static_cast<std::size_t>(n * C) * 4, hipMemcpyDeviceToDevice, stream));
  }

  const qf::FastPlan plan = a.allow_fast ? qf::plan_fast(s, fin) : qf::FastPlan{};
  if (plan.ok) {
    qf::FastArgs fa = plan.args;
    fa.x = a.x;
    fa.km = km;
    fa.factor = factor;
    fa.codes = a.codes;
    fa.scales = a.scales;
    if (s.family == Family::cast) {
      // One scale, 1.0f, written by a kernel (graph capture must not keep a host pointer).
      hipLaunchKernelGGL(one_kernel, dim3(1), dim3(1), 0, stream, static_cast<float*>(a.scales));
      ATTEST_GPU_CHECK_LAUNCH();
    }
    if (plan.two_pass) {
      const i64 groups = s.granularity == Granularity::per_channel ? n * C : 1;
      auto* amax = reinterpret_cast<std::uint32_t*>(ws + lay.amax);
      auto* gs = reinterpret_cast<GroupScale*>(ws + lay.gs);
      ATTEST_GPU_CHECK(hipMemsetAsync(amax, 0, static_cast<std::size_t>(groups) * 4, stream));
      if (plan.V == 8)
        hipLaunchKernelGGL(amax_fast_kernel<8>, dim3(static_cast<unsigned>(plan.amax_grid)), dim3(qf::kFastThreads), 0, stream, fa,
                           plan.amax_tiles, amax);
      else
        hipLaunchKernelGGL(amax_fast_kernel<32>, dim3(static_cast<unsigned>(plan.amax_grid)), dim3(qf::kFastThreads), 0, stream, fa,
                           plan.amax_tiles, amax);
      ATTEST_GPU_CHECK_LAUNCH();
      hipLaunchKernelGGL(scales_kernel, dim3(blocks_for(groups)), dim3(kThreads), 0, stream, s, groups, amax, a.scales, gs);
      ATTEST_GPU_CHECK_LAUNCH();
      fa.gs = gs;
    }
    if (plan.V == 8) launch_fast_codes<8>(plan, fa, stream);
    else launch_fast_codes<32>(plan, fa, stream);
    return;
  }

  // Generic path.
  if (s.rotate != Rotation::none) {
    // Rotations mix a row's channels: one pass writes the transformed rows (smoothing, rotation,
    // prescale) into the workspace.
    auto* w = reinterpret_cast<float*>(ws + lay.w);
    const i64 piece = s.rotate == Rotation::none ? 1 : s.rotate == Rotation::h32_bf16 ? 32 : C;
    const i64 threads = piece == 0 ? 0 : n * T * (C / piece);
    if (threads > 0) {
      hipLaunchKernelGGL(prepare_kernel, dim3(blocks_for(threads)), dim3(kThreads), 0, stream, src, n, T, C, s, factor,
                         reinterpret_cast<const float*>(ws + lay.km), w);
      ATTEST_GPU_CHECK_LAUNCH();
    }
    src = Src{w, 1, T * C, 0, C, 1};
  } else {
    // Smoothing and prescale are elementwise: applied while loading (no extra pass).
    src.C = C;
    if (s.smooth != Smoothing::none) {
      src.km = reinterpret_cast<const float*>(ws + lay.km);
      src.sm = s.smooth;
    }
    src.scale = s.prescale == Prescale::sm_log2e;
    src.factor = factor;
  }

  const Grid g = grid_of(s, T, C);
  const bool wide = s.family == Family::cast;
  if (global_path(s)) {
    const i64 groups = g.global ? 1 : n * g.GT * g.GC;
    auto* amax = reinterpret_cast<std::uint32_t*>(ws + lay.amax);
    auto* gs = reinterpret_cast<GroupScale*>(ws + lay.gs);
    if (groups > 0) ATTEST_GPU_CHECK(hipMemsetAsync(amax, 0, static_cast<std::size_t>(groups) * 4, stream));
    const i64 chunks = (T + kTokensPerBlock - 1) / kTokensPerBlock;
    if (n * chunks > 0 && C > 0) {
      const int threads = C >= kThreads ? kThreads : static_cast<int>((C + 31) / 32 * 32);
      hipLaunchKernelGGL(amax_global_kernel, dim3(static_cast<unsigned>(n * chunks)), dim3(threads), 0, stream, src, T, C,
                         s.granularity == Granularity::per_channel, amax);
      ATTEST_GPU_CHECK_LAUNCH();
    }
    if (groups > 0) {
      hipLaunchKernelGGL(scales_kernel, dim3(blocks_for(groups)), dim3(kThreads), 0, stream, s, groups, amax, a.scales, gs);
      ATTEST_GPU_CHECK_LAUNCH();
    }
    if (total > 0) {
      const i64 rows_per_block = C >= kThreads ? 1 : kThreads / ((C + 31) / 32 * 32);
      const i64 want = (n * T + rows_per_block - 1) / rows_per_block;
      const unsigned grid = static_cast<unsigned>(want < 65536 * 8 ? want : 65536 * 8);
      hipLaunchKernelGGL(codes_kernel, dim3(grid), dim3(kThreads), 0, stream, src, s, n, T, C, gs, a.codes, wide);
      ATTEST_GPU_CHECK_LAUNCH();
    }
    return;
  }

  // Token-local groups.
  RowsArgs ra{src, s, g, T, C, 1, 1, a.codes, a.scales, wide, false};
  if (s.family == Family::int8 || s.family == Family::fp8) {
    if (s.granularity == Granularity::per_block) ra.span = s.block;
    if (s.granularity == Granularity::per_warp || s.granularity == Granularity::per_thread) ra.span = warp_rows(s);
    if (s.granularity == Granularity::per_thread) ra.local_gc = s.role == Role::k ? 4 : 8;
  }
  if (s.family == Family::mx) ra.local_gc = (C + s.block - 1) / s.block;
  if (s.family == Family::cast) {
    // Casts have one scale, 1.0f (a kernel, not a host copy: graph capture must not keep a
    // pointer to this stack frame).
    hipLaunchKernelGGL(one_kernel, dim3(1), dim3(1), 0, stream, static_cast<float*>(a.scales));
    ATTEST_GPU_CHECK_LAUNCH();
  }
  const i64 spans = n * ((T + ra.span - 1) / ra.span);
  if (spans == 0 || C == 0) return;
  if (ra.local_gc < 1) ra.local_gc = 1;
  // Stage the span in shared memory (one read of the input from memory) when it fits in
  // kStageBytes; larger spans read their values twice (the second time mostly from L2).
  constexpr std::size_t kStageBytes = 96 * 1024;
  ra.staged = s.family != Family::cast && static_cast<std::size_t>(ra.span * C) * 4 <= kStageBytes;
  const std::size_t shared = rows_smem(ra.local_gc, ra.span, C, ra.staged).total;
  if (shared > 48 * 1024) ATTEST_GPU_CHECK(hipFuncSetAttributeMaxDynamicSharedMemorySize(rows_kernel, static_cast<int>(shared)));
  // Enough threads for the span's rows at one warp-rounded row each, at most 512 (big staged
  // spans: few blocks fit an SM, so each brings more threads) or kThreads.
  const i64 row_threads = (C + 31) / 32 * 32, per_block = ra.span * row_threads;
  const int max_threads = ra.staged && shared > 32 * 1024 ? 2 * kThreads : kThreads;
  const int threads = per_block >= max_threads ? max_threads : static_cast<int>(per_block);
  hipLaunchKernelGGL(rows_kernel, dim3(static_cast<unsigned>(spans)), dim3(threads), shared, stream, ra);
  ATTEST_GPU_CHECK_LAUNCH();
}

void copy_device(void* dst, const void* src, std::size_t bytes, void* stream) {
  ATTEST_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, static_cast<hipStream_t>(stream)));
}

}  // namespace attest::gpu
