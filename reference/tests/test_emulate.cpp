// The recipe emulator against independent truths: hand-derived exact fills, the FP64 reference
// attention (reference/attention) within error bands derived from the formats, and structural
// identities (ragged = per-sequence runs, GQA = repeated heads, thread count and layout do not
// matter, reverse_kv moves only rounding).
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attest/core/recipe.hpp"
#include "attest/core/status.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest/reference/formats.hpp"
#include "attest/reference/quantize.hpp"
#include "attention_test_util.hpp"

namespace attest::ref {
namespace {

// head_dim_v = head_dim, bf16 inputs (Problem's default dtype).
Problem problem(std::int64_t b, std::int64_t h, std::int64_t hk, std::int64_t s, std::int64_t t, std::int64_t d,
                Mask mask = Mask::none) {
  return test::make_problem(b, h, hk, s, t, d, d, mask, std::nullopt, DType::bf16);
}

// N(0, 1) float32, optionally rounded to bf16 (the dtype a bf16 kernel is fed).
Tensor normal(const Shape& shape, std::uint64_t seed, bool bf16 = false) {
  Tensor t(DType::f32, shape);
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = bf16 ? round_to(FormatId::bf16, dist(gen)) : dist(gen);
  return t;
}

// ANCHORS.md's setting: one K channel shifted by +3 (an outlier channel that smoothing removes).
void shift_channel(Tensor& k, std::int64_t c, float by) {
  auto v = k.view<float, 4>();
  for (std::int64_t b = 0; b < k.dim(0); ++b)
    for (std::int64_t t = 0; t < k.dim(1); ++t)
      for (std::int64_t h = 0; h < k.dim(2); ++h) v(b, t, h, c) += by;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = c.dtype() == DType::f64 ? c.data<double>()[i] : static_cast<double>(c.data<float>()[i]);
  return v;
}

double rel_l2(const Tensor& a, const Tensor& b) {
  const auto x = values(a), y = values(b);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / den);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = values(a), y = values(b);
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), static_cast<std::size_t>(x.numel()) * 4) == 0;
}

// Relative L2 error that rounding the exact output to `f` alone causes.
double output_rounding_error(const Tensor& ref64, FormatId f) {
  Tensor r(DType::f64, ref64.shape());
  const auto v = values(ref64);
  for (std::size_t i = 0; i < v.size(); ++i)
    r.data<double>()[i] = static_cast<double>(round_to(f, static_cast<float>(v[i])));
  return rel_l2(r, ref64);
}

TEST(Emulate, NamedRecipeSchemesAreCanonical) {
  for (const auto& n : named_recipes()) {
    const Recipe r = parse_recipe(n.name);
    for (const std::string& s : {to_string(r.q), to_string(r.k), to_string(r.v), r.p_mx ? to_string(*r.p_mx) : std::string()}) {
      if (s.empty() || s == "f32") continue;
      EXPECT_EQ(to_string(parse_scheme(s)), s) << n.name;  // recipes compare schemes as text
    }
  }
}

// Integer logits in log2 units (softmax_scale = ln 2 makes c = fl(fl32(ln2) * log2e) = 1: the
// product is 1 + 2.7e-9, within half an ulp of 1), so every P is a power of two, every sum below
// is exact, and l = 64: the output is the exact weighted mean rounded once to bf16.
TEST(Emulate, ExactFillGivesTheHandDerivedAnswer) {
  const std::int64_t T = 128, D = 8;
  Problem p = problem(1, 1, 1, 4, T, D);
  p.softmax_scale = std::log(2.0);
  Tensor q(DType::f32, {1, 4, 1, D}), k(DType::f32, {1, T, 1, D}), v(DType::f32, {1, T, 1, D});
  auto qv = q.view<float, 4>(), kv = k.view<float, 4>(), vv = v.view<float, 4>();
  // Channel 0 of K: 32 keys at 0, 32 at -1, 64 at -2 (2^0 * 32 + 2^-1 * 32 + 2^-2 * 64 = 64).
  // Channel 1: the same multiset in another order (tile maxima differ between the two patterns).
  auto logit0 = [](std::int64_t j) { return j < 64 ? (j % 2 == 0 ? 0.0f : -2.0f) : (j % 2 == 0 ? -1.0f : -2.0f); };
  auto logit1 = [](std::int64_t j) { return j < 64 ? (j % 2 == 0 ? -1.0f : -2.0f) : (j % 2 == 0 ? 0.0f : -2.0f); };
  for (std::int64_t j = 0; j < T; ++j) {
    kv(0, j, 0, 0) = logit0(j);
    kv(0, j, 0, 1) = logit1(j);
    for (std::int64_t d = 0; d < D; ++d) vv(0, j, 0, d) = static_cast<float>((j * 7 + d * 3) % 9 - 4);
  }
  for (std::int64_t i = 0; i < 4; ++i) qv(0, i, 0, i % 2) = 1.0f;
  for (const char* name : {"bf16", "bf16_fa4"})
    for (const DivisionOp div : {DivisionOp::ieee_div, DivisionOp::ieee_rcp, DivisionOp::rcp_sm90})
      for (const bool rev : {false, true}) {
        Recipe r = parse_recipe(name);
        r.div = div;
        r.tile_kv = 64;
        const auto e = emulate(p, r, q, k, v, {.reverse_kv = rev});
        for (std::int64_t i = 0; i < 4; ++i) {
          for (std::int64_t d = 0; d < D; ++d) {
            double acc = 0;  // exact in double: sums of integers times powers of two
            for (std::int64_t j = 0; j < T; ++j)
              acc += std::ldexp(1.0, static_cast<int>(i % 2 == 0 ? logit0(j) : logit1(j))) * ((j * 7 + d * 3) % 9 - 4);
            EXPECT_EQ(e.out.get({0, i, 0, d}), round_to(FormatId::bf16, static_cast<float>(acc / 64)))
                << name << " div " << static_cast<int>(div) << " rev " << rev;
          }
          // lse = (m + log2 l) ln 2 with m = 0, l = 64, rounded once from double.
          EXPECT_EQ(e.lse.get({0, 0, i}), static_cast<double>(static_cast<float>(6 * 0x1.62e42fefa39efp-1))) << name;
        }
      }
}

