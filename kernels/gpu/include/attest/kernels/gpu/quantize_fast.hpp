#pragma once
// The vectorised path of the device quantizers (quantize.hip): its host-side plan and the work of
// one thread, host/device (ATTEST_HD), so that the CPU test (kernels/gpu/tests/
// test_quantize_math.cpp) runs this very code in the kernels' schedule against the reference
// quantizers. Only the cross-thread steps (warp shuffles, shared-memory maxima, barriers) are the
// kernels' own; they combine maxima of |x| bits, which is order-independent.
//
// Layout. A thread owns K = 32 / V chunks of V consecutive channels of one token row each
// (V = 8, or 32 when the scheme rotates: a 32-channel Hadamard block, or a quarter of a
// 128-channel row), 32 floats in registers: loaded with 16-byte loads, codes written packed
// (8 or 16 bytes per chunk, 16-byte stores). A row's C / V chunks sit in TPR = C / V adjacent
// lanes (TPR a power of two <= 32, so a row never straddles a warp); a block of `threads` lanes
// covers rp rows at a time and owns one tile of tile_rows consecutive tokens of one slab: thread
// (rr, cc) = (tid / TPR, tid % TPR) holds rows rr + rp * k, channels cc * V .. cc * V + V - 1.
// All index arithmetic is 32-bit (the plan checks the extents) except the slab base and the row
// offsets, each one 32 x 32 -> 64-bit multiply.
#include <cstdint>
#include <cstring>
#include <string>

#include "attest/kernels/gpu/quantize_math.hpp"

// The per-thread functions are inlined into the kernels whatever their size (clang for AMD
// otherwise keeps Chunks::store out of line for some instances, which puts the thread's values
// in scratch memory).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define ATTEST_QF_INLINE __attribute__((always_inline))
#else
#define ATTEST_QF_INLINE
#endif

namespace attest::gpu::qf {

using namespace qm;

/// How a fast kernel finds each chunk's group scale.
enum class Kind : std::uint8_t {
  elementwise,  ///< no amax: casts, or the codes pass of per_tensor / per_channel (scales given)
  per_token,    ///< one group per row: the row's TPR lanes combine by warp shuffles
  rows,         ///< per_block / per_warp / per_thread: one tile = one span of R rows; its 1, 4 or 8
                ///< groups combine in shared memory (row lanes by shuffle first)
  mx,           ///< `block` channels of a row: block / V adjacent lanes combine by shuffles
};

/// Everything a fast kernel reads (plain data, passed by value).
struct FastArgs {
  const float* x = nullptr;
  std::int64_t s0 = 0, s1 = 0;  ///< element strides of lead0 and lead1 (the slab base)
  std::int32_t lead1 = 1, st = 0, T = 0, C = 0;
  std::int32_t tpr_log2 = 0;        ///< log2(C / V)
  std::int32_t rp = 1;              ///< thread rows per block (threads with rr >= rp hold no rows)
  std::int32_t tile_rows = 1;       ///< tokens per tile (= per block)
  std::int32_t tiles_per_slab = 0;  ///< ceil(T / tile_rows)
  Kind kind = Kind::elementwise;
  std::int32_t lpg_log2 = 0;        ///< mx: log2(lanes per scale block) = log2(block / V)
  std::int32_t gc = 1;              ///< scale columns per scale row (rows: 1, 4 or 8; mx: C / block)
  std::int32_t local_groups = 1;    ///< rows: groups per span
  Scheme s;
  const float* km = nullptr;        ///< smoothing means [slabs][C] (smoothing only)
  float factor = 1.0f;              ///< prescale factor fl32(sm_scale * 1.44269504)
  const GroupScale* gs = nullptr;   ///< elementwise: per_tensor [1] / per_channel [slabs * C]; nullptr: casts
  void* codes = nullptr;
  void* scales = nullptr;
};

/// 16- and 8-byte memory access of aligned data: one vector instruction on the device, memcpy
/// on the host (no aliasing questions there).
struct alignas(16) Words4 {
  std::uint32_t w[4];
};
struct alignas(8) Words2 {
  std::uint32_t w[2];
};
struct alignas(16) Floats4 {
  float f[4];
};
ATTEST_HD inline void load4(const float* p, float* out) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  const Floats4 v = *reinterpret_cast<const Floats4*>(p);
  out[0] = v.f[0], out[1] = v.f[1], out[2] = v.f[2], out[3] = v.f[3];
#else
  std::memcpy(out, p, 16);
#endif
}
/// Stores n32 words (2, 4 or 8) at a 16-byte (n32 = 2: 8-byte) aligned address.
ATTEST_HD inline void store_words(void* dst, const std::uint32_t* w, int n32) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  if (n32 == 2) {
    *static_cast<Words2*>(dst) = Words2{{w[0], w[1]}};
  } else {
    auto* d = static_cast<Words4*>(dst);
    for (int i = 0; i < n32 / 4; ++i) d[i] = Words4{{w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]}};
  }
