// Tensor-level quantizers: Sage groupings worked out by hand, V FP8 per channel, MX blocks, K
// smoothing, and the dequantization error bound derived from each scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::ref {
namespace {

Tensor make(const Shape& shape, const std::vector<float>& v) {
  Tensor t(DType::f32, shape);
  EXPECT_EQ(static_cast<std::size_t>(t.numel()), v.size());
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor random_tensor(const Shape& shape, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor t(DType::f32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng) * scale;
  return t;
}

// [T, 2] tensor with x[t][0] = t + 1, x[t][1] = -(t + 1) / 2: each group's amax is its largest
// token index + 1.
Tensor ramp(std::int64_t T) {
  std::vector<float> v;
  for (std::int64_t t = 0; t < T; ++t) v.insert(v.end(), {static_cast<float>(t + 1), -static_cast<float>(t + 1) / 2});
  return make({T, 2}, v);
}

TEST(SageGroups, PerThreadQSm89) {
  // 40 tokens: warp 0 = tokens 0..31, warp 1 = 32..39. Q groups by t % 8: warp 0 group g holds
  // tokens g, g+8, g+16, g+24 -> amax g + 25; warp 1 group g holds token 32 + g -> amax 33 + g.
  const Scheme s = parse_scheme("int8:per_thread=sm89");
  const Quantized q = quantize(ramp(40), s);
  ASSERT_EQ(q.scales.shape(), (Shape{2, 8}));
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(q.scales.data<float>()[g], static_cast<float>(g + 25) / 127.0f) << g;
    EXPECT_EQ(q.scales.data<float>()[8 + g], static_cast<float>(33 + g) / 127.0f) << g;
  }
  // Token 24 (group 0 of warp 0, amax 25): 25 / (25/127) -> 127.
  EXPECT_EQ(q.codes.data<std::int8_t>()[24 * 2], 127);
}

TEST(SageGroups, PerThreadKSm89) {
  // 70 tokens: warps of 64 -> warp 0 = 0..63, warp 1 = 64..69. K group g holds rows with
  // t % 8 in {2g, 2g+1}: warp 0 group 1 -> max token 59 -> amax 60; warp 1: group 0 = {64, 65}
  // -> 66, group 1 = {66, 67} -> 68, group 2 = {68, 69} -> 70, group 3 empty -> amax 0.
  const Scheme s = parse_scheme("int8:per_thread=sm89:role=k:scale=eps");
  const Quantized q = quantize(ramp(70), s);
  ASSERT_EQ(q.scales.shape(), (Shape{2, 4}));
  const float* sc = q.scales.data<float>();
  EXPECT_EQ(sc[0], 58.0f / 127.0f + 1e-7f);  // rows 0,1,8,9,...,56,57
  EXPECT_EQ(sc[1], 60.0f / 127.0f + 1e-7f);
  EXPECT_EQ(sc[3], 64.0f / 127.0f + 1e-7f);
  EXPECT_EQ(sc[4], 66.0f / 127.0f + 1e-7f);
  EXPECT_EQ(sc[5], 68.0f / 127.0f + 1e-7f);
  EXPECT_EQ(sc[6], 70.0f / 127.0f + 1e-7f);
  EXPECT_EQ(sc[7], 1e-7f);  // empty group: 0/127 + 1e-7
}

TEST(SageGroups, PerThreadSm90AndPerWarp) {
  // sm90 Q warp = 16 rows: 20 tokens -> warps {0..15}, {16..19}; group g of warp 0 = {g, g+8}
  // -> amax g + 9.
  const Quantized q = quantize(ramp(20), parse_scheme("int8:per_thread=sm90"));
  ASSERT_EQ(q.scales.shape(), (Shape{2, 8}));
  EXPECT_EQ(q.scales.data<float>()[3], 12.0f / 127.0f);
  EXPECT_EQ(q.scales.data<float>()[8 + 3], 20.0f / 127.0f);  // token 19
  EXPECT_EQ(q.scales.data<float>()[8 + 4], 0.0f);             // no token 20 -> amax 0
  // sm90 K warp = 128 rows: 130 tokens -> 2 warps; per_warp: one scale per warp.
  const Quantized k = quantize(ramp(130), parse_scheme("int8:per_warp=sm90:role=k"));
  ASSERT_EQ(k.scales.shape(), (Shape{2, 1}));
  EXPECT_EQ(k.scales.data<float>()[0], 128.0f / 127.0f);
  EXPECT_EQ(k.scales.data<float>()[1], 130.0f / 127.0f);
  // sm89 Q per_warp = 32 rows, same as per_block=32.
  const Quantized a = quantize(ramp(70), parse_scheme("int8:per_warp=sm89"));
  const Quantized b = quantize(ramp(70), parse_scheme("int8:per_block=32"));
  ASSERT_EQ(a.scales.shape(), (Shape{3, 1}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.scales.data<float>()[i], b.scales.data<float>()[i]);
  EXPECT_EQ(a.scales.data<float>()[2], 70.0f / 127.0f);
}

TEST(Int8Tensor, HandExampleRneAndHalf) {
  // amax 127 -> s = 1 exactly (ieee), q = x: rne vs half on ties.
  const Tensor x = make({1, 7}, {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -126.7f});
  const Quantized r = quantize(x, parse_scheme("int8:per_tensor"));
  const Quantized h = quantize(x, parse_scheme("int8:per_tensor:round=half"));
  EXPECT_EQ(r.scales.data<float>()[0], 1.0f);
  const std::vector<int> want_r{127, 2, -2, 0, 0, 2, -127}, want_h{127, 3, -3, 1, -1, 2, -127};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(r.codes.data<std::int8_t>()[i], want_r[static_cast<std::size_t>(i)]) << i;
    EXPECT_EQ(h.codes.data<std::int8_t>()[i], want_h[static_cast<std::size_t>(i)]) << i;
  }
  // eps: s = 1 + 2^-23; 2.5 / s = 2.49999976 (one ulp below 2.5), + 0.5 = 2.99999976 -> 2.
  const Quantized e = quantize(x, parse_scheme("int8:per_tensor:scale=eps:round=half"));
  EXPECT_EQ(e.scales.data<float>()[0], 1.0f + 0x1p-23f);
  EXPECT_EQ(e.codes.data<std::int8_t>()[1], 2);
  EXPECT_EQ(e.codes.data<std::int8_t>()[0], 127);
  // scale=none, half: 200.3 would wrap; here values are within range and unchanged.
  const Quantized n = quantize(make({1, 2}, {200.3f, -2.5f}), parse_scheme("int8:per_tensor:scale=none:round=half"));
  EXPECT_EQ(n.codes.data<std::int8_t>()[0], -56);
  EXPECT_EQ(n.codes.data<std::int8_t>()[1], -3);
}

TEST(Int8Tensor, ApplyMulAndZeroBlocks) {
  // CUDA path: floor + mul. Block [0, 0] -> amax floored to 1e-7, scale 1e-7/127, codes 0.
  // Block [63.5, -127] -> inverse 127/127 = 1 -> 63.5 -> 64 (rne, tie to even), -127.
  const Tensor x = make({2, 2}, {0.0f, 0.0f, 63.5f, -127.0f});
  const Quantized q = quantize(x, parse_scheme("int8:per_token:scale=floor:apply=mul"));
  EXPECT_EQ(q.scales.data<float>()[0], 1e-7f / 127.0f);
  EXPECT_EQ(q.scales.data<float>()[1], 1.0f);
  const std::vector<int> want{0, 0, 64, -127};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q.codes.data<std::int8_t>()[i], want[static_cast<std::size_t>(i)]);
  // ieee with a zero block: 0/0 = NaN -> int8 0, scale 0, dequantizes to 0.
  const Quantized z = quantize(x, parse_scheme("int8:per_token"));
  EXPECT_EQ(z.scales.data<float>()[0], 0.0f);
  EXPECT_EQ(z.codes.data<std::int8_t>()[0], 0);
  EXPECT_EQ(dequantize(z, parse_scheme("int8:per_token")).data<float>()[0], 0.0f);
}