// pv_acc=fp16 by hand: zero logits make every P exactly 1 and l = 32, and every V is
// 1 + 3 x 2^-12 (an f32 operand, not representable in fp16). Step 1 (16 keys): 16 + 3 x 2^-8 in
// FP32, to fp16 (ulp 2^-6 at 16, the excess 0.75 ulp) = 16 + 2^-6. Step 2: 16 + 2^-6 + 16 + 3 x 2^-8
// = 32 + 7 x 2^-8, to fp16 (ulp 2^-5 at 32, 0.875 ulp) = 32 + 2^-5. O = (32 + 2^-5) / 32 = 1 + 2^-10,
// where the FP32 accumulation (pv_acc=f32) gives the exact mean 1 + 3 x 2^-12.
TEST(Emulate, Fp16PvAccumulationRoundsEachStepPartialByHand) {
  const std::int64_t T = 32, D = 4;
  Problem p = problem(1, 1, 1, 1, T, D);
  Tensor q(DType::f32, {1, 1, 1, D}), k(DType::f32, {1, T, 1, D}), v(DType::f32, {1, T, 1, D});
  auto vv = v.view<float, 4>();
  for (std::int64_t j = 0; j < T; ++j)
    for (std::int64_t d = 0; d < D; ++d) vv(0, j, 0, d) = 1.0f + 3.0f * 0x1p-12f;
  Recipe r = parse_recipe("q=f32;k=f32;v=f32;p=fp16;out=f32");
  for (const bool rev : {false, true}) {
    EXPECT_EQ(emulate(p, r, q, k, v, {.reverse_kv = rev}).out.get({0, 0, 0, 1}), 1.0 + 0x1p-12 * 3) << rev;
    Recipe h = r;
    h.pv_acc = FormatId::fp16;
    const auto e = emulate(p, h, q, k, v, {.reverse_kv = rev});
    for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(e.out.get({0, 0, 0, d}), 1.0 + 0x1p-10) << rev;
  }
  Recipe mx = parse_recipe("q=f32;k=f32;v=mxfp8_e4m3fn;p=fp16;out=f32;pv_acc=fp16");
  EXPECT_THROW((void)emulate(p, mx, q, k, v), Error);
}

struct Case {
  Problem p;
  Tensor q, k, v;
};

void round_all(Tensor& x, FormatId f) {
  float* p = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = round_to(f, p[i]);
}

// N(0, 1) inputs with K channel 3 shifted by +3, optionally rounded to bf16 / fp16 afterwards
// (so that the FP64 reference sees exactly what a bf16 / fp16 kernel is fed).
Case normal_case(std::int64_t h, std::int64_t s, std::int64_t d, std::optional<FormatId> input, std::uint64_t seed) {
  Case c{problem(1, h, h, s, s, d), normal({1, s, h, d}, seed), normal({1, s, h, d}, seed + 1),
         normal({1, s, h, d}, seed + 2)};
  shift_channel(c.k, 3, 3.0f);
  if (input)
    for (Tensor* t : {&c.q, &c.k, &c.v}) round_all(*t, *input);
  return c;
}

