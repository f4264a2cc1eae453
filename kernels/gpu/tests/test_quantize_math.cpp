// The device quantizers' scalar arithmetic (quantize_math.hpp, host/device) run on the CPU in the
// device kernels' schedule (mean in token order, per-row pre-transforms, amax as a max over |x|
// bits, one scale per group, one code per element) must give the reference quantizers' bits for
// every scheme. Runs in CI without a GPU, so a numerics bug shows here before the device run;
// gpu_tests (DeviceQuantize.*) then checks the kernels themselves on the device.
#include <gtest/gtest.h>

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

