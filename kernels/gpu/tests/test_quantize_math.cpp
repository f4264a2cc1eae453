// The device quantizers' scalar arithmetic (quantize_math.hpp, host/device) run on the CPU in the
// device kernels' schedule (mean in token order, per-row pre-transforms, amax as a max over |x|
// bits, one scale per group, one code per element) must give the reference quantizers' bits for
// every scheme. Runs in CI without a GPU, so a numerics bug shows here before the device run;
// gpu_tests (DeviceQuantize.*) then checks the kernels themselves on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "attest/core/format.hpp"
#include "attest/core/status.hpp"
#include "attest/kernels/gpu/quantize.hpp"
#include "attest/kernels/gpu/quantize_math.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/hadamard.hpp"
#include "attest/reference/quantize.hpp"
#include "quantize_schemes.hpp"

namespace attest::gpu {
namespace {

using namespace qm;

using test::schemes;  // quantize_schemes.hpp

// [n, T, C] contiguous input of mixed magnitudes with ties and (optionally) special values.
std::vector<float> make_input(std::int64_t n, std::int64_t T, std::int64_t C, unsigned seed, bool specials) {
  std::vector<float> x(static_cast<std::size_t>(n * T * C));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-12, 12), tie(-64, 64), pick(0, 15);
  for (std::int64_t r = 0; r < n * T; ++r) {
    const float scale = std::ldexp(1.0f, ex(rng));
    for (std::int64_t c = 0; c < C; ++c) {
      float v = nd(rng) * scale;
      if (pick(rng) == 0) v = (static_cast<float>(tie(rng)) + 0.5f) * 0.0625f;
      x[static_cast<std::size_t>(r * C + c)] = v;
    }
  }
  if (specials) {
    x[5] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<std::size_t>(40 * C + 7)] = std::numeric_limits<float>::infinity();
    x[static_cast<std::size_t>(41 * C + 9)] = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < C; ++c) x[static_cast<std::size_t>(7 * C + c)] = 0.0f;
    x[static_cast<std::size_t>(100 * C + 3)] = 3.0e38f;
    x[static_cast<std::size_t>(90 * C + 1)] = -1.0e-40f;
  }
  return x;
}

struct Model {
  std::vector<std::uint8_t> codes, scales;
  std::vector<float> mean;
};

// The device schedule on the CPU with the device's scalar functions.
Model model(const Scheme& s, const std::vector<float>& x, std::int64_t n, std::int64_t T, std::int64_t C, double sm_scale) {
  std::vector<float> w = x;
  Model m;
  if (s.smooth != Smoothing::none) {
    m.mean.resize(static_cast<std::size_t>(n * C));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < C; ++c) {
        double acc = 0.0;
        for (std::int64_t t = 0; t < T; ++t) acc += static_cast<double>(x[static_cast<std::size_t>((i * T + t) * C + c)]);
        float km = T > 0 ? static_cast<float>(acc / static_cast<double>(T)) : 0.0f;
        if (s.smooth == Smoothing::bf16) km = round_bf16(km);
        m.mean[static_cast<std::size_t>(i * C + c)] = km;
      }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t c = 0; c < C; ++c) {
          float& v = w[static_cast<std::size_t>((i * T + t) * C + c)];
          v = smooth_value(v, m.mean[static_cast<std::size_t>(i * C + c)], s.smooth);
        }
  }
  const float factor = s.prescale == Prescale::sm_log2e ? static_cast<float>(sm_scale * 1.44269504) : 1.0f;
  for (std::int64_t r = 0; r < n * T; ++r) rotate_prescale_row(&w[static_cast<std::size_t>(r * C)], C, s, factor);
  const Grid g = grid_of(s, T, C);
  const std::int64_t groups = g.global ? 1 : n * g.GT * g.GC;
  std::vector<std::uint32_t> amax(static_cast<std::size_t>(groups), 0u);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        auto& a = amax[static_cast<std::size_t>(group_index(s, g, i, t, c))];
        const std::uint32_t b = amax_bits(w[static_cast<std::size_t>((i * T + t) * C + c)]);
        a = b > a ? b : a;
      }
  std::vector<GroupScale> gs(static_cast<std::size_t>(groups));
  for (std::int64_t k = 0; k < groups; ++k) {
    gs[static_cast<std::size_t>(k)] = group_scale(ffrom(amax[static_cast<std::size_t>(k)]), s);
    const std::uint32_t st = gs[static_cast<std::size_t>(k)].stored;
    if (s.family == Family::mx) m.scales.push_back(static_cast<std::uint8_t>(st));
    else for (int b = 0; b < 4; ++b) m.scales.push_back(static_cast<std::uint8_t>(st >> (8 * b)));
  }
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::uint32_t code =
            element_code(w[static_cast<std::size_t>((i * T + t) * C + c)], gs[static_cast<std::size_t>(group_index(s, g, i, t, c))], s);
        m.codes.push_back(static_cast<std::uint8_t>(code));
        if (s.family == Family::cast) m.codes.push_back(static_cast<std::uint8_t>(code >> 8));
      }
  return m;
}