// bf16 / fp16 recipes on bf16-valued (fp16: float) normal inputs: the error against FP64 on the
// same inputs comes from rounding the output (r_out, measured directly) plus rounding every P
// before P.V (independent relative errors of the same unit roundoff, averaged by the row's
// weights into an output error of the same order). They add in quadrature: r_out < error, and
// error < 3 r_out leaves room for the P term being up to ~2.8 r_out.
TEST(Emulate, Bf16AndFp16WithinTheirBandOfFp64) {
  for (const char* name : {"bf16", "fp16"}) {
    const bool bf = std::string(name) == "bf16";
    const Case c = normal_case(2, 512, 128, bf ? FormatId::bf16 : FormatId::fp16, 40);
    const auto ref = attention(c.p, c.q, c.k, c.v, Precision::fp64);
    const auto e = emulate(c.p, parse_recipe(name), c.q, c.k, c.v);
    const double err = rel_l2(e.out, ref.out);
    const double r_out = output_rounding_error(ref.out, bf ? FormatId::bf16 : FormatId::fp16);
    std::printf("%s: rel-L2 vs FP64 %.3e, output rounding alone %.3e, max |lse diff| %.2e\n", name, err, r_out,
                max_abs_diff(e.lse, ref.lse));
    EXPECT_GT(err, r_out) << name;
    EXPECT_LT(err, 3 * r_out) << name;
    // LSE: FP32 logits and sums, no P rounding involved: a few float ulps of |lse| ~ 5.
    EXPECT_LT(max_abs_diff(e.lse, ref.lse), 1e-5) << name;
  }
}

TEST(Emulate, ReverseKvMovesOnlyRounding) {
  const Case c = normal_case(2, 256, 64, FormatId::bf16, 50);
  const Recipe r = parse_recipe("bf16");
  const auto fwd = emulate(c.p, r, c.q, c.k, c.v);
  const auto rev = emulate(c.p, r, c.q, c.k, c.v, {.reverse_kv = true});
  EXPECT_FALSE(same_bits(fwd.out, rev.out));  // a different summation order rounds differently
  const auto ref = attention(c.p, c.q, c.k, c.v, Precision::fp64);
  // Both orders carry the same kind of error: their distance is within the error of either.
  EXPECT_LT(rel_l2(rev.out, fwd.out), 2 * rel_l2(fwd.out, ref.out));
}

// The band of a recipe from the unit roundoffs u of the roundings it performs (2^-(mantissa
// bits + 1) for q, k, v, p and out; int8: half a step of amax/127 with amax ~ 4 for N(0, 1)
// blocks, relative to a typical |x| ~ 1, i.e. ~1/64). A rounding to nearest leaves a relative
// error of rms ~ 0.4 u (uniform absolute error over the binade: u * 2/sqrt(12) * sqrt(E[1/m^2])
// ~ 0.39 u for m log-uniform in [1, 2)); each operand error reaches the output with about its
// own relative size (V, P, O directly; Q and K through logits of O(1) spread), and independent
// errors add in quadrature: predicted ~ 0.4 sqrt(sum u^2). Accepted: [0.6, 2] x predicted.
double unit_roundoff(const std::string& scheme) {
  if (scheme.empty() || scheme == "f32") return 0;
  const Scheme s = parse_scheme(scheme);
  if (s.element == FormatId::int8) return 1.0 / 64;
  return std::ldexp(1.0, -(format_info(s.element).man_bits + 1));
}
double format_roundoff(FormatId f) {
  return f == FormatId::f32 ? 0 : std::ldexp(1.0, -(format_info(f).man_bits + 1));
}

TEST(Emulate, EveryNamedRecipeWithinItsBandOfFp64) {
  const Case c = normal_case(2, 256, 128, std::nullopt, 60);
  const auto ref = attention(c.p, c.q, c.k, c.v, Precision::fp64);
  for (const auto& n : named_recipes()) {
    const Recipe r = parse_recipe(n.name);
    const auto e = emulate(c.p, r, c.q, c.k, c.v);
    const double err = rel_l2(e.out, ref.out);
    const auto rev = emulate(c.p, r, c.q, c.k, c.v, {.reverse_kv = true});
    const double u2 = std::pow(unit_roundoff(to_string(r.q)), 2) + std::pow(unit_roundoff(to_string(r.k)), 2) +
                      std::pow(unit_roundoff(to_string(r.v)), 2) + std::pow(format_roundoff(r.p), 2) +
                      std::pow(format_roundoff(r.out), 2);
    const double predicted = 0.4 * std::sqrt(u2);
    std::printf("%-24s rel-L2 vs FP64 %.3e (predicted %.3e), reverse-kv floor %.3e, max |lse diff| %.3e\n",
                std::string(n.name).c_str(), err, predicted, rel_l2(rev.out, e.out), max_abs_diff(e.lse, ref.lse));
    if (u2 == 0) {
      // f32: no operand rounding; FP32 sums of T = 256 terms are within T * 2^-24 relative.
      EXPECT_LT(err, 256 * 0x1p-24) << n.name;
      EXPECT_GT(err, 0) << n.name;
      continue;
    }
    EXPECT_GT(err, 0.6 * predicted) << n.name;
    EXPECT_LT(err, 2 * predicted) << n.name;
  }
}