TEST(Int8Tensor, PrescaleBeforeAmax) {
  // f = fl32(0.125 * 1.44269504) = 0.18033688; x * f is one FP32 multiply, then amax, then scale.
  const float f = sage_prescale(0.125);
  EXPECT_EQ(f, static_cast<float>(0.125 * 1.44269504));
  const Tensor x = make({1, 2}, {3.0f, -1.0f});
  QuantInputs in;
  in.sm_scale = 0.125;
  const Scheme s = parse_scheme("int8:per_tensor:prescale=sm_log2e");
  const Quantized q = quantize(x, s, in);
  EXPECT_EQ(q.scales.data<float>()[0], (3.0f * f) / 127.0f);
  EXPECT_EQ(q.codes.data<std::int8_t>()[0], 127);
  EXPECT_EQ(q.codes.data<std::int8_t>()[1], to_int8((-1.0f * f) / ((3.0f * f) / 127.0f), IntRounding::rne));
  EXPECT_THROW((void)quantize(x, s), Error);  // sm_scale missing
}

TEST(VFp8, PerChannelHandExample) {
  // One channel over 4 tokens [1, -2, 3.5, 0.1]: amax 3.5, inverse 448/3.5 = 128 exactly, stored
  // scale 3.5/448 = 2^-7. Values 128 -> 0x70, -256 -> 0xF8, 448 -> 0x7E, 12.8 -> 13 = 1.625 * 2^3
  // -> 0 1010 101 = 0x55. Channel 2 is [4, 4, 4, 4] -> 448 -> 0x7E, scale 4/448.
  const Tensor x = make({4, 2}, {1.0f, 4.0f, -2.0f, 4.0f, 3.5f, 4.0f, 0.1f, 4.0f});
  const Scheme s = parse_scheme("fp8_e4m3fn:per_channel");
  const Quantized q = quantize(x, s);
  ASSERT_EQ(q.scales.shape(), (Shape{1, 2}));
  EXPECT_EQ(q.scales.data<float>()[0], 0x1p-7f);
  EXPECT_EQ(q.scales.data<float>()[1], 4.0f / 448.0f);
  const std::vector<std::uint8_t> want{0x70, 0x7E, 0xF8, 0x7E, 0x7E, 0x7E, 0x55, 0x7E};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.codes.data<std::uint8_t>()[i], want[static_cast<std::size_t>(i)]) << i;
  const Tensor d = dequantize(q, s);
  EXPECT_EQ(d.data<float>()[6], 13.0f * 0x1p-7f);  // 0.1015625
  EXPECT_EQ(d.data<float>()[4], 3.5f);
}

