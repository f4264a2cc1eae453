// Every cpu.tiled kernel equals the recipe emulator (reference/emulate, written independently)
// bit for bit, output and LSE, on problems with causal masks, GQA, ragged batches, S != T and
// partial tiles, over several seeds. A recipe the emulator does not model yet is skipped with a
// message. Also compares the kernels' scalar primitives (exp2, rcp_sm90) with the emulator's.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <string>

#include "kernel_test_util.hpp"

#if ATTEST_KERNELS_HAVE_EMULATOR
#include "attest/reference/emulate.hpp"
#include "cpu/cpu_numerics.hpp"
#endif

namespace attest::kernels::test {
namespace {

#if ATTEST_KERNELS_HAVE_EMULATOR

const char* const kProblems[] = {
    "b1h2s70t150d128",                                                  // partial Q and KV tiles, S != T
    "b1h4k2s33t200d128v64:mask=causal_br",                              // GQA, head_dim_v, bottom-right
    "b2h2s40t40d128:mask=causal_tl:cu_q=0,40,57:cu_kv=0,40,71",         // ragged, top-left
};

// FORMATS.md's FA4 exp2, evaluated literally: the float addition x + 1.5 * 2^23 under the
// round-toward-minus-infinity mode, as the kernel's add.rm.f32 does.
float exp2_fa4_literal(float x) {
  if (!(x >= -127.0f)) x = -127.0f;
  const int mode = std::fegetround();
  std::fesetround(FE_DOWNWARD);
  volatile float big = 12582912.0f;
  const float xr = x + big;
  std::fesetround(mode);
  const float n = xr - 12582912.0f, f = x - n;
  const float p = std::fma(std::fma(std::fma(cpu::from_bits(0x3D9DF09Du), f, cpu::from_bits(0x3E6906A4u)), f,
                                    cpu::from_bits(0x3F31F519u)), f, 1.0f);
  return cpu::from_bits((cpu::bits_of(xr) << 23) + cpu::bits_of(p));
}

std::string describe_mismatch(const Tensor& got, const Tensor& want, std::int64_t i) {
  return "element " + std::to_string(i) + " of shape " + shape_string(got.shape()) + ": kernel " +
         std::to_string(got.data<float>()[i]) + " vs emulator " + std::to_string(want.data<float>()[i]);
}

class VsEmulator : public ::testing::TestWithParam<std::string> {};

TEST_P(VsEmulator, BitwiseEqualOutputAndLse) {
  const std::string name = GetParam();
  Kernel* k = Registry::instance().find(name);
  ASSERT_NE(k, nullptr);
  const Recipe r = parse_recipe(k->recipes().at(0));
  int compared = 0;
  for (const char* ps : kProblems) {
    const Problem p = parse_problem(ps);
    if (!k->supports(p, r)) continue;
    for (std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(std::string(ps) + " seed " + std::to_string(seed));
      const auto dist = seed == 1 ? datasets::Distribution::diffusion : datasets::Distribution::normal;
      const auto in = datasets::generate_qkv(p, dist, seed);
      ref::EmulatorOutput want;
      try {
        want = ref::emulate(p, r, in.q, in.k, in.v);
      } catch (const Error& e) {
        GTEST_SKIP() << "emulator does not model " << recipe_label(r) << " yet: " << e.what();
      }
      const Result got = run_kernel(name, p, r, in);
      const std::int64_t mo = first_bit_mismatch(got.out, want.out);
      EXPECT_LT(mo, 0) << "out " << (mo >= 0 ? describe_mismatch(got.out, want.out, mo) : "");
      const std::int64_t ml = first_bit_mismatch(got.lse, want.lse);
      EXPECT_LT(ml, 0) << "lse " << (ml >= 0 ? describe_mismatch(got.lse, want.lse, ml) : "");
      // Trust: most outputs finite and nonzero, so that equal bits mean something.
      std::int64_t live = 0;
      for (std::int64_t i = 0; i < got.out.numel(); ++i)
        live += std::isfinite(got.out.data<float>()[i]) && got.out.data<float>()[i] != 0.0f;
      EXPECT_GT(live, got.out.numel() * 9 / 10);
      ++compared;
    }
  }
  EXPECT_GT(compared, 0) << name << " supports none of the test problems";
}

std::vector<std::string> tiled_kernels() {
  std::vector<std::string> v;
  for (Kernel* k : Registry::instance().match("cpu.tiled.*")) v.push_back(k->name());
  return v;
}

INSTANTIATE_TEST_SUITE_P(Tiled, VsEmulator, ::testing::ValuesIn(tiled_kernels()),
                         [](const ::testing::TestParamInfo<std::string>& pi) {
                           return pi.param.substr(std::string("cpu.tiled.").size());
                         });

TEST(VsEmulatorMutants, Fp8VNosatBreaksItsDeclaredRecipeWhereTheEmulatorStaysFinite) {
  Kernel* m = Registry::instance().find("mutant.fp8_v_nosat");
  ASSERT_NE(m, nullptr);
  const Recipe r = parse_recipe(m->recipes().at(0));
  const Problem p = parse_problem("b1h2s16t300d64");
  const auto in = datasets::generate_qkv(p, datasets::Distribution::outlier, 26);
  const auto want = ref::emulate(p, r, in.q, in.k, in.v);
  for (std::int64_t i = 0; i < want.out.numel(); ++i) ASSERT_TRUE(std::isfinite(want.out.data<float>()[i])) << i;
  EXPECT_GE(first_bit_mismatch(run_kernel(m->name(), p, r, in).out, want.out), 0);
}

TEST(Primitives, Exp2AndRcpMatchTheEmulatorsIndependentImplementations) {
  // Every 10007th bit pattern that is a float in [-160, 130): correctly rounded exp2 is a function, so two correct
  // implementations agree; fa4 (against FORMATS.md evaluated literally) and rcp_sm90 are defined
  // bit for bit.
  std::int64_t n = 0, fa4_emulator_diffs = 0;
  for (std::uint64_t u = 0; u < 0x100000000u; u += 10007) {
    const float x = cpu::from_bits(static_cast<std::uint32_t>(u));
    if (!(x >= -160.0f && x < 130.0f)) continue;
    ASSERT_EQ(cpu::bits_of(cpu::exp2_cr(x)), cpu::bits_of(ref::exp2_cr(x))) << x;
    ASSERT_EQ(cpu::bits_of(cpu::exp2_fa4(x)), cpu::bits_of(exp2_fa4_literal(x))) << x;
    fa4_emulator_diffs += cpu::bits_of(cpu::exp2_fa4(x)) != cpu::bits_of(ref::exp2_fa4(x));
    const float l = std::fabs(x) + 1.0f;
    ASSERT_EQ(cpu::bits_of(cpu::rcp_sm90(l)), cpu::bits_of(ref::rcp_sm90(l))) << l;
    ++n;
  }
  EXPECT_GT(n, 20000);
  EXPECT_EQ(fa4_emulator_diffs, 0);
  EXPECT_EQ(cpu::bits_of(cpu::exp2_fa4(std::nanf(""))), cpu::bits_of(exp2_fa4_literal(std::nanf(""))));
  for (float x : {-0x1.ffff42p-31f, -0x1p-40f, -0x1p-29f, -0x1.8p-30f, 0x1p-40f, -0.0f})  // tiny arguments
  {
    EXPECT_EQ(cpu::bits_of(cpu::exp2_fa4(x)), cpu::bits_of(exp2_fa4_literal(x))) << x;
    EXPECT_EQ(cpu::bits_of(ref::exp2_fa4(x)), cpu::bits_of(exp2_fa4_literal(x))) << x;
  }
}

#else

TEST(VsEmulator, Skipped) { GTEST_SKIP() << "the recipe emulator (attest_ref_emulate) is not part of this build"; }

#endif

}  // namespace
}  // namespace attest::kernels::test