// SageAttention: the error is dominated by the e4m3 roundings of V and of P (3 mantissa bits).
// The V part is measured on its own by running the FP64 reference on the dequantized V; the P
// rounding is an independent error of the same size, the INT8 Q.K a smaller one.
TEST(Emulate, SageWithinTheBandSetByItsFp8Roundings) {
  const Case c = normal_case(2, 512, 128, FormatId::bf16, 70);
  const auto ref = attention(c.p, c.q, c.k, c.v, Precision::fp64);
  const Scheme vs = parse_scheme("fp8_e4m3fn:per_channel");
  const Tensor vq = dequantize(quantize(c.v.permute({0, 2, 1, 3}), vs), vs).permute({0, 2, 1, 3});
  const double r_v = rel_l2(attention(c.p, c.q, c.k, vq, Precision::fp64).out, ref.out);
  for (const char* name : {"sage_int8_fp8_perblock", "sage_int8_fp8_perwarp", "sage_int8_fp8_perthread"}) {
    const auto e = emulate(c.p, parse_recipe(name), c.q, c.k, c.v);
    const double err = rel_l2(e.out, ref.out);
    std::printf("%s: rel-L2 vs FP64 %.3e, V rounding alone %.3e\n", name, err, r_v);
    EXPECT_GT(err, r_v) << name;
    EXPECT_LT(err, 3 * r_v) << name;
  }
}

// A max staircase: tile t's keys have logit t (log2 units) at one key and far below elsewhere.
// With rescale=conditional and threshold 8 the first max is kept while the growth stays <= 8:
// tiles 0..8 keep m = 0, tile 9 moves it to 9, tiles 10..17 keep it, tile 18 moves it: 2
// rescales; rescale=always moves it at every tile. Both stay within the bf16 band of FP64
// (P up to 2^8 is still a bf16 power of two).
TEST(Emulate, ConditionalRescaleKeepsTheOldMaxWhileGrowthIsAtMostTheThreshold) {
  const std::int64_t tiles = 20, Bc = 32, T = tiles * Bc, D = 64;
  Problem p = problem(1, 1, 1, 8, T, D);
  p.softmax_scale = std::log(2.0);  // logits in log2 units exactly (see the exact-fill test)
  Tensor q = normal({1, 8, 1, D}, 80, true), k(DType::f32, {1, T, 1, D}), v = normal({1, T, 1, D}, 81, true);
  for (std::int64_t i = 0; i < 8; ++i) q.view<float, 4>()(0, i, 0, 0) = 1.0f;
  for (std::int64_t i = 0; i < 8; ++i)
    for (std::int64_t d = 1; d < D; ++d) q.view<float, 4>()(0, i, 0, d) = 0.0f;
  for (std::int64_t j = 0; j < T; ++j) k.view<float, 4>()(0, j, 0, 0) = j % Bc == 5 ? static_cast<float>(j / Bc) : -4.0f;
  Recipe cond = parse_recipe("bf16");
  cond.tile_kv = Bc;
  cond.rescale = RescalePolicy::conditional;
  cond.rescale_threshold = 8;
  Recipe always = cond;
  always.rescale = RescalePolicy::always;
  const auto ec = emulate(p, cond, q, k, v), ea = emulate(p, always, q, k, v);
  const auto ref = attention(p, q, k, v, Precision::fp64);
  const double r_out = output_rounding_error(ref.out, FormatId::bf16);
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(ec.rescales.data<std::int32_t>()[i], 2);
    EXPECT_EQ(ea.rescales.data<std::int32_t>()[i], tiles - 1);
  }
  EXPECT_LT(rel_l2(ec.out, ref.out), 3 * r_out);
  EXPECT_LT(rel_l2(ea.out, ref.out), 3 * r_out);
  EXPECT_LT(max_abs_diff(ec.lse, ref.lse), 1e-5);
  // Threshold 0 is rescale=always (the max never grows "by at most 0" except when it stays).
  cond.rescale_threshold = 0;
  EXPECT_TRUE(same_bits(emulate(p, cond, q, k, v).out, ea.out));
}