TEST(VFp8, FnuzAndSmallScaleMax) {
  // FNUZ, 240: channel [1, 2.5] -> inverse 96; 96 = 1.5 * 2^6, bias 8 -> 0 1110 100 = 0x74;
  // 240 -> 0x7F.
  const Quantized f = quantize(make({2, 1}, {1.0f, 2.5f}), parse_scheme("fp8_e4m3fnuz:per_channel"));
  EXPECT_EQ(f.codes.data<std::uint8_t>()[0], 0x74);
  EXPECT_EQ(f.codes.data<std::uint8_t>()[1], 0x7F);
  EXPECT_EQ(f.scales.data<float>()[0], 2.5f / 240.0f);
  // Sage sm89 fp16 path, scale_max 2.25: [1, 4.5] -> inverse 0.5 -> 0.5 (0x30), 2.25 (0x41);
  // stored scale 4.5 / 2.25 = 2.
  const Quantized g = quantize(make({2, 1}, {1.0f, 4.5f}), parse_scheme("fp8_e4m3fn:per_channel:scale_max=2.25"));
  EXPECT_EQ(g.codes.data<std::uint8_t>()[0], 0x30);
  EXPECT_EQ(g.codes.data<std::uint8_t>()[1], 0x41);
  EXPECT_EQ(g.scales.data<float>()[0], 2.0f);
}

