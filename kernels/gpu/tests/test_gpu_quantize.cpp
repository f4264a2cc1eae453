// Device quantizers == reference quantizers (attest::ref::quantize), bit for bit: codes, scales
// and smoothing means, for every family, granularity, scale rule, rounding, overflow mode and
// pre-transform, on a strided (bshd viewed as [B, H, S, D]) input whose token count is not a
// multiple of any group height, plus special values (NaN, Inf, zero groups, huge values, ties).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/quantize.hpp"
#include "attest/reference/quantize.hpp"
#include "gpu_test_util.hpp"
#include "quantize_schemes.hpp"

namespace attest::gpu {
namespace {

using test::schemes;  // quantize_schemes.hpp

/// A bshd tensor [B, S, H, D] of mixed magnitudes: normal values scaled per (token, head) over
/// 2^-12 .. 2^12, with exact ties for the element grids (multiples of 2^-4 plus a half step)
/// sprinkled in; `specials` adds NaN, +-Inf, a zero token and values near FLT_MAX.
Tensor make_input(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D, unsigned seed, bool specials) {
  Tensor x(DType::f32, {B, S, H, D});
  auto v = x.view<float, 4>();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-12, 12), tie(-64, 64), pick(0, 15);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t h = 0; h < H; ++h) {
        const float scale = std::ldexp(1.0f, ex(rng));
        for (std::int64_t d = 0; d < D; ++d) {
          float val = nd(rng) * scale;
          if (pick(rng) == 0) val = (static_cast<float>(tie(rng)) + 0.5f) * 0.0625f;  // ties
          v(b, s, h, d) = val;
        }
      }
  if (specials) {
    v(0, 3, 0, 5) = std::numeric_limits<float>::quiet_NaN();
    v(1, 40, 2, 7) = std::numeric_limits<float>::infinity();
    v(1, 41, 1, 9) = -std::numeric_limits<float>::infinity();
    for (std::int64_t d = 0; d < D; ++d) v(0, 7, 1, d) = 0.0f;
    v(1, 100, 0, 3) = 3.0e38f;
    v(0, 90, 2, 1) = -1.0e-40f;  // subnormal
  }
  return x;
}

struct DeviceResult {
  std::vector<std::uint8_t> codes, scales;
  std::vector<float> mean;
};

DeviceResult run_device(const std::string& scheme, const Tensor& x_bshd, double sm_scale, bool allow_fast) {
  const Scheme ds = parse_scheme(scheme);
  const std::int64_t B = x_bshd.dim(0), S = x_bshd.dim(1), H = x_bshd.dim(2), D = x_bshd.dim(3);
  DeviceBuffer x(x_bshd.storage().size());
  x.upload(x_bshd.storage().data(), x.bytes());
  QuantizeArgs a;
  a.x = x.as<float>();
  a.lead0 = B, a.lead1 = H, a.T = S, a.C = D;
  // [B, H, S, D] view of the bshd buffer.
  a.stride[0] = S * H * D, a.stride[1] = D, a.stride[2] = H * D, a.stride[3] = 1;
  a.sm_scale = sm_scale;
  const std::int64_t n = B * H;
  DeviceBuffer codes(quantize_codes_bytes(ds, n * S * D)), scales(quantize_scales_bytes(ds, n, S, D)),
      mean(static_cast<std::size_t>(n * D) * 4), ws(quantize_workspace_bytes(ds, n, S, D));
  codes.fill_bytes(0xA5);
  scales.fill_bytes(0xA5);
  a.codes = codes.data();
  a.scales = scales.data();
  a.mean_out = ds.smooth != Scheme::Smoothing::none ? mean.as<float>() : nullptr;
  a.workspace = ws.data();
  a.allow_fast = allow_fast;
  quantize_device(ds, a);
  synchronize();
  DeviceResult r;
  r.codes.resize(codes.bytes());
  r.scales.resize(scales.bytes());
  codes.download(r.codes.data(), codes.bytes());
  scales.download(r.scales.data(), scales.bytes());
  if (a.mean_out != nullptr) {
    r.mean.resize(static_cast<std::size_t>(n * D));
    mean.download(r.mean.data(), mean.bytes());
  }
  return r;
}

// Scales compare bitwise except that any NaN equals any NaN (NaN payloads are not specified by
// IEEE arithmetic and NVIDIA returns its canonical NaN).
bool same_f32(std::uint32_t a, std::uint32_t b) {
  float fa, fb;
  std::memcpy(&fa, &a, 4);
  std::memcpy(&fb, &b, 4);
  return a == b || (std::isnan(fa) && std::isnan(fb));
}