// K smoothing shifts every logit of row i by q_i . km (times softmax_scale): the kernel's LSE
// (smoothed_lse) plus that correction is the LSE of the unsmoothed logits.
TEST(Emulate, SageLseCorrectionUndoesKSmoothing) {
  const Case c = normal_case(2, 256, 128, FormatId::bf16, 90);
  const Recipe r = parse_recipe("sage_int8_fp8_perblock");
  const auto e = emulate(c.p, r, c.q, c.k, c.v);
  const auto es = emulate(c.p, r, c.q, c.k, c.v, {.smoothed_lse = true});
  Recipe unsmoothed = r;
  unsmoothed.k = parse_scheme("int8:per_block=64:round=half");
  const auto eu = emulate(c.p, unsmoothed, c.q, c.k, c.v);
  const auto ref = attention(c.p, c.q, c.k, c.v, Precision::fp64);
  const auto kv = c.k.view<float, 4>(), qv = c.q.view<float, 4>();
  const std::int64_t S = c.p.seqlen_q, D = c.p.head_dim;
  double worst_corr = 0, worst_unsmoothed = 0;
  for (std::int64_t h = 0; h < c.p.heads_q; ++h) {
    std::vector<double> km(static_cast<std::size_t>(D));  // smooth=bf16: bf16(mean over tokens)
    for (std::int64_t d = 0; d < D; ++d) {
      double s = 0;
      for (std::int64_t t = 0; t < S; ++t) s += kv(0, t, h, d);
      km[static_cast<std::size_t>(d)] = round_to(FormatId::bf16, static_cast<float>(s / static_cast<double>(S)));
    }
    for (std::int64_t i = 0; i < S; ++i) {
      double corr = 0;
      for (std::int64_t d = 0; d < D; ++d) corr += static_cast<double>(qv(0, i, h, d)) * km[static_cast<std::size_t>(d)];
      corr *= c.p.scale();
      const double smoothed = es.lse.get({0, h, i}), full = e.lse.get({0, h, i});
      worst_corr = std::max(worst_corr, std::fabs(smoothed + corr - full) / std::fabs(full));
      worst_unsmoothed = std::max(worst_unsmoothed, std::fabs(smoothed + corr - eu.lse.get({0, h, i})));
    }
  }
  std::printf("sage lse: correction rel %.2e, vs unsmoothed emulation %.2e\n", worst_corr, worst_unsmoothed);
  EXPECT_LT(worst_corr, 4 * 0x1p-24);  // one float addition plus the rounding of the correction
  // The unsmoothed run quantizes a different K: its logits differ by INT8 rounding (a step of
  // amax/127 ~ 6/127 per element, |q| ~ 1, averaged over 128 channels times 1/sqrt(128)).
  EXPECT_LT(worst_unsmoothed, 0.05);
  EXPECT_LT(max_abs_diff(e.lse, ref.lse), 0.05);
  EXPECT_GT(max_abs_diff(es.lse, ref.lse), 0.1);  // the correction does matter here
}

TEST(Emulate, FullyMaskedRowsGiveZeroAndMinusInfinity) {
  // causal_br with S > T: query i sees keys j <= i + T - S, so rows 0..3 see none.
  const Problem p = parse_problem("b1h2k1s8t4d32:mask=causal_br");
  const Tensor q = normal({1, 8, 2, 32}, 1), k = normal({1, 4, 1, 32}, 2), v = normal({1, 4, 1, 32}, 3);
  for (const char* name : {"bf16", "sage_int8_fp8_perthread", "fp8_fp8"}) {
    const auto e = emulate(p, parse_recipe(name), q, k, v);
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < 8; ++i) {
        const double lse = e.lse.get({0, h, i});
        if (i < 4) {
          EXPECT_EQ(lse, -std::numeric_limits<double>::infinity()) << name << " row " << i;
          for (std::int64_t d = 0; d < 32; ++d) EXPECT_EQ(std::bit_cast<std::uint32_t>(e.out.data<float>()[((i * 2) + h) * 32 + d]), 0u);
        } else {
          EXPECT_TRUE(std::isfinite(lse)) << name << " row " << i;
        }
      }
  }
}

TEST(Emulate, GqaEqualsExplicitlyRepeatedHeadsBitwise) {
  const std::int64_t S = 96, D = 64;
  const Problem gqa = problem(2, 4, 2, S, S, D, Mask::causal_tl);
  const Problem mha = problem(2, 4, 4, S, S, D, Mask::causal_tl);
  const Tensor q = normal({2, S, 4, D}, 4), k = normal({2, S, 2, D}, 5), v = normal({2, S, 2, D}, 6);
  Tensor k4(DType::f32, {2, S, 4, D}), v4(DType::f32, {2, S, 4, D});
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t t = 0; t < S; ++t)
      for (std::int64_t h = 0; h < 4; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          k4.view<float, 4>()(b, t, h, d) = k.view<float, 4>()(b, t, h / 2, d);
          v4.view<float, 4>()(b, t, h, d) = v.view<float, 4>()(b, t, h / 2, d);
        }
  for (const char* name : {"bf16", "sage_int8_fp8_perblock", "mxfp4_fp4"}) {
    const auto a = emulate(gqa, parse_recipe(name), q, k, v), b = emulate(mha, parse_recipe(name), q, k4, v4);
    EXPECT_TRUE(same_bits(a.out, b.out)) << name;
    EXPECT_TRUE(same_bits(a.lse, b.lse)) << name;
  }
}