TEST(VFp8, ZeroChannelGivesNaN) {
  // amax 0: inverse 448/0 = Inf, 0 * Inf = NaN -> satfinite NaN code 0x7F; stored scale 0/448 = 0;
  // dequantized NaN * 0 = NaN. This is what the Sage V quantizer does with an all-zero channel.
  const Scheme s = parse_scheme("fp8_e4m3fn:per_channel");
  const Quantized q = quantize(make({2, 2}, {0.0f, 1.0f, 0.0f, 2.0f}), s);
  EXPECT_EQ(q.scales.data<float>()[0], 0.0f);
  EXPECT_EQ(q.codes.data<std::uint8_t>()[0], 0x7F);
  EXPECT_EQ(q.codes.data<std::uint8_t>()[2], 0x7F);
  const Tensor d = dequantize(q, s);
  EXPECT_TRUE(std::isnan(d.data<float>()[0]));
  EXPECT_EQ(d.data<float>()[3], 2.0f);
  // The division form (apply=div) gives the same NaN: 0 / 0.
  const Quantized v = quantize(make({1, 1}, {0.0f}), parse_scheme("fp8_e4m3fn:per_channel:apply=div"));
  EXPECT_EQ(v.codes.data<std::uint8_t>()[0], 0x7F);
}

TEST(MxTensor, Fp4BlockHandExample) {
  // One block of 32 along channels: [5.0, -0.3, 1.75, 2.5, 0, ...]. floor: amax 5 -> code 127,
  // X = 1: codes 0x6 (5 -> 4), 0x9 (-0.5), 0x4 (2), 0x4 (2). ceil: code 128, X = 2: 2.5 -> 2
  // (0x4), -0.15 -> -0 (0x8), 0.875 -> 1 (0x2), 1.25 -> 1 (0x2).
  std::vector<float> v(32, 0.0f);
  v[0] = 5.0f, v[1] = -0.3f, v[2] = 1.75f, v[3] = 2.5f;
  const Tensor x = make({1, 32}, v);
  const Scheme fl = parse_scheme("mxfp4_e2m1fn");
  const Quantized a = quantize(x, fl);
  ASSERT_EQ(a.scales.shape(), (Shape{1, 1}));
  EXPECT_EQ(a.scales.data<std::uint8_t>()[0], 127);
  const std::vector<std::uint8_t> wa{0x6, 0x9, 0x4, 0x4, 0x0};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.codes.data<std::uint8_t>()[i], wa[static_cast<std::size_t>(i)]) << i;
  const Quantized b = quantize(x, parse_scheme("mxfp4_e2m1fn:scale=ceil"));
  EXPECT_EQ(b.scales.data<std::uint8_t>()[0], 128);
  const std::vector<std::uint8_t> wb{0x4, 0x8, 0x2, 0x2};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.codes.data<std::uint8_t>()[i], wb[static_cast<std::size_t>(i)]) << i;
  EXPECT_EQ(dequantize(b, parse_scheme("mxfp4_e2m1fn:scale=ceil")).data<float>()[0], 4.0f);
  // away: 5 -> 6 (0x7), 2.5 -> 3 (0x5).
  const Quantized c = quantize(x, parse_scheme("mxfp4_e2m1fn:round=away"));
  EXPECT_EQ(c.codes.data<std::uint8_t>()[0], 0x7);
  EXPECT_EQ(c.codes.data<std::uint8_t>()[3], 0x5);
}