#else
  std::memcpy(dst, w, static_cast<std::size_t>(n32) * 4);
#endif
}

ATTEST_HD inline void store_scale(void* scales, bool mx, std::int64_t k, std::uint32_t stored) {
  if (mx) static_cast<std::uint8_t*>(scales)[k] = static_cast<std::uint8_t>(stored);
  else static_cast<std::uint32_t*>(scales)[k] = stored;
}

/// Group of a row inside its span (Kind::rows): per_thread q: t % 8, k: (t % 8) / 2 (the span
/// starts at a multiple of the warp height, itself a multiple of 8); else the one group 0.
ATTEST_HD inline int row_group(const Scheme& s, std::int32_t t) {
  if (s.granularity != Granularity::per_thread) return 0;
  return s.role == Role::k ? (t & 7) >> 1 : t & 7;
}

/// One thread's chunks: values, validity, tokens.
template <int V>
struct Chunks {
  static_assert(V == 8 || V == 32, "chunks of 8 channels, or 32 for rotations");
  static constexpr int K = 32 / V;
  float v[K][V];
  bool ok[K];           ///< chunk k is a row of the tensor (inside the tile and below T)
  std::int32_t t[K];    ///< token of chunk k
  std::int32_t slab = 0, t0 = 0, cc = 0, rr = 0, c0 = 0;

  ATTEST_HD ATTEST_QF_INLINE void setup(const FastArgs& a, std::int32_t tile, std::int32_t tid) {
    cc = tid & ((1 << a.tpr_log2) - 1);
    rr = tid >> a.tpr_log2;
    slab = tile / a.tiles_per_slab;
    t0 = (tile - slab * a.tiles_per_slab) * a.tile_rows;
    c0 = cc * V;
    ATTEST_QM_UNROLL
    for (int k = 0; k < K; ++k) {
      const std::int32_t r = rr + a.rp * k;
      t[k] = t0 + r;
      ok[k] = rr < a.rp && r < a.tile_rows && t[k] < a.T;
    }
  }

  /// x's values (zeros for chunks outside the tensor).
  ATTEST_HD ATTEST_QF_INLINE void load(const FastArgs& a) {
    const float* xs = a.x + (slab / a.lead1) * a.s0 + (slab % a.lead1) * a.s1 + c0;
    ATTEST_QM_UNROLL
    for (int k = 0; k < K; ++k) {
      if (ok[k]) {
        const float* p = xs + static_cast<std::int64_t>(t[k]) * a.st;
        ATTEST_QM_UNROLL
        for (int q = 0; q < V / 4; ++q) load4(p + 4 * q, &v[k][4 * q]);
      } else {
        ATTEST_QM_UNROLL
        for (int j = 0; j < V; ++j) v[k][j] = 0.0f;
      }
    }
  }

  /// Pre-transform 1: smoothing with the channel means.
  ATTEST_HD ATTEST_QF_INLINE void smooth(const FastArgs& a) {
    if (a.s.smooth == Smoothing::none) return;
    float km[V];
    const float* kp = a.km + static_cast<std::int64_t>(slab) * a.C + c0;
    ATTEST_QM_UNROLL
    for (int q = 0; q < V / 4; ++q) load4(kp + 4 * q, &km[4 * q]);
    ATTEST_QM_UNROLL
    for (int k = 0; k < K; ++k) {
      ATTEST_QM_UNROLL
      for (int j = 0; j < V; ++j) v[k][j] = smooth_value(v[k][j], km[j], a.s.smooth);
    }
  }

