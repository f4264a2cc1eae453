// FP64 against 50-digit multiprecision (slow: cpp_bin_float_50's exp costs ~7 us).
#include <gtest/gtest.h>

#include <cmath>

#include "attention_test_util.hpp"
#include "attest/reference/attention.hpp"

namespace attest::ref {
namespace {

constexpr double kU64 = 0x1p-53;

// mp50 carries 166 significand bits, so its result is the exact attention of the inputs to
// ~1e-48; the FP64 error is then all of the difference: rel-L2 <= rounding_bound(T, D, 2^-53),
// which for T = 512, D = 16 is 5.9e-15 (the brief's requirement is 1e-13).
TEST(ReferenceAttentionMp50, Fp64WithinRoundingBoundOfMp50) {
  for (Mask mask : {Mask::none, Mask::causal_br}) {
    const std::int64_t S = 512, T = mask == Mask::none ? 512 : 384, D = 16;
    const Problem p = test::make_problem(1, 2, 1, S, T, D, D, mask);
    const Tensor q = test::normal({1, S, 2, D}, 100), k = test::normal({1, T, 1, D}, 101);
    const Tensor v = test::normal({1, T, 1, D}, 102);
    const AttentionOutput mp = attention(p, q, k, v, Precision::mp50);
    const auto ref = test::values(mp.out), ref_lse = test::values(mp.lse);
    const double bound = test::rounding_bound(T, D, kU64);
    ASSERT_LE(bound, 1e-13);
    for (Algorithm alg : {Algorithm::online, Algorithm::direct}) {
      const AttentionOutput r = attention(p, q, k, v, Precision::fp64, alg);
      const auto out = test::values(r.out), lse = test::values(r.lse);
      EXPECT_LE(test::rel_l2(out, ref), bound) << mask_name(mask) << " " << algorithm_name(alg);
      EXPECT_LE(test::max_abs_diff(out, ref), bound * test::max_abs(ref)) << mask_name(mask);
      for (std::size_t e = 0; e < lse.size(); ++e) {
        if (std::isinf(ref_lse[e])) {
          EXPECT_EQ(lse[e], ref_lse[e]);
        } else {
          EXPECT_NEAR(lse[e], ref_lse[e], bound * (1 + std::abs(ref_lse[e]))) << "lse " << e;
        }
      }
    }
  }
}

// The two mp50 algorithms are each ~1e-48 from exact: after rounding to double they differ by at
// most one ulp per element, on a problem with GQA, Dv != D, ragged tiles and causal_br.
TEST(ReferenceAttentionMp50, OnlineAgreesWithDirectToOneUlp) {
  const Problem p = parse_problem("b2h4k1s100t333d16v24:mask=causal_br:dtype=f64");
  const Tensor q = test::normal({2, 100, 4, 16}, 103, DType::f32, 2.0);
  const Tensor k = test::normal({2, 333, 1, 16}, 104, DType::f32), v = test::normal({2, 333, 1, 24}, 105, DType::f32);
  const auto d = attention_typed<Mp50>(p, q, k, v, Algorithm::direct);
  const auto o = attention_typed<Mp50>(p, q, k, v, Algorithm::online, Tiling{32, 64});
  for (std::size_t e = 0; e < d.out.size(); ++e) {
    const double a = d.out[e].convert_to<double>(), b = o.out[e].convert_to<double>();
    ASSERT_LE(std::abs(a - b), 2 * kU64 * std::abs(a)) << "element " << e;
    // Before rounding they agree to far below double precision.
    ASSERT_LE(abs(d.out[e] - o.out[e]), Mp50(1e-40) * (1 + abs(d.out[e])));
  }
}

}  // namespace
}  // namespace attest::ref