TEST(MxTensor, BlocksAndNaN) {
  // 2 tokens x 40 channels, block 32: blocks [0, 32) and [32, 40) per token -> scales [2, 2].
  Tensor x = random_tensor({2, 40}, 3);
  x.data<float>()[35] = std::numeric_limits<float>::quiet_NaN();
  const Scheme s = parse_scheme("mxfp8_e4m3fn");
  const Quantized q = quantize(x, s);
  ASSERT_EQ(q.scales.shape(), (Shape{2, 2}));
  EXPECT_EQ(q.scales.data<std::uint8_t>()[1], 0xFF);  // token 0, block 1 holds the NaN
  EXPECT_NE(q.scales.data<std::uint8_t>()[0], 0xFF);
  const Tensor d = dequantize(q, s);
  for (int c = 32; c < 40; ++c) EXPECT_TRUE(std::isnan(d.data<float>()[c])) << c;
  EXPECT_FALSE(std::isnan(d.data<float>()[40 + 35]));
}

TEST(MxTensor, AiterHipFp8MultiplierPath) {
  // One block with amax 448: code 128, elements x * 0.5: 448 -> 224 (0x76); 400 -> 200 =
  // 1.5625 * 2^7, a tie -> 1.5 * 128 = 192 = 0 1110 100 (0x74).
  std::vector<float> v(32, 0.0f);
  v[0] = 448.0f, v[1] = 400.0f;
  const Quantized q = quantize(make({1, 32}, v), parse_scheme("mxfp8_e4m3fn:scale=aiter_hip_fp8"));
  EXPECT_EQ(q.scales.data<std::uint8_t>()[0], 128);
  EXPECT_EQ(q.codes.data<std::uint8_t>()[0], 0x76);
  EXPECT_EQ(q.codes.data<std::uint8_t>()[1], 0x74);
}

// Half the gap between the representable neighbours of |v| in a format (the largest rounding
// error of a value inside the range), or |v| - max when |v| is beyond the largest finite value.
double half_gap(FormatId f, double v) {
  static std::vector<std::vector<double>> cache(16);
  auto& vals = cache[static_cast<std::size_t>(f)];
  if (vals.empty()) {
    for (std::uint32_t c = 0; c < code_count(f); ++c) {
      const float d = decode(f, static_cast<std::uint16_t>(c));
      if (std::isfinite(d) && d >= 0) vals.push_back(d);
    }
    std::sort(vals.begin(), vals.end());
  }
  const double a = std::fabs(v);
  auto it = std::lower_bound(vals.begin(), vals.end(), a);
  if (it == vals.end()) return a - vals.back();
  if (*it == a || it == vals.begin()) return 0.0;
  return (*it - *(it - 1)) / 2;
}