  /// Pre-transform 2, the part inside the thread (V == 32): h32_bf16 on the chunk (one
  /// 32-channel block); for h128 / h128_bf16 the FWHT stages h = 1 .. 16, whose pairs lie inside
  /// the chunk's aligned 32 channels (fwht128's loops restricted to them, same operations).
  ATTEST_HD ATTEST_QF_INLINE void rotate_local(const Scheme& s) {
    if constexpr (V == 32) {
      if (s.rotate == Rotation::h32_bf16) {
        hadamard32_bf16(v[0]);
      } else if (s.rotate == Rotation::h128 || s.rotate == Rotation::h128_bf16) {
        // Stage h = 2^stage: its 16 pairs (i, i + h), i the p-th index with bit `stage` clear;
        // pairs of a stage are independent. Flat loops of constant trip count, fully unrolled,
        // so v stays in registers.
        ATTEST_QM_UNROLL
        for (int stage = 0; stage < 5; ++stage) {
          const int h = 1 << stage;
          ATTEST_QM_UNROLL
          for (int p = 0; p < 16; ++p) {
            const int i = ((p >> stage) << (stage + 1)) | (p & (h - 1));
            const float x0 = v[0][i], x1 = v[0][i + h];
            v[0][i] = x0 + x1;
            v[0][i + h] = x0 - x1;
          }
        }
      }
    }
  }
  /// One FWHT stage across lanes (h = 32 * lane distance: 32 and 64 for h128): element i of this
  /// chunk pairs with element i of the partner lane's chunk (`other`); the lane holding the lower
  /// channels (upper == false) keeps a + b, the other a - b, a being the lower channel's value:
  /// fwht128's x[i] = a + b, x[i + h] = a - b.
  ATTEST_HD ATTEST_QF_INLINE void fwht_cross(const float* other, bool upper) {
    ATTEST_QM_UNROLL
    for (int j = 0; j < V; ++j) v[0][j] = upper ? other[j] - v[0][j] : v[0][j] + other[j];
  }
  /// The rest of pre-transforms 2 and 3 (rotate_prescale_row's element-wise tail): h128's
  /// normalisation, h128_bf16's rounding (which takes the prescale), else the prescale.
  ATTEST_HD ATTEST_QF_INLINE void finish(const FastArgs& a) {
    const bool pre = a.s.prescale == Prescale::sm_log2e;
    ATTEST_QM_UNROLL
    for (int k = 0; k < K; ++k) {
      ATTEST_QM_UNROLL
      for (int j = 0; j < V; ++j) {
        float x = v[k][j];
        if (a.s.rotate == Rotation::h128) x = x * kH128Norm;
        if (a.s.rotate == Rotation::h128_bf16) x = round_bf16((x * kH128Norm) * (pre ? a.factor : 1.0f));
        else if (pre) x = x * a.factor;
        v[k][j] = x;
      }
    }
  }

  /// max of |v| bits over chunk k (0 for a chunk outside the tensor).
  ATTEST_HD ATTEST_QF_INLINE std::uint32_t chunk_amax(int k) const {
    std::uint32_t m = 0u;
    ATTEST_QM_UNROLL
    for (int j = 0; j < V; ++j) {
      const std::uint32_t b = amax_bits(v[k][j]);
      m = b > m ? b : m;
    }
    return ok[k] ? m : 0u;
  }

  /// Element index of chunk k's first code (codes are [slabs, T, C] contiguous).
  ATTEST_HD ATTEST_QF_INLINE std::int64_t out_index(const FastArgs& a, int k) const {
    return static_cast<std::int64_t>(slab * a.T + t[k]) * a.C + c0;
  }
  /// Scale index of chunk k: per_token [slabs, T]; mx [slabs, T, C / block].
  ATTEST_HD ATTEST_QF_INLINE std::int64_t token_scale_index(const FastArgs& a, int k) const { return slab * a.T + t[k]; }
  ATTEST_HD ATTEST_QF_INLINE std::int64_t mx_scale_index(const FastArgs& a, int k) const {
    return static_cast<std::int64_t>(slab * a.T + t[k]) * a.gc + (cc >> a.lpg_log2);
  }

