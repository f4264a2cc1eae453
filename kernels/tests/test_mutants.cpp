// Unit-level sanity of the mutants: each differs from its correct kernel on an input that
// exposes its bug (the gate's "every mutant caught by a check" test lives in conformance/).
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.hpp"

namespace attest::kernels::test {
namespace {

using datasets::Distribution;

struct Exposure {
  const char* mutant;
  const char* problem;
  Distribution dist;
};

// On these inputs the correct kernel and the mutant must differ (output or LSE bits).
const Exposure kExposures[] = {
    {"skip_last_kv_tile", "b1h2s16t100d32", Distribution::normal},  // 100 % 64 = 36 keys in the last tile
    {"scale_off_1pct", "b1h2s16t16d32", Distribution::normal},
    {"no_rescale", "b1h2s8t200d32", Distribution::maxstair},  // the max grows at every tile
    {"causal_tl_for_br", "b1h2s30t50d32:mask=causal_br", Distribution::normal},
    {"gqa_wrong_head", "b1h4k2s16t16d32", Distribution::normal},
    {"lse_log2", "b1h1s8t8d16", Distribution::normal},
    {"skip_last_q_tile", "b1h1s70t16d16", Distribution::normal},  // 70 % 64 = 6 rows in the last tile
    {"contiguous_assumed", "b1h2s16t16d16:layout=bhsd", Distribution::normal},
    {"int8_trunc", "b1h2s40t150d64", Distribution::normal},
    {"smooth_per_token", "b1h2s40t150d64", Distribution::diffusion},
    {"p_e5m2", "b1h2s40t150d64", Distribution::normal},
};

TEST(Mutants, EachDiffersFromItsCorrectKernelOnAnExposingInput) {
  for (const auto& e : kExposures) {
    SCOPED_TRACE(e.mutant);
    Kernel* m = Registry::instance().find(std::string("mutant.") + e.mutant);
    ASSERT_NE(m, nullptr);
    const Recipe r = parse_recipe(m->recipes().at(0));
    const std::string correct = "cpu.tiled." + recipe_label(r);
    const Problem p = parse_problem(e.problem);
    const auto in = datasets::generate_qkv(p, e.dist, 21);
    EXPECT_FALSE(bitwise_equal(run_kernel(correct, p, r, in), run_kernel(m->name(), p, r, in)));
    // Without the exposing feature most mutants agree with the correct kernel: the planted bug
    // is the only difference (a sanity check on the derivation).
  }
}

TEST(Mutants, AgreeWithTheCorrectKernelWhereTheirBugCannotShow) {
  const Problem p = parse_problem("b1h2s16t64d32");  // one full KV tile, no mask, no GQA, bshd
  const auto in = datasets::generate_qkv(p, Distribution::normal, 22);
  const Recipe r = parse_recipe("bf16");
  const Result good = run_kernel("cpu.tiled.bf16", p, r, in);
  for (const char* m : {"skip_last_kv_tile", "no_rescale", "causal_tl_for_br", "gqa_wrong_head", "skip_last_q_tile",
                        "contiguous_assumed", "ftz_acc"})
    EXPECT_TRUE(bitwise_equal(good, run_kernel(std::string("mutant.") + m, p, r, in))) << m;
}

TEST(Mutants, Fp8VNosatTurnsOutliersIntoNaN) {
  // V elements at +-[500, 2000) exceed e4m3's 448: the declared recipe casts V unscaled with
  // saturation, the mutant without, so NaN reaches the output only in the mutant.
  Kernel* m = Registry::instance().find("mutant.fp8_v_nosat");
  ASSERT_NE(m, nullptr);
  const Recipe r = parse_recipe(m->recipes().at(0));
  const Problem p = parse_problem("b1h2s16t300d64");
  const auto in = datasets::generate_qkv(p, Distribution::outlier, 26);
  const Result bad = run_kernel(m->name(), p, r, in);
  std::int64_t nan = 0;
  for (std::int64_t i = 0; i < bad.out.numel(); ++i) nan += std::isnan(bad.out.data<float>()[i]);
  EXPECT_GT(nan, 0);  // the emulator of the declared recipe stays finite: test_vs_emulator.cpp
}

TEST(Mutants, NondeterministicVariesRunToRun) {
  const Problem p = parse_problem("b1h2s16t64d32");
  const auto in = datasets::generate_qkv(p, Distribution::normal, 23);
  const Recipe r = parse_recipe("bf16");
  const Result a = run_kernel("mutant.nondeterministic", p, r, in);
  bool differs = false;
  for (int i = 0; i < 4 && !differs; ++i) differs = !bitwise_equal(a, run_kernel("mutant.nondeterministic", p, r, in));
  EXPECT_TRUE(differs);
}

TEST(Mutants, FtzAccFlushesSubnormalOutputs) {
  const Problem p = parse_problem("b1h1s4t16d16");
  auto in = datasets::generate_qkv(p, Distribution::normal, 24);
  float* v = in.v.data<float>();
  for (std::int64_t i = 0; i < in.v.numel(); ++i) v[i] = std::ldexp(v[i], -130);  // exact: bf16 subnormal range
  const Recipe r = parse_recipe("bf16");
  const Result good = run_kernel("cpu.tiled.bf16", p, r, in), bad = run_kernel("mutant.ftz_acc", p, r, in);
  std::int64_t nonzero = 0, flushed = 0;
  for (std::int64_t i = 0; i < good.out.numel(); ++i) {
    nonzero += good.out.data<float>()[i] != 0;
    flushed += good.out.data<float>()[i] != 0 && bad.out.data<float>()[i] == 0;
  }
  EXPECT_GT(nonzero, good.out.numel() / 2);
  EXPECT_GT(flushed, 0);
}

TEST(Mutants, OobWriteLandsInTheSlackJustPastTheOutput) {
  const Problem p = parse_problem("b1h2s8t8d16");
  const auto in = datasets::generate_qkv(p, Distribution::normal, 25);
  const Recipe r = parse_recipe("bf16");
  for (const char* name : {"cpu.tiled.bf16", "mutant.oob_write"}) {
    const std::int64_t n = 1 * 8 * 2 * 16, guard = 16;
    // Output with guard zones of 16 elements on both sides, filled with a canary.
    const Tensor out = Tensor::strided(DType::f32, {1, 8, 2, 16}, contiguous_strides({1, 8, 2, 16}), guard, n + 2 * guard);
    auto* all = reinterpret_cast<float*>(out.storage().data());
    for (std::int64_t i = 0; i < n + 2 * guard; ++i) all[i] = -12345.0f;
    Registry::instance().find(name)->run(Args{p, r, in.q, in.k, in.v, out, nullptr, ""});
    std::int64_t touched = 0;
    for (std::int64_t i = 0; i < guard; ++i) touched += (all[i] != -12345.0f) + (all[guard + n + i] != -12345.0f);
    EXPECT_EQ(touched, std::string(name) == "mutant.oob_write" ? 1 : 0) << name;
  }
}

}  // namespace
}  // namespace attest::kernels::test