Tensor tokens(const Tensor& x, std::int64_t start, std::int64_t len) {
  Tensor out(DType::f32, {1, len, x.dim(2), x.dim(3)});
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t h = 0; h < x.dim(2); ++h)
      for (std::int64_t d = 0; d < x.dim(3); ++d) out.view<float, 4>()(0, t, h, d) = x.view<float, 4>()(0, start + t, h, d);
  return out;
}

TEST(Emulate, RaggedEqualsPerSequenceRunsBitwise) {
  const Problem p = parse_problem("b3h2k1s70t90d64:mask=causal_br:cu_q=0,37,107,110:cu_kv=0,50,140,150");
  const std::int64_t D = p.head_dim;
  const Tensor q = normal({1, 110, 2, D}, 7), k = normal({1, 150, 1, D}, 8), v = normal({1, 150, 1, D}, 9);
  for (const char* name : {"bf16", "sage_int8_fp8_perthread", "fp8_fp8", "mxfp6_fp4"}) {
    const Recipe r = parse_recipe(name);
    const auto all = emulate(p, r, q, k, v);
    for (std::int64_t b = 0; b < 3; ++b) {
      const std::int64_t q0 = p.cu_seqlens_q[static_cast<std::size_t>(b)], k0 = p.cu_seqlens_kv[static_cast<std::size_t>(b)];
      const std::int64_t sq = p.len_q(b), sk = p.len_kv(b);
      const Problem one = problem(1, 2, 1, sq, sk, D, Mask::causal_br);
      const auto e = emulate(one, r, tokens(q, q0, sq), tokens(k, k0, sk), tokens(v, k0, sk));
      for (std::int64_t i = 0; i < sq; ++i)
        for (std::int64_t h = 0; h < 2; ++h) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(e.lse.data<float>()[h * sq + i]),
                    std::bit_cast<std::uint32_t>(all.lse.data<float>()[h * 110 + q0 + i]))
              << name << " b" << b << " i" << i;
          for (std::int64_t d = 0; d < D; ++d)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(e.out.data<float>()[(i * 2 + h) * D + d]),
                      std::bit_cast<std::uint32_t>(all.out.data<float>()[((q0 + i) * 2 + h) * D + d]))
                << name;
        }
    }
  }
}

TEST(Emulate, ThreadCountAndLayoutDoNotChangeBits) {
  const Case c = normal_case(3, 200, 64, std::nullopt, 100);
  const Recipe r = parse_recipe("sage_int8_fp8_perwarp");
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = emulate(c.p, r, c.q, c.k, c.v);
  omp_set_num_threads(std::max(2, threads));
  const auto many = emulate(c.p, r, c.q, c.k, c.v);
  omp_set_num_threads(threads);
  EXPECT_TRUE(same_bits(one.out, many.out));
  EXPECT_TRUE(same_bits(one.lse, many.lse));
  // The same values stored as bhsd ([B,H,S,D] memory, viewed as [B,S,H,D]).
  auto bhsd = [](const Tensor& x) { return x.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3}); };
  const auto strided = emulate(c.p, r, bhsd(c.q), bhsd(c.k), bhsd(c.v));
  EXPECT_TRUE(same_bits(one.out, strided.out));
  // Row tiles are only a work unit.
  Recipe r2 = r;
  r2.tile_q = 7;
  EXPECT_TRUE(same_bits(one.out, emulate(c.p, r2, c.q, c.k, c.v).out));
}