TEST(DequantError, WithinHalfAStepOfTheScale) {
  // |dequantize(quantize(x)) - x'| <= (half the local grid gap of the element format, or the
  // saturation excess) * scale, plus the FP32 roundings of the quotient and of the product
  // (bounded by 2^-20 relative). x' = prepare(x): the values actually quantized.
  const std::int64_t T = 70, C = 64;
  const Tensor x = random_tensor({2, 3, T, C}, 5, 3.0f);
  const char* schemes[] = {
      "int8:per_block=64", "int8:per_thread=sm89:role=k:scale=eps:round=half", "int8:per_token:scale=floor:apply=mul",
      "int8:per_tensor:scale=rcp", "fp8_e4m3fn:per_channel", "fp8_e4m3fn:per_token:scale=rcp:apply=div",
      "fp8_e5m2:per_block=16", "fp8_e4m3fnuz:per_channel:scale_max=224", "mxfp8_e4m3fn", "mxfp8_e5m2:scale=ceil",
      "mxfp6_e2m3fn:scale=rceil", "mxfp6_e3m2fn", "mxfp4_e2m1fn:scale=rceil", "mxfp4_e2m1fn:round=away",
      "mxint8", "mxfp4_e2m1fn:scale=aiter_triton_rne", "mxfp4_e2m1fn:scale=aiter_hip_fp4",
      "int8:per_block=32:smooth=bf16:round=half", "bf16", "fp16"};
  for (const char* text : schemes) {
    const Scheme s = parse_scheme(text);
    const Tensor xp = prepare(x, s);
    const Quantized q = quantize(x, s);
    const Tensor d = dequantize(q, s);
    const std::int64_t GT = q.scales.dim(2), GC = q.scales.dim(3);
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double ref = xp.data<float>()[i], got = d.data<float>()[i];
      const std::int64_t slab = i / (T * C), t = (i / C) % T, c = i % C;
      double scale = 1.0;
      if (s.family == Family::mx) {
        scale = std::ldexp(1.0, q.scales.data<std::uint8_t>()[(slab * GT + t) * GC + c / s.block] - 127);
      } else if (s.family != Family::cast) {
        std::int64_t gt = 0, gc = 0;
        switch (s.granularity) {
          case Granularity::per_tensor: break;
          case Granularity::per_block: gt = t / s.block; break;
          case Granularity::per_warp: gt = t / sage_warp_rows(s.arch, s.role); break;
          case Granularity::per_thread:  // K, sm89: warps of 64 rows, group (t % 8) / 2
            gt = t / 64, gc = (t % 8) / 2;
            break;
          case Granularity::per_token: gt = t; break;
          case Granularity::per_channel: gc = c; break;
        }
        const std::int64_t k = s.granularity == Granularity::per_tensor ? 0 : (slab * GT + gt) * GC + gc;
        scale = q.scales.data<float>()[k];
      }
      double bound;
      if (s.family == Family::int8) bound = 0.5 * scale;
      else if (s.family == Family::mx && s.element == FormatId::int8)
        bound = (0.5 / 64 + std::max(0.0, std::fabs(ref / scale) - 127.0 / 64)) * scale;
      else bound = half_gap(s.element, ref / scale) * scale;
      bound += 0x1p-20 * std::fabs(ref) + 0x1p-20 * scale;
      ASSERT_LE(std::fabs(got - ref), bound) << text << " element " << i << " x' " << ref << " scale " << scale;
    }
  }
}

TEST(Smoothing, MeanAndLogitShift) {
  // Mean by hand: k = [[1, 2], [3, 5], [4, 6]] -> km = [8/3, 13/3] (double, rounded to float).
  const Tensor k3 = make({3, 2}, {1, 2, 3, 5, 4, 6});
  Tensor km;
  const Tensor kp = prepare(k3, parse_scheme("int8:per_tensor:smooth=fp32"), {}, &km);
  EXPECT_EQ(km.data<float>()[0], static_cast<float>(8.0 / 3.0));
  EXPECT_EQ(km.data<float>()[1], static_cast<float>(13.0 / 3.0));
  EXPECT_EQ(kp.data<float>()[0], 1.0f - static_cast<float>(8.0 / 3.0));
  // bf16: the computed mean is a bf16 value and so is every difference.
  Tensor kmb;
  const Tensor kb = prepare(k3, parse_scheme("int8:per_tensor:smooth=bf16"), {}, &kmb);
  EXPECT_EQ(kmb.data<float>()[0], round_to(FormatId::bf16, static_cast<float>(8.0 / 3.0)));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(kb.data<float>()[i], round_to(FormatId::bf16, kb.data<float>()[i]));

  // q.(k_j - km) = q.k_j - q.km for every key j: the logits of a row shift by one constant,
  // which softmax ignores. Checked in double; the only rounding is k_j - km (FP32: half an ulp
  // per element, bf16: half a bf16 ulp), so |error| <= sum_c |q_c| * halfulp(k'_jc).
  const std::int64_t T = 50, C = 64;
  const Tensor k = random_tensor({T, C}, 9, 2.0f);
  Tensor kb16(DType::f32, {T, C});  // bf16-valued K, as the Triton path assumes
  for (std::int64_t i = 0; i < T * C; ++i) kb16.data<float>()[i] = round_to(FormatId::bf16, k.data<float>()[i] + 0.75f);
  const Tensor q = random_tensor({C}, 10);
  for (const char* text : {"int8:per_block=64:smooth=fp32", "int8:per_block=64:smooth=bf16"}) {
    const Scheme s = parse_scheme(text);
    Tensor mean;
    const Tensor ks = prepare(kb16, s, {}, &mean);
    const double ulp_bits = s.smooth == Smoothing::bf16 ? 8 : 24;
    double qkm = 0;
    for (std::int64_t c = 0; c < C; ++c) qkm += double(q.data<float>()[c]) * mean.data<float>()[c];
    for (std::int64_t j = 0; j < T; ++j) {
      double lhs = 0, rhs = 0, bound = 0;
      for (std::int64_t c = 0; c < C; ++c) {
        const double kv = ks.data<float>()[j * C + c];
        lhs += double(q.data<float>()[c]) * kv;
        rhs += double(q.data<float>()[c]) * kb16.data<float>()[j * C + c];
        bound += std::fabs(q.data<float>()[c]) * std::ldexp(std::fabs(kv), -static_cast<int>(ulp_bits));
      }
      ASSERT_LE(std::fabs(lhs - (rhs - qkm)), bound + 1e-12) << text << " key " << j;
    }
  }
  // A supplied mean is used as given; a wrong shape is refused.
  const Tensor given = make({1, 2}, {1.0f, 1.0f});
  QuantInputs in;
  in.mean = &given;
  const Tensor kg = prepare(k3, parse_scheme("int8:per_tensor:smooth=fp32"), in);
  EXPECT_EQ(kg.data<float>()[3], 4.0f);
  const Tensor bad = make({2}, {1.0f, 1.0f});
  in.mean = &bad;
  EXPECT_THROW((void)prepare(k3, parse_scheme("int8:per_tensor:smooth=fp32"), in), Error);
}

