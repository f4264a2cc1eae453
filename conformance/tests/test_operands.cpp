// Check `operands` (operands.hpp). Oracles: the reference quantizer (ref::quantize) on the call's
// inputs, and an independently written model of Sage 1.0.6's fp16 path (mean summed in float in
// token order then rounded to fp16, k - km rounded to fp16, then the scheme without smoothing):
// both are correct kernels and must pass. The plants (issue 34's Sage plants and two more) are
// closed-form edits of those operands and must fail, each on the figure it moves.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attest/conformance/operands.hpp"
#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"

namespace attest::conformance {
namespace {

using i64 = std::int64_t;
constexpr i64 B = 1, H = 2, T = 200, C = 64;  // 200 = 3 x 64 + 8: a partial last K block
constexpr double kScale = 0.125;              // 1 / sqrt(64)

float f16(float x) { return ref::round_to(FormatId::fp16, x); }

// fp16-valued Q and K with per-channel offsets (what smooth-K exists for).
Tensor fill(unsigned seed, bool offsets) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> off(C);
  for (auto& o : off) o = offsets ? 3.0f * n(g) : 0.0f;
  Tensor x(DType::f32, {B, H, T, C});
  float* p = x.data<float>();
  for (i64 i = 0; i < x.numel(); ++i) p[i] = f16(off[i % C] + n(g));
  return x;
}

Recipe sage() {
  Recipe r;
  r.q = parse_scheme("int8:per_block=128:round=half:prescale=sm_log2e");
  r.k = parse_scheme("int8:per_block=64:round=half:smooth=fp32");
  return r;
}

// Sage's fp16 K path, written here: km = fp16(mean in float, token order); k' = fp16(k - km);
// per-block int8 of k' (the scheme without smoothing). `mean_rows` < T: the mean of the first
// rows only (the plant smooth_k_mean_over_one_block).
KernelOperand sage_k(const Tensor& k, i64 mean_rows = T) {
  KernelOperand o{"k", k, DType::f16, {}, {}, Tensor(DType::f32, {B, H, 1, C})};
  Tensor kp(DType::f32, {B, H, T, C});
  const float* x = k.data<float>();
  for (i64 h = 0; h < H; ++h)
    for (i64 c = 0; c < C; ++c) {
      float sum = 0;
      for (i64 t = 0; t < mean_rows; ++t) sum += x[(h * T + t) * C + c];
      const float km = f16(sum / static_cast<float>(mean_rows));
      o.mean.data<float>()[h * C + c] = km;
      for (i64 t = 0; t < T; ++t) kp.data<float>()[(h * T + t) * C + c] = f16(x[(h * T + t) * C + c] - km);
    }
  const auto qz = ref::quantize(kp, parse_scheme("int8:per_block=64:round=half"));
  o.codes = qz.codes;
  o.scales = qz.scales;
  return o;
}

KernelOperand ref_q(const Tensor& q) {
  ref::QuantInputs in;
  in.sm_scale = kScale;
  const auto qz = ref::quantize(q, sage().q, in);
  return {"q", q, DType::f16, qz.codes, qz.scales, {}};
}

struct Operands : ::testing::Test {
  Tensor q = fill(1, false), k = fill(2, true);
};

TEST_F(Operands, TheReferenceQuantizerAndAnIndependentFp16SagePathPass) {
  const auto o = judge_operands(sage(), kScale, {ref_q(q), sage_k(k)});
  EXPECT_EQ(o.verdict, Verdict::passed) << o.reason;
  EXPECT_EQ(o.figures.at("k").at("scales").at("groups").get<i64>(), B * H * 4);
  EXPECT_EQ(o.figures.at("q").at("codes").at("elements").get<i64>(), B * H * T * C);
  // Without the kernel's km (the reference's FP64 mean, the mean bound widening each value's).
  KernelOperand k2 = sage_k(k);
  k2.mean = Tensor();
  const auto o2 = judge_operands(sage(), kScale, {k2});
  EXPECT_EQ(o2.verdict, Verdict::passed) << o2.reason;
  // The reference's own K quantization (smooth=fp32, FP64 mean rounded to float) passes too.
  const auto rk = ref::quantize(k, sage().k);
  const auto o3 = judge_operands(sage(), kScale, {{"k", k, DType::f32, rk.codes, rk.scales, rk.mean}});
  EXPECT_EQ(o3.verdict, Verdict::passed) << o3.reason;
}

TEST_F(Operands, SmoothKMeanOverOneBlockFails) {
  const auto o = judge_operands(sage(), kScale, {sage_k(k, 64)});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_NE(o.reason.find("smoothing means off"), std::string::npos) << o.reason;
  EXPECT_GT(o.figures.at("k").at("mean").at("off").get<i64>(), B * H * C / 2);
  // Codes and scales follow the kernel's (wrong) km consistently: the mean is the finding.
  EXPECT_EQ(o.figures.at("k").at("scales").at("off").get<i64>(), 0);
  EXPECT_EQ(o.figures.at("k").at("codes").at("off").get<i64>(), 0);
}

TEST_F(Operands, LastPartialBlockScaleFromThePreviousBlockFails) {
  KernelOperand kk = sage_k(k);
  float* s = kk.scales.data<float>();  // [B, H, 4, 1]
  for (i64 h = 0; h < H; ++h) s[h * 4 + 3] = s[h * 4 + 2];
  const auto o = judge_operands(sage(), kScale, {kk});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_NE(o.reason.find("scales off"), std::string::npos) << o.reason;
  const auto& w = o.figures.at("k").at("scales").at("worst").at("at");
  EXPECT_EQ(w.at(2).get<i64>(), 3);  // the last block
}

TEST_F(Operands, KScalesPerTensorAndOneCodeOffByTwoFail) {
  KernelOperand kk = sage_k(k);
  float* s = kk.scales.data<float>();
  float mx = 0;
  for (i64 i = 0; i < kk.scales.numel(); ++i) mx = std::max(mx, s[i]);
  for (i64 i = 0; i < kk.scales.numel(); ++i) s[i] = mx;
  EXPECT_EQ(judge_operands(sage(), kScale, {kk}).verdict, Verdict::failed);

  KernelOperand qq = ref_q(q);
  auto* c = qq.codes.data<std::int8_t>();
  const i64 at = (1 * T + 130) * C + 5;  // head 1, token 130, channel 5
  c[at] = static_cast<std::int8_t>(c[at] > 0 ? c[at] - 2 : c[at] + 2);
  const auto o = judge_operands(sage(), kScale, {qq});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_EQ(o.figures.at("q").at("codes").at("off").get<i64>(), 1);
  EXPECT_EQ(o.figures.at("q").at("codes").at("worst").at("at"), (nlohmann::json{0, 1, 130, 5}));
  EXPECT_EQ(o.figures.at("q").at("scales").at("off").get<i64>(), 0);
}

// A one-ulp move of a scale at its group's amax-rounding boundary is within the bound; a relative
// 1e-3 move is not (the fp16 smoothing bound is 2^-11 ~ 4.9e-4 of amax / 127).
TEST_F(Operands, ScaleBoundSeparatesRoundingFromADefect) {
  KernelOperand kk = sage_k(k);
  kk.scales.data<float>()[1] = std::nextafter(kk.scales.data<float>()[1], 1.0f);
  EXPECT_EQ(judge_operands(sage(), kScale, {kk}).verdict, Verdict::passed);
  kk.scales.data<float>()[1] *= 1.002f;
  const auto o = judge_operands(sage(), kScale, {kk});
  EXPECT_EQ(o.verdict, Verdict::failed);
  EXPECT_EQ(o.figures.at("k").at("scales").at("off").get<i64>(), 1);
}

TEST_F(Operands, UnmodelledSchemesAreRefusedAndBadShapesThrow) {
  Recipe r = sage();
  r.k = parse_scheme("mxfp8_e4m3fn");
  const auto o = judge_operands(r, kScale, {sage_k(k)});
  EXPECT_EQ(o.verdict, Verdict::unsupported);
  EXPECT_NE(o.reason.find("int8 and fp8 schemes only"), std::string::npos) << o.reason;
  KernelOperand kk = sage_k(k);
  kk.scales = Tensor(DType::f32, {B, H, 3, 1});
  EXPECT_THROW(judge_operands(sage(), kScale, {kk}), Error);
  kk = sage_k(k);
  kk.role = "p";
  EXPECT_THROW(judge_operands(sage(), kScale, {kk}), Error);
}

// ---- fp8 (cuDNN / Transformer Engine per-tensor E4M3: codes = sat(x * fl(448 / amax)), descale
// amax / 448), written here as torch does it in scripts/device/fp8.py; the element cast is the
// codec proven against ml_dtypes on every code (reference/tests). ----

Recipe fp8_recipe() {
  Recipe r;
  r.q = r.k = r.v = parse_scheme("fp8_e4m3fn:per_tensor");
  return r;
}

// Per-tensor FP8 of x as a framework does it: `M` the format maximum, `fmt` the element format.
KernelOperand fp8_op(const std::string& role, const Tensor& x, FormatId fmt = FormatId::fp8_e4m3fn) {
  const double M = format_spec(fmt).max_finite;
  const float* p = x.data<float>();
  float amax = 0;
  for (i64 i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(p[i]));
  const float mult = static_cast<float>(M) / amax, descale = amax / static_cast<float>(M);
  KernelOperand o{role, x, DType::bf16, Tensor(fmt == FormatId::fp8_e5m2 ? DType::fp8_e5m2 : DType::fp8_e4m3fn, x.shape()),
                  Tensor(DType::f32, {1, 1, 1, 1}), {}};
  auto* c = reinterpret_cast<std::uint8_t*>(o.codes.raw());
  for (i64 i = 0; i < x.numel(); ++i)
    c[i] = static_cast<std::uint8_t>(ref::encode(fmt, p[i] * mult, ref::Rounding::rne, ref::Overflow::sat_cuda));
  o.scales.data<float>()[0] = descale;
  return o;
}

TEST_F(Operands, Fp8PerTensorAsTorchDoesItPassesAndTheReferenceToo) {
  const auto o = judge_operands(fp8_recipe(), kScale, {fp8_op("q", q), fp8_op("k", k), fp8_op("v", k)});
  EXPECT_EQ(o.verdict, Verdict::passed) << o.reason;
  EXPECT_EQ(o.figures.at("k").at("codes").at("elements").get<i64>(), B * H * T * C);
  const auto rq = ref::quantize(q, fp8_recipe().q);  // u8 raw codes in the scheme's format
  const auto o2 = judge_operands(fp8_recipe(), kScale, {{"q", q, DType::f32, rq.codes, rq.scales, {}}});
  EXPECT_EQ(o2.verdict, Verdict::passed) << o2.reason;
  // The reference's scale rule rcp (amax * fl(1 / 448)) differs from amax / 448 by rounding only.
  KernelOperand qq = fp8_op("q", q);
  float amax = 0;
  for (i64 i = 0; i < q.numel(); ++i) amax = std::max(amax, std::fabs(q.data<float>()[i]));
  qq.scales.data<float>()[0] = ref::uniform_scale(amax, ref::ScaleRule::rcp, 448.0f);
  EXPECT_EQ(judge_operands(fp8_recipe(), kScale, {qq}).verdict, Verdict::passed);
}

// Issue 34's cuDNN plant p_e5m2: the graph's FP8 type E5M2 makes Q, K and V E5M2 codes with
// descale amax / 57344. The format is the finding; the scale, 128x off, too.
TEST_F(Operands, Fp8E5m2WhereTheRecipeSaysE4m3Fails) {
  const auto o = judge_operands(fp8_recipe(), kScale, {fp8_op("q", q, FormatId::fp8_e5m2), fp8_op("k", k)});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_NE(o.reason.find("q: codes are fp8_e5m2 where the scheme 'fp8_e4m3fn:per_tensor' makes fp8_e4m3fn"), std::string::npos) << o.reason;
  EXPECT_EQ(o.figures.at("q").at("scales").at("off").get<i64>(), 1);
  EXPECT_NEAR(o.figures.at("q").at("scales").at("worst").at("ratio").get<double>(), 448.0 / 57344.0, 1e-9);
  EXPECT_FALSE(o.figures.at("q").at("codes").at("judged").get<bool>());
  EXPECT_EQ(o.figures.at("k").at("codes").at("off").get<i64>(), 0);  // K is right: only Q is named
  EXPECT_EQ(o.reason.find("k:"), std::string::npos) << o.reason;
}

// One code one grid step off, and a descale applied twice (descale^2 handed over), fail on the
// figure each moves; one NaN code is off whatever its bound.
TEST_F(Operands, Fp8OneCodeOneStepOffAndASquaredDescaleFail) {
  KernelOperand kk = fp8_op("k", k);
  auto* c = reinterpret_cast<std::uint8_t*>(kk.codes.raw());
  const i64 at = (1 * T + 77) * C + 9;
  c[at] = static_cast<std::uint8_t>((c[at] & 0x7f) == 0x7e ? c[at] - 1 : c[at] + 1);  // next code, same sign
  auto o = judge_operands(fp8_recipe(), kScale, {kk});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_EQ(o.figures.at("k").at("codes").at("off").get<i64>(), 1);
  EXPECT_EQ(o.figures.at("k").at("codes").at("worst").at("at"), (nlohmann::json{0, 1, 77, 9}));
  c[at] = 0x7f;  // NaN
  o = judge_operands(fp8_recipe(), kScale, {kk});
  EXPECT_EQ(o.figures.at("k").at("codes").at("off").get<i64>(), 1);

  KernelOperand vv = fp8_op("v", k);
  vv.scales.data<float>()[0] *= vv.scales.data<float>()[0];
  o = judge_operands(fp8_recipe(), kScale, {vv});
  ASSERT_EQ(o.verdict, Verdict::failed);
  EXPECT_EQ(o.figures.at("v").at("scales").at("off").get<i64>(), 1);
  EXPECT_NE(o.reason.find("v: 1 of 1 scales off"), std::string::npos) << o.reason;
}

// Sage 2's V: fp8_e4m3fn:per_channel, x * fl(448 / amax_c) per (slab, channel) as torch writes
// it; one scale for the whole tensor where the recipe says per channel fails on the scales.
TEST_F(Operands, Fp8PerChannelAsTorchWritesItPassesAndPerTensorScalesFail) {
  Recipe r;
  r.v = parse_scheme("fp8_e4m3fn:per_channel");
  const auto per_channel = [&](bool one_scale) {
    KernelOperand o{"v", k, DType::bf16, Tensor(DType::fp8_e4m3fn, k.shape()), Tensor(DType::f32, {B, H, 1, C}), {}};
    const float* x = k.data<float>();
    auto* c8 = reinterpret_cast<std::uint8_t*>(o.codes.raw());
    float all = 0;
    for (i64 i = 0; i < k.numel(); ++i) all = std::max(all, std::fabs(x[i]));
    for (i64 h = 0; h < H; ++h)
      for (i64 c = 0; c < C; ++c) {
        float amax = 0;
        for (i64 t = 0; t < T; ++t) amax = std::max(amax, std::fabs(x[(h * T + t) * C + c]));
        if (one_scale) amax = all;
        const float mult = 448.0f / amax;
        o.scales.data<float>()[h * C + c] = amax / 448.0f;
        for (i64 t = 0; t < T; ++t) {
          const i64 i = (h * T + t) * C + c;
          c8[i] = static_cast<std::uint8_t>(ref::encode(FormatId::fp8_e4m3fn, x[i] * mult, ref::Rounding::rne, ref::Overflow::sat_cuda));
        }
      }
    return o;
  };
  const auto o = judge_operands(r, kScale, {per_channel(false)});
  EXPECT_EQ(o.verdict, Verdict::passed) << o.reason;
  EXPECT_EQ(o.figures.at("v").at("scales").at("groups").get<i64>(), B * H * C);
  const auto bad = judge_operands(r, kScale, {per_channel(true)});
  ASSERT_EQ(bad.verdict, Verdict::failed);
  EXPECT_GT(bad.figures.at("v").at("scales").at("off").get<i64>(), B * H * C / 2);  // K's offsets make every channel's amax its own
}

// Sage 2's Triton per-thread Q (sm90: 16-row warps, 8 groups of rows t % 8): the reference's
// own quantization passes; two groups' scales exchanged inside one warp fail there.
TEST_F(Operands, Int8PerThreadGroupsAreJudgedInTheirOwnGeometry) {
  Recipe r;
  r.q = parse_scheme("int8:per_thread=sm90:scale=eps:round=half");
  const auto qz = ref::quantize(q, r.q);
  KernelOperand qq{"q", q, DType::f16, qz.codes, qz.scales, {}};
  const auto o = judge_operands(r, kScale, {qq});
  ASSERT_EQ(o.verdict, Verdict::passed) << o.reason;
  float* s = qq.scales.data<float>();  // [B, H, ceil(T / 16), 8]
  const i64 warp = 5;
  std::swap(s[warp * 8 + 2], s[warp * 8 + 3]);
  const auto bad = judge_operands(r, kScale, {qq});
  ASSERT_EQ(bad.verdict, Verdict::failed);
  EXPECT_EQ(bad.figures.at("q").at("scales").at("off").get<i64>(), 2) << bad.reason;
  EXPECT_EQ(bad.figures.at("q").at("scales").at("worst").at("at").at(2).get<i64>(), warp);
}

TEST_F(Operands, Fp8CodesOfANonFp8DtypeThrow) {
  KernelOperand kk = fp8_op("k", k);
  kk.codes = Tensor(DType::i8, kk.input.shape());
  EXPECT_THROW(judge_operands(fp8_recipe(), kScale, {kk}), Error);
}

}  // namespace
}  // namespace attest::conformance
