// cpu.tiled.*: call-path parity, layout and thread-count invariance, run-to-run determinism,
// accuracy against cpu.ref64, refusals with reasons.
#include <algorithm>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "kernel_test_util.hpp"

namespace attest::kernels::test {
namespace {

using datasets::Distribution;

double rel_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

const char* const kProblems[] = {
    "b2h4s70t100d64",                                   // partial Q and KV tiles, S != T
    "b1h4k2s65t130d32v48:mask=causal_br",               // GQA, head_dim_v, bottom-right causal
    "b1h2s90t40d32:mask=causal_tl",                     // fully-masked rows do not arise; S > T
    "b3h2s70t90d32:mask=causal_br:cu_q=0,70,71,101:cu_kv=0,90,92,122",  // ragged
};

class TiledFloat : public ::testing::TestWithParam<const char*> {};

TEST_P(TiledFloat, CallPathsLayoutsAndThreadsGiveTheSameBits) {
  const Recipe r = parse_recipe(GetParam());
  const std::string name = std::string("cpu.tiled.") + GetParam();
  for (const char* ps : kProblems) {
    SCOPED_TRACE(ps);
    const Problem p = parse_problem(ps);
    const auto in = datasets::generate_qkv(p, Distribution::diffusion, 11);
    // The base run uses at least 2 threads, so "one thread" compares two thread counts on any host
    // (a 1-core machine or OMP_NUM_THREADS=1 would otherwise compare one thread with itself).
    const int threads = omp_get_max_threads();
    omp_set_num_threads(std::max(2, threads));
    const Result base = run_kernel(name, p, r, in);
    for (const auto& cfg : Registry::instance().find(name)->configs())
      EXPECT_TRUE(bitwise_equal(base, run_kernel(name, p, r, in, cfg))) << "config '" << cfg << "'";
    for (const char* lay : {":layout=bhsd", ":layout=strided:pad=3"})
      EXPECT_TRUE(bitwise_equal(base, run_kernel(name, parse_problem(std::string(ps) + lay), r, in))) << lay;
    omp_set_num_threads(1);
    const Result one = run_kernel(name, p, r, in);
    omp_set_num_threads(std::max(2, threads));
    EXPECT_TRUE(bitwise_equal(base, one)) << "one thread";
    EXPECT_TRUE(bitwise_equal(base, run_kernel(name, p, r, in))) << "rerun";
    omp_set_num_threads(threads);
  }
}

TEST_P(TiledFloat, CloseToFp64WithinTheFormatsError) {
  const Recipe r = parse_recipe(GetParam());
  const Recipe f32 = parse_recipe("q=f32;k=f32;v=f32;p=f32;out=f32");
  // bf16 output rounding alone is ~1.1e-3 relative (ANCHORS.md: real kernels 2.2e-3); fp16 ~1/8 of it.
  const double bound = r.out == FormatId::bf16 ? 6e-3 : 8e-4;
  for (const char* ps : kProblems) {
    const Problem p = parse_problem(ps);
    const auto in = datasets::generate_qkv(p, Distribution::normal, 12);
    const double e = rel_l2(run_kernel(std::string("cpu.tiled.") + GetParam(), p, r, in).out,
                            run_kernel("cpu.ref64", p, f32, in).out);
    EXPECT_LT(e, bound) << ps;
    EXPECT_GT(e, bound / 50) << ps << ": suspiciously exact for a rounded format";
  }
}

INSTANTIATE_TEST_SUITE_P(Float, TiledFloat, ::testing::Values("bf16", "fp16"));

TEST(Tiled, RefusesOtherRecipesAndUnknownConfigsWithAReason) {
  Kernel* k = Registry::instance().find("cpu.tiled.bf16");
  const Problem p = parse_problem("b1h1s4d8");
  const Status st = k->supports(p, parse_recipe("fp16"));
  EXPECT_FALSE(st);
  EXPECT_NE(st.reason().find("fp16"), std::string::npos) << st.reason();
  const auto in = datasets::generate_qkv(p, Distribution::normal, 1);
  EXPECT_THROW(run_kernel("cpu.tiled.bf16", p, parse_recipe("fp16"), in), Error);
  EXPECT_THROW(run_kernel("cpu.tiled.bf16", p, parse_recipe("bf16"), in, "path=nope"), Error);
  Problem bad = p;
  bad.heads_q = 3, bad.heads_kv = 2;  // heads_q not a multiple of heads_kv
  EXPECT_FALSE(k->supports(bad, parse_recipe("bf16")));
}

// A kernel with narrow capabilities: the registry's supports() names each excluded feature.
class Narrow final : public Kernel {
 public:
  std::string name() const override { return "test.narrow"; }
  std::string backend() const override { return "cpu"; }
  std::vector<std::string> recipes() const override { return {"bf16"}; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.head_dims = {64};
    c.masks = {Mask::none};
    c.layouts = {Layout::bshd};
    c.gqa = c.cross = c.ragged = c.head_dim_v = false;
    return c;
  }
  void run(const Args&) override {}
};

TEST(Tiled, SupportsRefusesWhatCapabilitiesExclude) {
  const Narrow k;
  const Recipe r = parse_recipe("bf16");
  EXPECT_TRUE(k.supports(parse_problem("b1h2s8d64"), r));
  const std::pair<const char*, const char*> cases[] = {
      {"b1h2s8d32", "head_dim"}, {"b1h2s8d64:mask=causal_tl", "mask"}, {"b1h2s8d64:layout=bhsd", "layout"},
      {"b1h2k1s8d64", "GQA"}, {"b1h2s8t9d64", "cross"}, {"b1h2s8d64v32", "head_dim_v"},
      {"b1h2s8d64:cu_q=0,8:cu_kv=0,8", "ragged"}};
  for (const auto& [ps, word] : cases) {
    const Status st = k.supports(parse_problem(ps), r);
    EXPECT_FALSE(st) << ps;
    EXPECT_NE(st.reason().find(word), std::string::npos) << ps << ": " << st.reason();
  }
}

}  // namespace
}  // namespace attest::kernels::test