TEST(Layout, StridedBshdEqualsContiguousBhsd) {
  // The same logical data as a bshd view permuted to [B, H, S, D] and as a contiguous bhsd copy
  // must quantize to the same bits.
  const Tensor bshd = random_tensor({2, 33, 3, 32}, 12);
  const Tensor view = bshd.permute({0, 2, 1, 3});
  const Tensor copy = view.contiguous();
  for (const char* text : {"int8:per_thread=sm89:role=k:smooth=fp32", "mxfp4_e2m1fn", "fp8_e4m3fn:per_channel"}) {
    const Scheme s = parse_scheme(text);
    const Quantized a = quantize(view, s), b = quantize(copy, s);
    ASSERT_EQ(a.codes.shape(), (Shape{2, 3, 33, 32}));
    for (std::size_t i = 0; i < a.codes.storage().size(); ++i) ASSERT_EQ(a.codes.storage()[i], b.codes.storage()[i]) << text;
    for (std::size_t i = 0; i < a.scales.storage().size(); ++i) ASSERT_EQ(a.scales.storage()[i], b.scales.storage()[i]) << text;
  }
}

TEST(Errors, BadInputs) {
  const Scheme s = parse_scheme("int8:per_tensor");
  EXPECT_THROW((void)quantize(Tensor(DType::f64, {2, 2}), s), Error);
  EXPECT_THROW((void)quantize(Tensor(DType::f32, {4}), s), Error);
  EXPECT_THROW((void)quantize(Tensor(DType::f32, {2, 64}), parse_scheme("mxfp4_e2m1fn:rotate=h128")), Error);
  EXPECT_THROW((void)quantize(Tensor(DType::f32, {2, 40}), parse_scheme("mxfp4_e2m1fn:rotate=h32_bf16")), Error);
  const Quantized q = quantize(Tensor(DType::f32, {4, 8}), parse_scheme("int8:per_block=2"));
  EXPECT_THROW((void)dequantize(q.codes, q.scales, parse_scheme("int8:per_block=4")), Error);
  EXPECT_THROW((void)dequantize(q.codes, q.scales, parse_scheme("fp8_e4m3fn:per_block=2")), Error);
}

}  // namespace
}  // namespace attest::ref
