// Device quantizers (attest/kernels/gpu/quantize.hpp). The scalar arithmetic is quantize_math.hpp,
// shared with a CPU test; this file only schedules it:
//   1. smoothing mean (one thread per (slab, channel): sum in double in token order, as the
//      reference), then pre-transforms (smoothing, rotation, prescale) into a contiguous
//      workspace copy, only when the scheme has any;
//   2a. token-local groups (per_block, per_warp, per_thread, per_token, mx, casts): one block per
//      group row span does amax (shared atomicMax on |x| bits), scales and codes in one kernel; the
//      second read of the span hits L1/L2;
//   2b. groups spanning the tensor (per_tensor, per_channel): amax kernel (block partial maxima,
//      one global atomicMax each), a scales kernel, then an elementwise codes kernel.
// The amax is a max over |x| bits (NaN above everything), so its result does not depend on the
// order of the atomics: the outputs are deterministic and equal to the reference's.
#include "attest/kernels/gpu/quantize.hpp"

#include <string>

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

  if (s.smooth != Smoothing::none) {
    auto* km = reinterpret_cast<float*>(ws + lay.km);
    if (n * C > 0) {
      hipLaunchKernelGGL(mean_kernel, dim3(blocks_for(n * C)), dim3(kThreads), 0, stream, src, n, T, C, s.smooth, a.mean_in, km);
      ATTEST_GPU_CHECK_LAUNCH();
      if (a.mean_out != nullptr)
        ATTEST_GPU_CHECK(hipMemcpyAsync(a.mean_out, km, static_cast<std::size_t>(n * C) * 4, hipMemcpyDeviceToDevice, stream));
    }
  }
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