void expect_equal(const std::string& scheme, const Tensor& x_bshd, double sm_scale, bool allow_fast = true) {
  SCOPED_TRACE(scheme + (allow_fast ? "" : " (generic kernels)"));
  const attest::Scheme rs = attest::parse_scheme(scheme);
  ref::QuantInputs in;
  in.sm_scale = sm_scale;
  const ref::Quantized want = ref::quantize(x_bshd.permute({0, 2, 1, 3}), rs, in);
  const DeviceResult got = run_device(scheme, x_bshd, sm_scale, allow_fast);

  const auto wc = want.codes.storage();
  ASSERT_EQ(got.codes.size(), wc.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < wc.size(); ++i)
    if (static_cast<std::uint8_t>(wc[i]) != got.codes[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << "codes differ in " << bad << " bytes; first byte " << first << ": device 0x" << std::hex
                     << int(got.codes[first]) << ", reference 0x" << int(static_cast<std::uint8_t>(wc[first]));

  const auto ws = want.scales.storage();
  ASSERT_EQ(got.scales.size(), ws.size());
  bad = 0;
  if (rs.family == ref::Family::mx) {
    for (std::size_t i = 0; i < ws.size(); ++i)
      if (static_cast<std::uint8_t>(ws[i]) != got.scales[i] && bad++ == 0) first = i;
  } else {
    for (std::size_t i = 0; i < ws.size() / 4; ++i) {
      std::uint32_t a, b;
      std::memcpy(&a, ws.data() + 4 * i, 4);
      std::memcpy(&b, got.scales.data() + 4 * i, 4);
      if (!same_f32(a, b) && bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << "scales differ in " << bad << " entries; first " << first;

  if (rs.smooth != ref::Smoothing::none) {
    ASSERT_EQ(static_cast<std::int64_t>(got.mean.size()), want.mean.numel());
    EXPECT_EQ(std::memcmp(got.mean.data(), want.mean.data<float>(), got.mean.size() * 4), 0) << "smoothing means differ";
  }
}

class DeviceQuantize : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceQuantize, BitwiseEqualToReference) {
  ATTEST_REQUIRE_GPU();
  // 150 tokens: no multiple of 8, 16, 32, 64 or 128, so every group kind has a partial last group.
  const Tensor x = make_input(2, 150, 3, 128, 12345, false);
  expect_equal(GetParam(), x, 1.0 / std::sqrt(128.0));
}

TEST_P(DeviceQuantize, SpecialValues) {
  ATTEST_REQUIRE_GPU();
  const Tensor x = make_input(2, 150, 3, 128, 777, true);
  expect_equal(GetParam(), x, 0.125);
}

// The same inputs through the generic kernels (the fast path takes every scheme above at these
// shapes; the generic ones run for other strides and shapes and must stay equal too).
TEST_P(DeviceQuantize, GenericKernelsBitwiseEqualToReference) {
  ATTEST_REQUIRE_GPU();
  expect_equal(GetParam(), make_input(2, 150, 3, 128, 12345, false), 1.0 / std::sqrt(128.0), false);
  expect_equal(GetParam(), make_input(2, 150, 3, 128, 777, true), 0.125, false);
}

INSTANTIATE_TEST_SUITE_P(Schemes, DeviceQuantize, ::testing::ValuesIn(schemes()),
                         [](const ::testing::TestParamInfo<std::string>& pi) {
                           std::string n = std::to_string(pi.index) + "_";
                           for (char c : pi.param) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(DeviceQuantizeShapes, SmallAndOddShapes) {
  ATTEST_REQUIRE_GPU();
  // Channel counts that are not multiples of the MX block, a single token, GQA-like head counts.
  for (const auto& [scheme, d] : std::vector<std::pair<std::string, std::int64_t>>{
           {"mxfp4_e2m1fn", 72}, {"mxfp8_e4m3fn:block=7", 50}, {"int8:per_channel", 3}, {"fp8_e4m3fn:per_tensor", 1},
           {"int8:per_thread=sm90:role=k", 64}, {"bf16", 5}}) {
    for (std::int64_t s : {1, 9}) {
      const Tensor x = make_input(1, s, 2, d, static_cast<unsigned>(s * 31 + d), false);
      expect_equal(scheme, x, 0.1);
    }
  }
}

TEST(DeviceQuantizeScheme, RefusesWhatTheGrammarRefuses) {
  EXPECT_THROW(parse_scheme("int8"), Error);                      // no granularity
  EXPECT_THROW(parse_scheme("int8:per_token:per_block=3"), Error);  // two granularities
  EXPECT_THROW(parse_scheme("fp4"), Error);                       // unknown head
  EXPECT_THROW(parse_scheme("int8:per_token:scale=eps:apply=mul"), Error);
  EXPECT_THROW(parse_scheme("bf16:smooth=fp32"), Error);          // key not for casts
  EXPECT_THROW(parse_scheme("mxfp8_e4m3fn:round=rne:round=away"), Error);
  EXPECT_NO_THROW(parse_scheme("mxfp6_e2m3fn:scale=aiter_hip_fp6:prescale=sm_log2e:rotate=h128_bf16"));
}

}  // namespace
}  // namespace attest::gpu
