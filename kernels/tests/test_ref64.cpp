// cpu.ref64 against the FP64 reference of reference/attention (an independent implementation):
// both compute the same exact quantity to ~1e-15 relative, so after cpu.ref64's single rounding
// to float every output and LSE must be within one float ulp of the reference (and almost always
// equal to its float rounding).
#include <gtest/gtest.h>

#include <cmath>

#include "attest/reference/attention.hpp"
#include "kernel_test_util.hpp"

namespace attest::kernels::test {
namespace {

const Recipe kF32 = parse_recipe("q=f32;k=f32;v=f32;p=f32;out=f32");

// Distance in float ulps between float a and the float rounding of double r (both finite).
double ulps(float a, double r) {
  const float rf = static_cast<float>(r);
  if (a == rf) return 0;
  return std::fabs(static_cast<double>(a) - static_cast<double>(rf)) /
         (std::nextafter(std::fabs(rf), std::numeric_limits<float>::infinity()) - std::fabs(rf));
}

void expect_close_to_fp64(const std::string& problem, datasets::Distribution dist, std::uint64_t seed) {
  SCOPED_TRACE(problem);
  const Problem p = parse_problem(problem);
  const auto in = datasets::generate_qkv(p, dist, seed);
  const Result got = run_kernel("cpu.ref64", p, kF32, in);
  const auto ref = ref::attention(p, in.q, in.k, in.v, ref::Precision::fp64, ref::Algorithm::direct);
  const double* ro = ref.out.data<double>();
  const double* rl = ref.lse.data<double>();
  const float* go = got.out.data<float>();
  const float* gl = got.lse.data<float>();
  std::int64_t exact = 0, n = got.out.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_FALSE(std::isnan(go[i])) << "out[" << i << "]";
    ASSERT_LE(ulps(go[i], ro[i]), 1.0) << "out[" << i << "] " << go[i] << " vs " << ro[i];
    exact += go[i] == static_cast<float>(ro[i]);
  }
  EXPECT_GE(static_cast<double>(exact), 0.99 * static_cast<double>(n));
  for (std::int64_t i = 0; i < got.lse.numel(); ++i) {
    if (std::isinf(rl[i])) {
      EXPECT_EQ(gl[i], -std::numeric_limits<float>::infinity()) << "lse[" << i << "]";
      continue;
    }
    ASSERT_LE(ulps(gl[i], rl[i]), 1.0) << "lse[" << i << "] " << gl[i] << " vs " << rl[i];
  }
}

TEST(Ref64, DenseMatchesFp64Reference) {
  expect_close_to_fp64("b2h4s37d64", datasets::Distribution::normal, 1);
  expect_close_to_fp64("b1h4k2s33t71d32v48", datasets::Distribution::diffusion, 2);
}

TEST(Ref64, MasksLayoutsAndRaggedMatchFp64Reference) {
  expect_close_to_fp64("b1h6k2s40t25d32:mask=causal_br", datasets::Distribution::normal, 3);  // fully-masked rows
  expect_close_to_fp64("b1h2s30t50d16:mask=causal_tl:layout=bhsd", datasets::Distribution::sink, 4);
  expect_close_to_fp64("b2h2s20t20d16v8:layout=strided:pad=5", datasets::Distribution::underflow, 5);
  expect_close_to_fp64("b3h2k1s9t13d16:mask=causal_br:cu_q=0,9,12,12:cu_kv=0,13,14,20", datasets::Distribution::normal, 6);
}

TEST(Ref64, FullyMaskedRowsAreZeroWithNegInfLse) {
  const Problem p = parse_problem("b1h1s8t3d8:mask=causal_br");  // rows 0..4 see no key
  const auto in = datasets::generate_qkv(p, datasets::Distribution::normal, 7);
  const Result r = run_kernel("cpu.ref64", p, kF32, in);
  for (std::int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.lse.data<float>()[i], -std::numeric_limits<float>::infinity());
    for (std::int64_t d = 0; d < 8; ++d) EXPECT_EQ(r.out.data<float>()[i * 8 + d], 0.0f);
  }
  EXPECT_TRUE(std::isfinite(r.lse.data<float>()[5]));
}

TEST(Ref64, RefusesOtherRecipes) {
  Kernel* k = Registry::instance().find("cpu.ref64");
  const Status st = k->supports(parse_problem("b1h1s4d8"), parse_recipe("bf16"));
  EXPECT_FALSE(st);
  EXPECT_NE(st.reason().find("not implemented"), std::string::npos) << st.reason();
  EXPECT_TRUE(k->supports(parse_problem("b1h1s4d8"), kF32));
}

}  // namespace
}  // namespace attest::kernels::test