TEST(Emulate, RefusesWhatItDoesNotModel) {
  const Case c = normal_case(1, 64, 64, std::nullopt, 110);
  auto message = [&](const Recipe& r) -> std::string {
    try {
      (void)emulate(c.p, r, c.q, c.k, c.v);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  Recipe r = parse_recipe("bf16");
  r.exp2 = Exp2Policy::hw;
  EXPECT_NE(message(r).find("exp2=hw has no bitwise model"), std::string::npos);
  r = parse_recipe("bf16");
  r.k = parse_scheme("int8:per_block=64");
  EXPECT_NE(message(r).find("cannot meet"), std::string::npos);
  r = parse_recipe("bf16");
  r.p = FormatId::fp4_e2m1fn;
  EXPECT_NE(message(r).find("p_mx"), std::string::npos);
  r = parse_recipe("mxfp4_fp4");
  r.tile_kv = 48;
  EXPECT_NE(message(r).find("multiple"), std::string::npos);
  r = parse_recipe("sage_int8_fp8_perblock");
  r.v = parse_scheme("fp8_e4m3fn:per_token");
  EXPECT_NE(message(r).find("per_tensor or per_channel"), std::string::npos);
  // Hadamard h128 needs head_dim 128 (the quantizer says so).
  EXPECT_FALSE(message(parse_recipe("mxfp4_fp8_had")).empty());
  EXPECT_THROW((void)emulate(c.p, parse_recipe("bf16"), c.q, c.k, normal({1, 64, 1, 32}, 1)), Error);
}

// The float32 bits of `n` consecutive values of `t` (contiguous) from element `at` on, as words.
std::vector<std::uint32_t> words(const Tensor& t, std::int64_t at, std::int64_t n) {
  std::vector<std::uint32_t> w(static_cast<std::size_t>(n));
  std::memcpy(w.data(), t.raw() + at * 4, static_cast<std::size_t>(n) * 4);
  return w;
}

// emulate_rows against the whole problem's emulate(): for each block, its rows of out,
// out_unrounded, lse and rescales compared with memcmp (same bits, NaN payloads included).
void expect_rows_equal(const Problem& p, const EmulatorOutput& all, const EmulatorOutput& rows,
                       const std::vector<RowBlock>& blocks, const std::string& what) {
  const std::int64_t H = p.heads_q, Dv = p.head_dim_v;
  const bool ragged = p.ragged();
  const std::int64_t S = ragged ? p.cu_seqlens_q.back() : p.seqlen_q;
  std::int64_t n = 0;
  for (const auto& bl : blocks) n += bl.r1 - bl.r0;
  ASSERT_EQ(rows.out.shape(), (Shape{1, n, 1, Dv})) << what;
  ASSERT_EQ(rows.out_unrounded.shape(), (Shape{1, n, 1, Dv})) << what;
  ASSERT_EQ(rows.lse.shape(), (Shape{1, 1, n})) << what;
  ASSERT_EQ(rows.rescales.shape(), (Shape{1, 1, n})) << what;
  std::int64_t at = 0;
  for (const auto& bl : blocks)
    for (std::int64_t i = bl.r0; i < bl.r1; ++i, ++at) {
      const std::int64_t bo = ragged ? 0 : bl.b,
                         row = (ragged ? p.cu_seqlens_q[static_cast<std::size_t>(bl.b)] : 0) + i;
      const std::int64_t oi = ((bo * S + row) * H + bl.h) * Dv, li = (bo * H + bl.h) * S + row;
      const std::string where =
          what + " b" + std::to_string(bl.b) + " h" + std::to_string(bl.h) + " row " + std::to_string(i);
      ASSERT_EQ(words(rows.out, at * Dv, Dv), words(all.out, oi, Dv)) << where;
      ASSERT_EQ(words(rows.out_unrounded, at * Dv, Dv), words(all.out_unrounded, oi, Dv)) << where;
      ASSERT_EQ(words(rows.lse, at, 1), words(all.lse, li, 1)) << where;
      ASSERT_EQ(words(rows.rescales, at, 1), words(all.rescales, li, 1)) << where;
    }
}

// Random blocks (any order, overlapping, empty, of every length) of problems with GQA and a causal
// mask, for recipes whose quantization spans rows (Sage per block with K smoothing, per thread,
// FP8 per tensor, MX Q/K/P/V) and a cast: emulate_rows against the whole problem's quantized
// operands is the same rows of emulate(), bit for bit, and under the floor twin too.
TEST(Emulate, RowsOfThePreparedProblemEqualTheWholeEmulationBitwise) {
  std::mt19937_64 rng(2024);
  for (const char* ps : {"b2h4k2s150d64:mask=causal_tl", "b1h4k1s100t190d64:mask=causal_br",
                         "b3h2k1s70t90d64:mask=causal_br:cu_q=0,37,107,110:cu_kv=0,50,140,150"}) {
    const Problem p = parse_problem(ps);
    const std::int64_t tq = p.ragged() ? p.cu_seqlens_q.back() : p.seqlen_q,
                       tk = p.ragged() ? p.cu_seqlens_kv.back() : p.seqlen_kv;
    const std::int64_t bq = p.ragged() ? 1 : p.batch;
    const Tensor q = normal({bq, tq, p.heads_q, p.head_dim}, 11, true);
    Tensor k = normal({bq, tk, p.heads_kv, p.head_dim}, 12, true);
    shift_channel(k, 5, 3.0f);  // an outlier channel: smoothing moves it
    const Tensor v = normal({bq, tk, p.heads_kv, p.head_dim_v}, 13, true);
    std::vector<RowBlock> blocks;
    for (int n = 0; n < 12; ++n) {
      RowBlock bl;
      bl.b = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.batch));
      bl.h = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.heads_q));
      const std::int64_t len = p.len_q(bl.b);
      bl.r0 = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(len + 1));
      bl.r1 = bl.r0 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(len - bl.r0 + 1));
      blocks.push_back(bl);
    }
    blocks.push_back({0, 0, 0, p.len_q(0)});                                  // a whole head
    blocks.push_back({p.batch - 1, p.heads_q - 1, 0, p.len_q(p.batch - 1)});  // the last one
    for (const char* name : {"sage_int8_fp8_perblock", "sage_int8_fp8_perthread", "fp8_fp8", "mxfp4_fp4", "bf16"}) {
      const Recipe r = parse_recipe(name);
      const Prepared pr = prepare(p, r, q, k, v);
      EXPECT_EQ(pr.bytes(), prepared_bytes(p, r)) << name << " " << ps;
      EXPECT_EQ(pr.problem(), p);
      for (const auto& opt : {EmulateOptions{}, floor_twin()}) {
        const std::string what = std::string(name) + " " + ps + (opt.reverse_kv ? " (floor twin)" : "");
        expect_rows_equal(p, emulate(p, r, q, k, v, opt), emulate_rows(pr, blocks, opt), blocks, what);
      }
    }
  }
}