  /// Codes of chunk k, packed: one byte per code (two for bf16 / fp16 casts), little-endian in
  /// 32-bit words, one 8-, 16- or 32-byte store. g(j) is element j's group scale.
  template <FormatId F, Family FAM, class G>
  ATTEST_HD ATTEST_QF_INLINE void store(const FastArgs& a, int k, G&& g) const {
    constexpr bool two = FAM == Family::cast;
    constexpr int n32 = two ? V / 2 : V / 4;
    std::uint32_t w[n32];
    ATTEST_QM_UNROLL
    for (int i = 0; i < n32; ++i) w[i] = 0u;
    ATTEST_QM_UNROLL
    for (int j = 0; j < V; ++j) {
      const std::uint32_t code = element_code_t<F, FAM>(v[k][j], g(j), a.s);
      if constexpr (two) w[j / 2] |= (code & 0xFFFFu) << (16 * (j % 2));
      else w[j / 4] |= (code & 0xFFu) << (8 * (j % 4));
    }
    const std::int64_t o = out_index(a, k);
    store_words(static_cast<unsigned char*>(a.codes) + o * (two ? 2 : 1), w, n32);
  }
};

/// Shape, strides and pointers of one quantization as the plan sees them.
struct FastInput {
  std::int64_t lead0 = 1, lead1 = 1, T = 0, C = 0;
  std::int64_t stride[4] = {0, 0, 0, 0};
  const void* x = nullptr;
  const void* codes = nullptr;
};

/// The fast path's launch: FastArgs geometry (pointers and per-call operands filled by the
/// caller), block size and grid; for per_tensor / per_channel also the amax pass's.
struct FastPlan {
  bool ok = false;
  std::string why;  ///< why the generic kernels run instead (ok == false)
  int V = 8;
  FastArgs args;
  int threads = 0;
  std::int64_t grid = 0;
  bool two_pass = false;           ///< per_tensor / per_channel: amax pass, scales, codes pass
  std::int32_t amax_tiles = 1;     ///< amax pass: tiles per block
  std::int64_t amax_grid = 0;
};

inline constexpr int kFastThreads = 256;   ///< block of the elementwise / per_token / mx kernels
inline constexpr int kFastMaxThreads = 512;  ///< rows kind (the kernels' launch bound)
inline constexpr int kAmaxTilesPerBlock = 8;
inline constexpr std::int64_t kI32Max = 2147483647;

