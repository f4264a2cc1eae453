// The registry holds the production kernels and (in test builds) the mutants, each once; every
// named recipe has its cpu.tiled kernel; supports() refuses what capabilities exclude.
#include <gtest/gtest.h>

#include <set>

#include "attest/core/status.hpp"
#include "attest/kernels/kernel.hpp"

namespace attest::kernels {
namespace {

TEST(Registry, ListsProductionKernelsAndMutants) {
  auto& reg = Registry::instance();
  ASSERT_NE(reg.find("cpu.ref64"), nullptr);
  for (const auto& n : named_recipes())
    EXPECT_NE(reg.find("cpu.tiled." + std::string(n.name)), nullptr) << "no cpu.tiled kernel for recipe " << n.name;
  for (const char* m : {"skip_last_kv_tile", "scale_off_1pct", "no_rescale", "causal_tl_for_br", "gqa_wrong_head",
                        "lse_log2", "skip_last_q_tile", "oob_write", "contiguous_assumed", "nondeterministic", "ftz_acc",
                        "int8_trunc", "smooth_per_token", "p_e5m2", "fp8_v_nosat"})
    EXPECT_NE(reg.find(std::string("mutant.") + m), nullptr) << m;
  for (const auto& k : reg.match("mutant.*"))  // every mutant has its non-bitwise twin and vice versa
    if (k->name().rfind("mutant.nb.", 0) != 0) {
      EXPECT_NE(reg.find("mutant.nb." + k->name().substr(7)), nullptr) << k->name();
    }
  std::set<std::string> names;
  for (const auto& k : reg.all()) EXPECT_TRUE(names.insert(k->name()).second) << "duplicate " << k->name();
  EXPECT_EQ(reg.match("cpu.tiled.*").size(), named_recipes().size());
}

// A scoped accept key (check@field%n) covers a failure only where that size is off the modulus:
// any sequence of a ragged batch counts; an unscoped key covers the check everywhere.
TEST(Registry, ScopedAcceptKeysCoverOnlyShapesOffTheModulus) {
  const Problem t777 = parse_problem("b2h2s1t777d128"), t256 = parse_problem("b1h4s256d64");
  EXPECT_TRUE(accept_covers("accuracy@seqlen_kv%64", "accuracy", t777));
  EXPECT_FALSE(accept_covers("accuracy@seqlen_kv%64", "accuracy", t256));
  EXPECT_FALSE(accept_covers("accuracy@seqlen_kv%64", "layout", t777));
  EXPECT_TRUE(accept_covers("accuracy", "accuracy", t256));
  EXPECT_TRUE(accept_covers("nonfinite@seqlen_q%64", "nonfinite", t777));  // s_q = 1
  EXPECT_FALSE(accept_covers("accuracy@head_dim%64", "accuracy", t777));
  EXPECT_TRUE(accept_covers("accuracy@head_dim_v%64", "accuracy", parse_problem("b1h4s200d128v96")));
  EXPECT_FALSE(accept_covers("accuracy@head_dim%64", "accuracy", parse_problem("b1h4s200d128v96")));
  // Ragged: sequence lengths 400, 1, 249 of max 400 (a multiple of 16, the second is not).
  const Problem rg = parse_problem("b3h4k1s300t400d64:cu_q=0,300,500,530:cu_kv=0,400,401,650");
  EXPECT_TRUE(accept_covers("accuracy@seqlen_kv%16", "accuracy", rg));
  for (const char* bad : {"accuracy@seqlen%64", "accuracy@seqlen_kv%1", "accuracy@seqlen_kv%x", "accuracy@seqlen_kv",
                          "@seqlen_kv%64", "accuracy@seqlen_kv%64x", "accuracy@seqlen_kv%064", "accuracy@seqlen_kv% 64",
                          "accuracy@seqlen_kv%+64"})
    EXPECT_THROW(validate_accept_key(bad), Error) << bad;
  EXPECT_NO_THROW(validate_accept_key("accuracy"));
}

TEST(Registry, EveryKernelDeclaresParsableRecipesAndCallPaths) {
  for (const auto& k : Registry::instance().all()) {
    ASSERT_FALSE(k->recipes().empty()) << k->name();
    for (const auto& r : k->recipes()) EXPECT_NO_THROW(parse_recipe(r)) << k->name() << ": " << r;
    EXPECT_EQ(k->backend(), "cpu") << k->name();
    if (k->name().rfind("cpu.tiled.", 0) == 0 || k->name().rfind("mutant.", 0) == 0) {
      // mutant.nb.<name> is mutant.<name> without the (false) bitwise claim.
      EXPECT_EQ(k->capabilities().bitwise, k->name().rfind("mutant.nb.", 0) != 0) << k->name();
      EXPECT_GE(k->configs().size(), 2u) << k->name();
    }
  }
  EXPECT_FALSE(Registry::instance().find("cpu.ref64")->capabilities().bitwise);
}

}  // namespace
}  // namespace attest::kernels