// What the rows API is for: a block emulated as a sub-problem of its own (one head, its rows,
// the keys they see) quantizes differently from the whole problem (Sage's Q groups of 128 rows,
// FP8's per-tensor scale over every head), and so is not the whole emulation's rows; against
// the prepared whole problem it is.
TEST(Emulate, ABlockAsItsOwnSubProblemIsNotTheWholeProblemsRows) {
  const Problem p = parse_problem("b1h4k2s192d64:mask=causal_tl");
  const Tensor q = normal({1, 192, 4, 64}, 21, true), k = normal({1, 192, 2, 64}, 22, true),
               v = normal({1, 192, 2, 64}, 23, true);
  const RowBlock bl{0, 3, 64, 128};
  Problem sub = p;
  sub.heads_q = sub.heads_kv = 1;
  sub.seqlen_q = 64;
  sub.seqlen_kv = 128;
  sub.mask = Mask::causal_br;
  sub.softmax_scale = p.scale();
  Tensor qs(DType::f32, {1, 64, 1, 64}), ks(DType::f32, {1, 128, 1, 64}), vs(DType::f32, {1, 128, 1, 64});
  for (std::int64_t t = 0; t < 128; ++t)
    for (std::int64_t d = 0; d < 64; ++d) {
      if (t < 64) qs.view<float, 4>()(0, t, 0, d) = q.view<float, 4>()(0, 64 + t, 3, d);
      ks.view<float, 4>()(0, t, 0, d) = k.view<float, 4>()(0, t, 1, d);
      vs.view<float, 4>()(0, t, 0, d) = v.view<float, 4>()(0, t, 1, d);
    }
  for (const char* name : {"sage_int8_fp8_perblock", "fp8_fp8"}) {
    const Recipe r = parse_recipe(name);
    const auto rows = emulate_rows(prepare(p, r, q, k, v), {bl});
    EXPECT_FALSE(same_bits(emulate(sub, r, qs, ks, vs).out, rows.out)) << name;
    expect_rows_equal(p, emulate(p, r, q, k, v), rows, {bl}, name);
  }
  // A cast recipe quantizes element by element: there the sub-problem is the same rows.
  const Recipe bf = parse_recipe("bf16");
  EXPECT_TRUE(same_bits(emulate(sub, bf, qs, ks, vs).out, emulate_rows(prepare(p, bf, q, k, v), {bl}).out));
}

TEST(Emulate, RowsRefuseBlocksOutsideTheProblemAndUnmodelledRecipes) {
  const Problem p = parse_problem("b1h2s64d64");
  const Tensor q = normal({1, 64, 2, 64}, 31), k = normal({1, 64, 2, 64}, 32), v = normal({1, 64, 2, 64}, 33);
  const Prepared pr = prepare(p, parse_recipe("fp8_fp8"), q, k, v);
  EXPECT_THROW((void)emulate_rows(pr, {{0, 2, 0, 8}}), Error);
  EXPECT_THROW((void)emulate_rows(pr, {{0, 0, 8, 65}}), Error);
  EXPECT_THROW((void)emulate_rows(pr, {{0, 0, 9, 8}}), Error);
  EXPECT_EQ(emulate_rows(pr, {}).out.shape(), (Shape{1, 0, 1, 64}));
  EXPECT_EQ(emulate_refusal(p, parse_recipe("sage_int8_fp8_perblock")), "");
  EXPECT_EQ(emulate_refusal(p, parse_recipe("mxfp4_fp4")), "");
  Recipe r = parse_recipe("sage_int8_fp8_perblock");
  r.v = parse_scheme("fp8_e4m3fn:per_token");
  EXPECT_NE(emulate_refusal(p, r).find("per_tensor or per_channel"), std::string::npos) << emulate_refusal(p, r);
  EXPECT_THROW((void)prepare(p, r, q, k, v), Error);
  r = parse_recipe("bf16");
  r.exp2 = Exp2Policy::hw;
  EXPECT_NE(emulate_refusal(p, r).find("exp2=hw"), std::string::npos);
  EXPECT_FALSE(emulate_refusal(p, parse_recipe("mxfp4_fp8_had")).empty());  // Hadamard h128 on head_dim 64
  EXPECT_EQ(emulate_refusal(parse_problem("b1h2s64d128"), parse_recipe("mxfp4_fp8_had")), "");
}

}  // namespace
}  // namespace attest::ref