/// Whether the fast path takes this quantization, and how. It needs: unit channel stride; C / V
/// chunks per row a power of two <= 32; 16-byte aligned input rows (x, and every stride but the
/// channel's a multiple of 4 elements where its extent exceeds 1) and codes; extents for 32-bit
/// index math (T, slabs * T, |token stride|, tiles); mx blocks of a multiple of V channels with a
/// power-of-two lane count dividing the row; row groups whose span fits one block. Otherwise
/// the generic kernels (64-bit indices, any strides) run; `why` says which condition failed.
inline FastPlan plan_fast(const Scheme& s, const FastInput& in) {
  FastPlan p;
  auto no = [&](std::string w) {
    p.why = std::move(w);
    return p;
  };
  const std::int64_t n = in.lead0 * in.lead1, T = in.T, C = in.C;
  p.V = s.rotate != Rotation::none ? 32 : 8;
  const int V = p.V;
  const int K = 32 / V;
  if (n < 1 || T < 1 || C < 1) return no("empty tensor");
  if (in.stride[3] != 1) return no("channel stride " + std::to_string(in.stride[3]) + " is not 1");
  if (C % V != 0) return no("C = " + std::to_string(C) + " is not a multiple of " + std::to_string(V));
  const std::int64_t tpr = C / V;
  if (tpr > 32 || (tpr & (tpr - 1)) != 0)
    return no("C / " + std::to_string(V) + " = " + std::to_string(tpr) + " chunks per row is not a power of two <= 32");
  auto misaligned = [](const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) != 0; };
  if (misaligned(in.x) || misaligned(in.codes)) return no("input or codes not 16-byte aligned");
  if ((in.lead0 > 1 && in.stride[0] % 4 != 0) || (in.lead1 > 1 && in.stride[1] % 4 != 0) || (T > 1 && in.stride[2] % 4 != 0))
    return no("a stride is not a multiple of 4 elements (rows not 16-byte aligned)");
  // 32-bit index math: tokens (t0 + row < 2^31 with a tile's margin), slab * T + t, the token
  // stride, slab numbers and lead1; slab bases stay 64-bit.
  if (T > kI32Max / 2 || n * T > kI32Max || in.stride[2] > kI32Max || in.stride[2] < -kI32Max || in.lead1 > kI32Max)
    return no("extents exceed 32-bit index math");

  FastArgs& a = p.args;
  a.s = s;
  a.s0 = in.stride[0];
  a.s1 = in.stride[1];
  a.lead1 = static_cast<std::int32_t>(in.lead1);
  a.st = static_cast<std::int32_t>(in.stride[2]);
  a.T = static_cast<std::int32_t>(T);
  a.C = static_cast<std::int32_t>(C);
  int lg = 0;
  while ((std::int64_t{1} << lg) < tpr) ++lg;
  a.tpr_log2 = lg;
  a.rp = kFastThreads / static_cast<int>(tpr);
  a.tile_rows = a.rp * K;
  p.threads = kFastThreads;

  switch (s.family) {
    case Family::identity: return no("identity");
    case Family::cast: a.kind = Kind::elementwise; break;
    case Family::mx: {
      const std::int64_t b = s.block;
      if (b % V != 0 || C % b != 0) return no("mx block " + std::to_string(b) + " is not a multiple of " + std::to_string(V) + " dividing C");
      const std::int64_t lpg = b / V;
      if ((lpg & (lpg - 1)) != 0) return no("mx block " + std::to_string(b) + ": not a power-of-two number of chunks");
      int l = 0;
      while ((std::int64_t{1} << l) < lpg) ++l;
      a.kind = Kind::mx;
      a.lpg_log2 = l;
      a.gc = static_cast<std::int32_t>(C / b);
      break;
    }
    case Family::int8:
    case Family::fp8:
      switch (s.granularity) {
        case Granularity::per_tensor:
        case Granularity::per_channel: a.kind = Kind::elementwise; p.two_pass = true; break;
        case Granularity::per_token: a.kind = Kind::per_token; break;
        case Granularity::per_block:
        case Granularity::per_warp:
        case Granularity::per_thread: {
          const std::int64_t R = s.granularity == Granularity::per_block ? s.block : warp_rows(s);
          const std::int64_t rp = (R + K - 1) / K;
          const std::int64_t threads = (tpr * rp + 63) / 64 * 64;  // whole warps (32 or 64 lanes)
          if (threads > kFastMaxThreads)
            return no("a span of " + std::to_string(R) + " rows needs " + std::to_string(threads) + " threads (> " + std::to_string(kFastMaxThreads) + ")");
          a.kind = Kind::rows;
          a.rp = static_cast<std::int32_t>(rp);
          a.tile_rows = static_cast<std::int32_t>(R);
          a.local_groups = s.granularity == Granularity::per_thread ? (s.role == Role::k ? 4 : 8) : 1;
          a.gc = a.local_groups;
          p.threads = static_cast<int>(threads);
          break;
        }
      }
      break;
  }
  const std::int64_t tps = (T + a.tile_rows - 1) / a.tile_rows;
  if (n * tps > kI32Max || n * tps * p.threads > 0xFFFFFFFFLL) return no("too many tiles for a 32-bit grid");
  a.tiles_per_slab = static_cast<std::int32_t>(tps);
  p.grid = n * tps;
  if (p.two_pass) {
    p.amax_tiles = kAmaxTilesPerBlock;
    p.amax_grid = n * ((tps + p.amax_tiles - 1) / p.amax_tiles);
  }
  p.ok = true;
  return p;
}

/// The streaming smoothing-mean kernel (quantize.hip, mean_stream_kernel): blocks of kMeanStrip
/// channels of one slab; it needs unit channel stride, C a multiple of kMeanStrip, 16-byte
/// aligned rows and 32-bit token indices (else the generic one-thread-per-channel kernel runs;
/// both sum in double in token order).
inline constexpr int kMeanStrip = 32;
inline bool mean_stream_ok(const FastInput& in) {
  const std::int64_t n = in.lead0 * in.lead1;
  if (n < 1 || in.T < 1 || in.C < 1 || in.stride[3] != 1 || in.C % kMeanStrip != 0) return false;
  if ((reinterpret_cast<std::uintptr_t>(in.x) & 15u) != 0) return false;
  if ((in.lead0 > 1 && in.stride[0] % 4 != 0) || (in.lead1 > 1 && in.stride[1] % 4 != 0) || (in.T > 1 && in.stride[2] % 4 != 0))
    return false;
  return in.T <= kI32Max / 2 && in.stride[2] <= kI32Max && in.stride[2] >= -kI32Max && in.lead1 <= kI32Max &&
         n * (in.C / kMeanStrip) <= kI32Max && n * in.C <= kI32Max;
}

}  // namespace attest::gpu::qf