void expect_model_equal(const std::string& text, std::int64_t n, std::int64_t T, std::int64_t C, unsigned seed, bool specials,
                        double sm_scale) {
  SCOPED_TRACE(text + " [" + std::to_string(n) + "," + std::to_string(T) + "," + std::to_string(C) + "]" +
               (specials ? " specials" : ""));
  const std::vector<float> x = make_input(n, T, C, seed, specials);
  Tensor xt(DType::f32, {n, T, C});
  if (!x.empty()) std::memcpy(xt.data<float>(), x.data(), x.size() * 4);
  ref::QuantInputs in;
  in.sm_scale = sm_scale;
  const ref::Quantized want = ref::quantize(xt, attest::parse_scheme(text), in);
  const Model got = model(attest::parse_scheme(text), x, n, T, C, sm_scale);
  const auto wc = want.codes.storage();
  ASSERT_EQ(got.codes.size(), wc.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < wc.size(); ++i)
    if (static_cast<std::uint8_t>(wc[i]) != got.codes[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "codes differ in " << bad << " bytes; first byte " << first << ": model 0x" << std::hex
                     << int(got.codes[first]) << ", reference 0x" << int(static_cast<std::uint8_t>(wc[first]));
  const auto ws = want.scales.storage();
  ASSERT_EQ(got.scales.size(), ws.size());
  bad = 0;
  for (std::size_t i = 0; i < ws.size(); ++i)
    if (static_cast<std::uint8_t>(ws[i]) != got.scales[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "scales differ in " << bad << " bytes; first byte " << first;
  if (!got.mean.empty()) {
    EXPECT_EQ(std::memcmp(got.mean.data(), want.mean.data<float>(), got.mean.size() * 4), 0);
  }
}

TEST(DeviceQuantizeMath, EverySchemeMatchesTheReference) {
  for (const auto& s : schemes()) {
    expect_model_equal(s, 3, 150, 128, 11, false, 1.0 / std::sqrt(128.0));
    expect_model_equal(s, 2, 150, 128, 12, true, 0.125);
  }
}

TEST(DeviceQuantizeMath, OddShapes) {
  for (const auto& [s, c] : std::vector<std::pair<std::string, std::int64_t>>{
           {"mxfp4_e2m1fn", 72}, {"mxfp8_e4m3fn:block=7", 50}, {"int8:per_channel", 3}, {"fp8_e4m3fn:per_tensor", 1},
           {"int8:per_thread=sm90:role=k", 64}, {"bf16", 5}})
    for (std::int64_t t : {0, 1, 9}) expect_model_equal(s, 2, t, c, static_cast<unsigned>(t + c), false, 0.1);
}

// Element casts over every float32 exponent and the tie points of each format, every rounding and
// overflow mode, against the reference codec.
TEST(DeviceQuantizeMath, EncodeMatchesReferenceCodec) {
  const FormatId fmts[] = {FormatId::bf16, FormatId::fp16, FormatId::fp8_e4m3fn, FormatId::fp8_e5m2, FormatId::fp8_e4m3fnuz,
                           FormatId::fp8_e5m2fnuz, FormatId::fp6_e2m3fn, FormatId::fp6_e3m2fn, FormatId::fp4_e2m1fn, FormatId::int8};
  std::mt19937 rng(5);
  std::vector<float> xs;
  for (int e = -150; e <= 128; ++e)
    for (std::uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu, 0x080000u, 0x0C0000u, 0x100000u, 0x180000u, 0x200000u, 0x300000u}) {
      const std::uint32_t ef = e < -126 ? 0u : e > 127 ? 255u : static_cast<std::uint32_t>(e + 127);
      for (std::uint32_t sgn : {0u, 0x80000000u}) xs.push_back(ffrom(sgn | (ef << 23) | m));
    }
  // Every tie point of every format and its neighbours: the top 8 mantissa bits in all patterns,
  // the bits below zero, one ulp less, one ulp more (ties of formats with up to 7 mantissa bits
  // are exactly such patterns), over every exponent and both signs.
  for (std::uint32_t se = 0; se < 512; ++se)
    for (std::uint32_t top = 0; top < 256; ++top)
      for (const std::uint32_t d : {0x7FFFFFu, 0u, 1u}) xs.push_back(ffrom(((se << 23) | (top << 15)) + d));
  for (int i = 0; i < 20000; ++i) xs.push_back(ffrom(static_cast<std::uint32_t>(rng())));
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  xs.push_back(-std::numeric_limits<float>::quiet_NaN());
  for (const FormatId f : fmts)
    for (const Rounding t : {Rounding::rne, Rounding::away, Rounding::smaller})
      for (const Overflow o : {Overflow::ieee, Overflow::sat_cuda, Overflow::sat_hip}) {
        std::size_t bad = 0;
        float first = 0;
        for (float x : xs) {
          const std::uint32_t want = ref::encode(f, x, t, o) & (f == FormatId::bf16 || f == FormatId::fp16 ? 0xFFFFu : 0xFFu);
          if (encode(f, x, t, o) != want && bad++ == 0) first = x;
        }
        EXPECT_EQ(bad, 0u) << ref::format_name(f) << " " << attest::name(t) << " " << attest::name(o)
                           << ": first mismatch at " << first;
      }
}

}  // namespace
}  // namespace attest::gpu

namespace attest::gpu {
namespace {

// hadamard32_bf16's shared-prefix evaluation against the reference's 32 sequential chains, on
// blocks of mixed magnitudes (sums that round), exact ties, zeros of both signs and Inf.
TEST(DeviceQuantizeMath, Hadamard32MatchesTheReference) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 30), pick(0, 31);
  std::size_t bad = 0;
  for (int b = 0; b < 20000; ++b) {
    float x[32], y[32];
    for (int j = 0; j < 32; ++j) {
      x[j] = std::ldexp(nd(rng), ex(rng) / (b % 4 + 1));
      if (pick(rng) == 0) x[j] = (b & 1) != 0 ? -0.0f : 0.0f;
    }
    if (b % 97 == 0) x[b % 32] = std::numeric_limits<float>::infinity();
    std::memcpy(y, x, sizeof x);
    hadamard32_bf16(x);
    ref::hadamard32_bf16(std::span<float>(y, 32));
    for (int j = 0; j < 32; ++j)
      if (fbits(x[j]) != fbits(y[j]) && !(is_nan(x[j]) && is_nan(y[j]))) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}

// The device quantizers keep their own bit-level constants (fmt_info); they must describe the
// rows of core's format table they are indexed by.
TEST(DeviceQuantizeMath, FormatConstantsAreTheFormatTable) {
  int checked = 0;
  for (FormatId id : all_format_ids()) {
    if (id == FormatId::e8m0fnu || id == FormatId::f32) continue;  // no device codec
    const FormatSpec& s = format_spec(id);
    const qm::FmtInfo fi = qm::fmt_info(id);
    SCOPED_TRACE(std::string(s.name));
    EXPECT_EQ(static_cast<double>(qm::ffrom(fi.max_bits)), s.max_finite);
    EXPECT_EQ(fi.sign, 1u << (s.bits - 1));
    EXPECT_EQ(fi.fnuz, s.fnuz);
    if (id == FormatId::int8) continue;  // an integer: no mantissa/bias/special values here
    EXPECT_EQ(fi.man, s.man_bits);
    EXPECT_EQ(fi.bias, s.bias);
    EXPECT_EQ(fi.has_inf, s.has_inf);
    EXPECT_EQ(fi.has_nan, s.has_nan);
    EXPECT_EQ(fi.emax, s.emax_elem);
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

TEST(DeviceQuantizeMath, TheIdentityIsNotADeviceQuantizer) {
  try {
    require_device_quantizer(attest::parse_scheme("f32"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "scheme 'f32': f32 is the identity operand of a recipe, not a quantizer");
  }
  // The shared grammar's strictness holds on the device side too (the old device parser let
  // these through).
  EXPECT_THROW(attest::parse_scheme("int8:per_block=64:role=k"), Error);
  EXPECT_THROW(attest::parse_scheme("int8:per_block=64:scale_max=100"), Error);
}

}  // namespace
}  // namespace attest::gpu

// ---- the fast path (quantize_fast.hpp) in the kernels' schedule ----
//
// quantize.hip's fast kernels are quantize_fast.hpp's plan and per-thread code plus three
// cross-thread steps: xor-butterfly maxima over aligned lane segments, shared-memory maxima of a
// span's groups, and the h128 FWHT's cross-lane stages. Here every block of the plan's grid runs
// on the CPU thread by thread with those steps done as the kernels do them, so the addressing
// (tiles, rows, chunks, codes and scale indices), the masks of partial tiles and the arithmetic
// are the device's own code, checked against the reference quantizers.

#include "attest/kernels/gpu/quantize_fast.hpp"

namespace attest::gpu {
namespace {

template <int V>
void sim_prepare(std::vector<qf::Chunks<V>>& th, const qf::FastArgs& a, std::int32_t tile) {
  for (std::size_t tid = 0; tid < th.size(); ++tid) {
    th[tid].setup(a, tile, static_cast<std::int32_t>(tid));
    th[tid].load(a);
    th[tid].smooth(a);
    if constexpr (V == 32) th[tid].rotate_local(a.s);
  }
  if (V == 32 && (a.s.rotate == Rotation::h128 || a.s.rotate == Rotation::h128_bf16))
    for (int mask = 1; mask <= 2; mask <<= 1) {
      const std::vector<qf::Chunks<V>> before = th;  // a shuffle reads the partner's value before the stage
      for (std::size_t tid = 0; tid < th.size(); ++tid)
        th[tid].fwht_cross(before[tid ^ static_cast<std::size_t>(mask)].v[0], (th[tid].cc & mask) != 0);
    }
  for (auto& t : th) t.finish(a);
}

// Max of chunk k's amax over the aligned segment of `width` lanes holding lane tid.
template <int V>
std::uint32_t sim_seg_max(const std::vector<qf::Chunks<V>>& th, std::size_t tid, int k, int width) {
  const std::size_t first = tid & ~static_cast<std::size_t>(width - 1);
  std::uint32_t m = 0;
  for (std::size_t u = first; u < first + static_cast<std::size_t>(width); ++u) m = std::max(m, th[u].chunk_amax(k));
  return m;
}

template <int V, FormatId F, Family FAM>
void sim_codes(const qf::FastPlan& p, const qf::FastArgs& a) {
  constexpr int K = qf::Chunks<V>::K;
  std::vector<qf::Chunks<V>> th(static_cast<std::size_t>(p.threads));
  const int tpr = 1 << a.tpr_log2;
  for (std::int64_t tile = 0; tile < p.grid; ++tile) {
    sim_prepare<V>(th, a, static_cast<std::int32_t>(tile));
    if (a.kind == qf::Kind::elementwise) {
      for (auto& t : th)
        for (int k = 0; k < K; ++k) {
          if (!t.ok[k]) continue;
          if (a.gs == nullptr) t.template store<F, FAM>(a, k, [](int) { return GroupScale{fbits(1.0f), 1.0f, 1.0f}; });
          else if (a.s.granularity == Granularity::per_channel)
            t.template store<F, FAM>(a, k, [&](int j) { return a.gs[static_cast<std::int64_t>(t.slab) * a.C + t.c0 + j]; });
          else t.template store<F, FAM>(a, k, [&](int) { return a.gs[0]; });
        }
      continue;
    }
    std::vector<std::array<GroupScale, K>> g(th.size());
    if (a.kind == qf::Kind::per_token || a.kind == qf::Kind::mx) {
      const bool mx = a.kind == qf::Kind::mx;
      const int width = mx ? 1 << a.lpg_log2 : tpr;
      for (std::size_t tid = 0; tid < th.size(); ++tid)
        for (int k = 0; k < K; ++k) {
          g[tid][static_cast<std::size_t>(k)] = group_scale_t<F>(ffrom(sim_seg_max(th, tid, k, width)), a.s);
          if (th[tid].ok[k] && (th[tid].cc & (width - 1)) == 0)
            qf::store_scale(a.scales, mx, mx ? th[tid].mx_scale_index(a, k) : th[tid].token_scale_index(a, k),
                            g[tid][static_cast<std::size_t>(k)].stored);
        }
    } else {
      std::uint32_t s_amax[8] = {};
      for (std::size_t tid = 0; tid < th.size(); ++tid)
        for (int k = 0; k < K; ++k) {
          const std::uint32_t m = sim_seg_max(th, tid, k, tpr);
          auto& slot = s_amax[qf::row_group(a.s, th[tid].t[k])];
          if (th[tid].cc == 0 && m != 0u) slot = std::max(slot, m);
        }
      GroupScale s_gs[8];
      for (int q = 0; q < a.local_groups; ++q) {
        s_gs[q] = group_scale_t<F>(ffrom(s_amax[q]), a.s);
        qf::store_scale(a.scales, false, tile * a.gc + q, s_gs[q].stored);
      }
      for (std::size_t tid = 0; tid < th.size(); ++tid)
        for (int k = 0; k < K; ++k) g[tid][static_cast<std::size_t>(k)] = s_gs[qf::row_group(a.s, th[tid].t[k])];
    }
    for (std::size_t tid = 0; tid < th.size(); ++tid)
      for (int k = 0; k < K; ++k)
        if (th[tid].ok[k]) th[tid].template store<F, FAM>(a, k, [&](int) { return g[tid][static_cast<std::size_t>(k)]; });
  }
}

template <int V>
void sim_dispatch(const qf::FastPlan& p, const qf::FastArgs& a) {
  using FI = FormatId;
  const Scheme& s = a.s;
  switch (s.family) {
    case Family::cast:
      if constexpr (V == 8) {
        if (s.element == FI::bf16) return sim_codes<V, FI::bf16, Family::cast>(p, a);
        if (s.element == FI::fp16) return sim_codes<V, FI::fp16, Family::cast>(p, a);
      }
      break;
    case Family::int8: return sim_codes<V, FI::int8, Family::int8>(p, a);
    case Family::fp8:
      if (s.element == FI::fp8_e4m3fn) return sim_codes<V, FI::fp8_e4m3fn, Family::fp8>(p, a);
      if (s.element == FI::fp8_e5m2) return sim_codes<V, FI::fp8_e5m2, Family::fp8>(p, a);
      if (s.element == FI::fp8_e4m3fnuz) return sim_codes<V, FI::fp8_e4m3fnuz, Family::fp8>(p, a);
      if (s.element == FI::fp8_e5m2fnuz) return sim_codes<V, FI::fp8_e5m2fnuz, Family::fp8>(p, a);
      break;
    case Family::mx:
      if (s.element == FI::fp8_e4m3fn) return sim_codes<V, FI::fp8_e4m3fn, Family::mx>(p, a);
      if (s.element == FI::fp8_e5m2) return sim_codes<V, FI::fp8_e5m2, Family::mx>(p, a);
      if (s.element == FI::fp6_e2m3fn) return sim_codes<V, FI::fp6_e2m3fn, Family::mx>(p, a);
      if (s.element == FI::fp6_e3m2fn) return sim_codes<V, FI::fp6_e3m2fn, Family::mx>(p, a);
      if (s.element == FI::fp4_e2m1fn) return sim_codes<V, FI::fp4_e2m1fn, Family::mx>(p, a);
      if (s.element == FI::int8) return sim_codes<V, FI::int8, Family::mx>(p, a);
      break;
    case Family::identity: break;
  }
  FAIL() << "no fast kernel for " << to_string(s);
}

// amax_fast_kernel's blocks: tiles [i0, i1) of one slab each, maxima per group.
template <int V>
void sim_amax(const qf::FastPlan& p, const qf::FastArgs& a, std::int64_t n, std::vector<std::uint32_t>& amax) {
  constexpr int K = qf::Chunks<V>::K;
  const bool per_channel = a.s.granularity == Granularity::per_channel;
  std::vector<qf::Chunks<V>> th(static_cast<std::size_t>(qf::kFastThreads));
  std::vector<int> seen(static_cast<std::size_t>(n * a.tiles_per_slab), 0);
  const std::int32_t tiles = p.amax_tiles, bps = (a.tiles_per_slab + tiles - 1) / tiles;
  for (std::int64_t b = 0; b < p.amax_grid; ++b) {
    const std::int32_t slab = static_cast<std::int32_t>(b) / bps;
    const std::int32_t i0 = (static_cast<std::int32_t>(b) - slab * bps) * tiles;
    const std::int32_t i1 = std::min(i0 + tiles, a.tiles_per_slab);
    for (std::int32_t i = i0; i < i1; ++i) {
      ++seen[static_cast<std::size_t>(slab * a.tiles_per_slab + i)];
      sim_prepare<V>(th, a, slab * a.tiles_per_slab + i);
      for (const auto& t : th)
        for (int k = 0; k < K; ++k)
          for (int j = 0; j < V; ++j) {
            const std::uint32_t v = t.ok[k] ? amax_bits(t.v[k][j]) : 0u;
            auto& slot = amax[per_channel ? static_cast<std::size_t>(slab * a.C + t.c0 + j) : 0u];
            slot = std::max(slot, v);
          }
    }
  }
  for (int s : seen) ASSERT_EQ(s, 1) << "a tile covered " << s << " times by the amax blocks";
}

// quantize_codes_bytes / quantize_scales_bytes (quantize.hip, not in CPU builds).
std::size_t codes_bytes(const Scheme& s, std::int64_t elements) {
  return static_cast<std::size_t>(elements) * (s.family == Family::cast ? 2 : 1);
}
std::size_t scales_bytes(const Scheme& s, std::int64_t n, std::int64_t T, std::int64_t C) {
  const Grid g = grid_of(s, T, C);
  return static_cast<std::size_t>(g.global ? 1 : n * g.GT * g.GC) * (s.family == Family::mx ? 1 : 4);
}

struct FastResult {
  bool ok = false;
  std::string why;
  std::vector<std::uint8_t> codes, scales;
};

// The fast path on the CPU for x_bshd [B, S, H, D] viewed as [B, H, S, D] (as the GPU test).
FastResult run_fast(const std::string& text, const Tensor& x_bshd, double sm_scale) {
  const Scheme s = parse_scheme(text);
  const std::int64_t B = x_bshd.dim(0), S = x_bshd.dim(1), H = x_bshd.dim(2), D = x_bshd.dim(3), n = B * H;
  std::vector<qf::Words4> xbuf((static_cast<std::size_t>(x_bshd.numel()) + 3) / 4);
  std::memcpy(xbuf.data(), x_bshd.data<float>(), static_cast<std::size_t>(x_bshd.numel()) * 4);
  const auto* x = reinterpret_cast<const float*>(xbuf.data());
  std::vector<qf::Words4> codes((codes_bytes(s, n * S * D) + 15) / 16);
  qf::FastInput in{B, H, S, D, {S * H * D, D, H * D, 1}, x, codes.data()};
  FastResult r;
  const qf::FastPlan p = qf::plan_fast(s, in);
  r.ok = p.ok;
  r.why = p.why;
  if (!p.ok) return r;
  std::vector<std::uint8_t> scales(scales_bytes(s, n, S, D), 0xA5);
  std::memset(codes.data(), 0xA5, codes.size() * 16);
  qf::FastArgs a = p.args;
  a.x = x;
  a.codes = codes.data();
  a.scales = scales.data();
  a.factor = s.prescale == Prescale::sm_log2e ? static_cast<float>(sm_scale * 1.44269504) : 1.0f;
  std::vector<qf::Words4> km((static_cast<std::size_t>(n * D) + 3) / 4);
  if (s.smooth != Smoothing::none) {  // the mean kernels' arithmetic: double sum in token order
    auto* kp = reinterpret_cast<float*>(km.data());
    const float* xs = x_bshd.data<float>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (std::int64_t t = 0; t < S; ++t) acc += static_cast<double>(xs[((b * S + t) * H + h) * D + d]);
          float m = static_cast<float>(acc / static_cast<double>(S));
          if (s.smooth == Smoothing::bf16) m = round_bf16(m);
          kp[(b * H + h) * D + d] = m;
        }
    a.km = kp;
  }
  std::vector<GroupScale> gs;
  if (p.two_pass) {
    const std::int64_t groups = s.granularity == Granularity::per_channel ? n * D : 1;
    std::vector<std::uint32_t> amax(static_cast<std::size_t>(groups), 0u);
    if (p.V == 8) sim_amax<8>(p, a, n, amax);
    else sim_amax<32>(p, a, n, amax);
    for (std::int64_t k = 0; k < groups; ++k) {  // scales_kernel
      gs.push_back(group_scale(ffrom(amax[static_cast<std::size_t>(k)]), s));
      qf::store_scale(a.scales, false, k, gs.back().stored);
    }
    a.gs = gs.data();
  }
  if (s.family == Family::cast) {  // one_kernel
    const float one = 1.0f;
    std::memcpy(scales.data(), &one, 4);
  }
  if (p.V == 8) sim_dispatch<8>(p, a);
  else sim_dispatch<32>(p, a);
  r.codes.resize(codes_bytes(s, n * S * D));
  std::memcpy(r.codes.data(), codes.data(), r.codes.size());
  r.scales = scales;
  return r;
}

Tensor make_bshd(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D, unsigned seed, bool specials) {
  const std::vector<float> flat = make_input(B * S, H, D, seed, false);
  Tensor x(DType::f32, {B, S, H, D});
  std::memcpy(x.data<float>(), flat.data(), flat.size() * 4);
  if (specials) {
    auto v = x.view<float, 4>();
    v(0, 3, 0, 5) = std::numeric_limits<float>::quiet_NaN();
    v(B - 1, 40, H - 1, 7) = std::numeric_limits<float>::infinity();
    v(B - 1, 41, H > 1 ? 1 : 0, 9) = -std::numeric_limits<float>::infinity();
    for (std::int64_t d = 0; d < D; ++d) v(0, 7, H > 1 ? 1 : 0, d) = 0.0f;
    v(B - 1, 100, 0, 3) = 3.0e38f;
    v(0, 90, H - 1, 1) = -1.0e-40f;
  }
  return x;
}

bool same_f32_bits(std::uint32_t a, std::uint32_t b) {
  return a == b || ((a & 0x7FFFFFFFu) > 0x7F800000u && (b & 0x7FFFFFFFu) > 0x7F800000u);
}

void expect_fast_equal(const std::string& text, const Tensor& x_bshd, double sm_scale, bool must_take) {
  SCOPED_TRACE(text + " [" + std::to_string(x_bshd.dim(0)) + "," + std::to_string(x_bshd.dim(1)) + "," +
               std::to_string(x_bshd.dim(2)) + "," + std::to_string(x_bshd.dim(3)) + "] bshd");
  const FastResult got = run_fast(text, x_bshd, sm_scale);
  if (must_take) {
    ASSERT_TRUE(got.ok) << "the fast path refused: " << got.why;
  }
  if (!got.ok) return;
  ref::QuantInputs in;
  in.sm_scale = sm_scale;
  const Scheme s = parse_scheme(text);
  const ref::Quantized want = ref::quantize(x_bshd.permute({0, 2, 1, 3}), s, in);
  const auto wc = want.codes.storage();
  ASSERT_EQ(got.codes.size(), wc.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < wc.size(); ++i)
    if (static_cast<std::uint8_t>(wc[i]) != got.codes[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "codes differ in " << bad << " bytes; first byte " << first << ": fast 0x" << std::hex
                     << int(got.codes[first]) << ", reference 0x" << int(static_cast<std::uint8_t>(wc[first]));
  const auto ws = want.scales.storage();
  ASSERT_EQ(got.scales.size(), ws.size());
  bad = 0;
  if (s.family == Family::mx) {
    for (std::size_t i = 0; i < ws.size(); ++i)
      if (static_cast<std::uint8_t>(ws[i]) != got.scales[i] && bad++ == 0) first = i;
  } else {
    for (std::size_t i = 0; i < ws.size() / 4; ++i) {
      std::uint32_t a, b;
      std::memcpy(&a, ws.data() + 4 * i, 4);
      std::memcpy(&b, got.scales.data() + 4 * i, 4);
      if (!same_f32_bits(a, b) && bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << "scales differ in " << bad << " entries; first " << first;
}

// Every scheme the device tests run, on their input (bshd [2, 150, 3, 128] as [B, H, S, D]:
// strided rows, 150 tokens so every group kind has a partial last span), with and without
// special values: the fast path must take each one and equal the reference.
TEST(DeviceQuantizeFast, EverySchemeMatchesTheReference) {
  for (const auto& s : schemes()) {
    expect_fast_equal(s, make_bshd(2, 150, 3, 128, 21, false), 1.0 / std::sqrt(128.0), true);
    expect_fast_equal(s, make_bshd(2, 150, 3, 128, 22, true), 0.125, true);
  }
}

// Other head dims (chunks per row 1 .. 32), a single token, single heads.
TEST(DeviceQuantizeFast, OtherShapes) {
  for (const auto& s : schemes()) {
    if (s.find("h128") != std::string::npos) continue;  // 128 channels only
    for (const auto& [B, S, H, D] : std::vector<std::array<std::int64_t, 4>>{{1, 9, 2, 64}, {1, 70, 1, 256}, {2, 33, 1, 32}, {1, 1, 1, 64}}) {
      // D = 256: spans of 128 rows would need 1024 threads; the plan leaves them to the generic path.
      expect_fast_equal(s, make_bshd(B, S, H, D, static_cast<unsigned>(S * 7 + D), false), 0.3, D <= 128);
    }
  }
}

// Spans that are not a multiple of a thread's 4 rows (the tile mask), mx blocks of 8 and 64
// channels (1 and 8 lanes per block), per_channel with smoothing and prescale.
TEST(DeviceQuantizeFast, OddSpansAndBlocks) {
  for (const std::string s : {"int8:per_block=6:scale=eps", "fp8_e4m3fn:per_block=3:apply=div", "int8:per_block=1",
                              "mxfp8_e4m3fn:block=8", "mxfp4_e2m1fn:block=64:scale=rceil",
                              "int8:per_channel:smooth=bf16:prescale=sm_log2e", "fp8_e5m2:per_tensor:smooth=fp32"}) {
    expect_fast_equal(s, make_bshd(2, 150, 3, 128, 31, true), 0.2, true);
    expect_fast_equal(s, make_bshd(1, 13, 2, 64, 32, false), 0.2, true);
  }
}

// The plan's refusals: the generic kernels take these (DeviceQuantizeShapes on the device).
TEST(DeviceQuantizeFast, PlanRefusesWhatItCannotIndex) {
  auto why = [](const std::string& text, std::int64_t T, std::int64_t C, std::int64_t sc, std::uintptr_t xoff) {
    const Scheme s = parse_scheme(text);
    qf::FastInput in{1, 2, T, C, {2 * T * C, T * C, C, sc}, reinterpret_cast<const void*>(0x1000 + xoff),
                     reinterpret_cast<const void*>(0x2000)};
    return qf::plan_fast(s, in);
  };
  EXPECT_TRUE(why("int8:per_token", 100, 128, 1, 0).ok);
  EXPECT_FALSE(why("int8:per_token", 100, 128, 2, 0).ok);   // channel stride
  EXPECT_FALSE(why("int8:per_token", 100, 72, 1, 0).ok);    // 9 chunks per row
  EXPECT_FALSE(why("int8:per_token", 100, 512, 1, 0).ok);   // 64 chunks per row
  EXPECT_FALSE(why("int8:per_token", 100, 128, 1, 4).ok);   // misaligned rows
  EXPECT_FALSE(why("mxfp8_e4m3fn:block=7", 100, 128, 1, 0).ok);
  EXPECT_FALSE(why("mxfp4_e2m1fn", 100, 80, 1, 0).ok);      // C not a multiple of the block
  EXPECT_FALSE(why("int8:per_block=1024", 100, 128, 1, 0).ok);  // a span too tall for one block
  EXPECT_TRUE(why("int8:per_block=128", 100, 128, 1, 0).ok);
  EXPECT_FALSE(why("int8:per_token", std::int64_t{1} << 31, 128, 1, 0).ok);  // 32-bit tokens
  const qf::FastPlan p = why("int8:per_thread=sm90:role=k", 100, 128, 1, 0);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.threads, 512);
  EXPECT_EQ(p.args.tile_rows, 128);
}

}  // namespace
}  // namespace attest::gpu
